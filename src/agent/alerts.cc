#include "agent/alerts.h"

#include <fmt/format.h>

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "store/incident_json.h"
#include "common/json_text.h"

namespace gpudoctor {

std::string AlertJson(const Alert& alert) {
  return ToJsonText(TransitionToJson(alert.transition, alert.hostname, alert.suppressed));
}

std::string AlertLine(const Alert& alert) {
  const Finding& f = alert.transition.incident.finding;
  std::string where;
  if (f.gpu) {
    where = f.gpu->index ? fmt::format(" on GPU {}", *f.gpu->index) : std::string(" on a GPU");
    if (!f.gpu->pci_bus_id.empty()) where += fmt::format(" ({})", f.gpu->pci_bus_id);
  }
  std::string line = fmt::format("{} {} {}{}: {}", TransitionName(alert.transition.kind),
                                 SeverityName(f.severity), f.id, where, f.summary);
  if (alert.suppressed > 0) line += fmt::format(" [{} earlier changes suppressed]", alert.suppressed);
  return line;
}

// ---- AlertRateLimiter ---------------------------------------------------

bool AlertRateLimiter::SameState(const Entry& entry, const FindingTransition& transition) {
  const bool entry_open = !ClosesIncident(entry.last_kind);
  const bool transition_open = !ClosesIncident(transition.kind);
  if (entry_open != transition_open) return false;
  return !entry_open || entry.last_severity == transition.incident.finding.severity;
}

std::optional<Alert> AlertRateLimiter::Offer(const FindingTransition& transition, std::string_view hostname,
                                             WallTime now) {
  auto [it, fresh] = entries_.try_emplace(transition.incident.key);
  Entry& entry = it->second;
  if (!fresh && now - entry.last_sent < min_interval_) {
    entry.held = transition;
    ++entry.suppressed;
    ++suppressed_total_;
    return std::nullopt;
  }
  Alert alert{transition, std::string(hostname), entry.suppressed};
  entry.last_sent = now;
  entry.last_kind = transition.kind;
  entry.last_severity = transition.incident.finding.severity;
  entry.held.reset();
  entry.suppressed = 0;
  return alert;
}

std::vector<Alert> AlertRateLimiter::Due(std::string_view hostname, WallTime now) {
  std::vector<Alert> due;
  for (auto it = entries_.begin(); it != entries_.end();) {
    Entry& entry = it->second;
    const bool interval_passed = now - entry.last_sent >= min_interval_;
    if (interval_passed && entry.held) {
      if (!SameState(entry, *entry.held)) {
        due.push_back({*entry.held, std::string(hostname), entry.suppressed});
        entry.last_sent = now;
        entry.last_kind = entry.held->kind;
        entry.last_severity = entry.held->incident.finding.severity;
        entry.suppressed = 0;
      }
      // Same state as last sent: the flapping in between is not news.
      entry.held.reset();
    }
    const bool quiet =
        interval_passed && !entry.held && ClosesIncident(entry.last_kind);
    it = quiet ? entries_.erase(it) : std::next(it);
  }
  return due;
}

void AlertRateLimiter::TakeFindingsFrom(AlertRateLimiter& previous) {
  entries_ = std::exchange(previous.entries_, {});
}

// ---- AlertGrouper -----------------------------------------------------------

std::vector<FindingTransition> AlertGrouper::Pass(const std::vector<FindingTransition>& transitions,
                                                  std::span<const StoredFinding> open, WallTime now) {
  std::vector<FindingTransition> announce;
  for (const FindingTransition& transition : transitions) {
    const std::string& key = transition.incident.key;
    if (announced_.contains(key)) {
      announce.push_back(transition);
      if (ClosesIncident(transition.kind)) announced_.erase(key);
    } else if (ClosesIncident(transition.kind)) {
      held_.erase(key);  // never announced: there is nothing to take back
    } else if (auto held = held_.find(key); held != held_.end()) {
      held->second.opened.incident = transition.incident;
    } else if (transition.kind == FindingTransition::Kind::kOpened) {
      Hold(transition, now);
    }
  }
  for (const StoredFinding& incident : open) {
    if (auto held = held_.find(incident.key); held != held_.end()) {
      held->second.opened.incident = incident;
    } else if (!announced_.contains(incident.key) && incident.finding.part_of.empty()) {
      Hold({FindingTransition::Kind::kOpened, incident}, now);  // left its root while still open
    }
  }
  for (auto it = held_.begin(); it != held_.end();) {
    if (now - it->second.since < group_wait_) {
      ++it;
      continue;
    }
    if (it->second.opened.incident.finding.part_of.empty()) {
      announced_.insert(it->first);
      announce.push_back(std::move(it->second.opened));
    } else {
      ++grouped_total_;
    }
    it = held_.erase(it);
  }
  return announce;
}

void AlertGrouper::TakeFindingsFrom(AlertGrouper& previous) {
  held_ = std::exchange(previous.held_, {});
  announced_ = std::exchange(previous.announced_, {});
}

// ---- SinkWorker -----------------------------------------------------------

// One sink's queue and delivery thread.
class AlertDispatcher::SinkWorker {
 public:
  SinkWorker(std::unique_ptr<AlertSink> sink, std::string name, size_t max_queue,
             std::function<void(std::string_view)> log, const Clock& clock)
      : sink_(std::move(sink)),
        name_(std::move(name)),
        max_queue_(std::max<size_t>(1, max_queue)),
        log_(std::move(log)),
        clock_(clock),
        thread_([this] { Run(); }) {}

  ~SinkWorker() { Stop(std::chrono::seconds(0)); }

  const AlertSink& sink() const { return *sink_; }

  void Enqueue(Alert alert) {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    if (queue_.size() >= max_queue_) {
      queue_.pop_front();
      ++dropped_;
    }
    queue_.push_back(std::move(alert));
    changed_.notify_all();
  }

  // Waits until the queue is empty and nothing is in flight, or `deadline`.
  bool WaitIdle(std::optional<std::chrono::steady_clock::time_point> deadline) {
    std::unique_lock lock(mutex_);
    auto idle = [&] { return queue_.empty() && !busy_; };
    if (!deadline) {
      changed_.wait(lock, idle);
      return true;
    }
    return changed_.wait_until(lock, *deadline, idle);
  }

  void Stop(Duration drain) {
    if (!thread_.joinable()) return;
    WaitIdle(std::chrono::steady_clock::now() + drain);
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      dropped_ += queue_.size();
      queue_.clear();
      changed_.notify_all();
    }
    sink_->Interrupt();
    thread_.join();
  }

  AlertCounters::Sink Counters() const {
    std::lock_guard lock(mutex_);
    return {.name = name_,
            .delivered = delivered_,
            .failed = failed_,
            .queued = queue_.size(),
            .delivering_since = busy_ ? std::optional(busy_since_) : std::nullopt,
            .last_error = last_error_};
  }
  uint64_t dropped() const {
    std::lock_guard lock(mutex_);
    return dropped_;
  }

 private:
  void Run() {
    for (;;) {
      Alert alert;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return !queue_.empty() || stopping_; });
        if (stopping_) return;
        alert = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
        busy_since_ = clock_.Now();
      }
      const Status status = sink_->Deliver(alert);
      if (!status)
        log_(fmt::format("alert to {} failed: {} ({})", sink_->Describe(), status.error().message,
                         AlertLine(alert)));
      std::lock_guard lock(mutex_);
      ++(status ? delivered_ : failed_);
      if (!status) last_error_ = status.error().message;
      busy_ = false;
      changed_.notify_all();
    }
  }

  const std::unique_ptr<AlertSink> sink_;
  const std::string name_;
  const size_t max_queue_;
  const std::function<void(std::string_view)> log_;
  const Clock& clock_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Alert> queue_;
  bool busy_ = false;
  WallTime busy_since_;
  std::string last_error_;
  bool stopping_ = false;
  uint64_t delivered_ = 0;
  uint64_t failed_ = 0;
  uint64_t dropped_ = 0;
  std::thread thread_;  // last: starts once everything above is constructed
};

// ---- AlertDispatcher -------------------------------------------------------

AlertDispatcher::AlertDispatcher(std::vector<std::unique_ptr<AlertSink>> sinks,
                                 AlertDispatcherOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock), grouper_(options_.group_wait), limiter_(options_.min_interval) {
  if (!options_.log) {
    options_.log = [](std::string_view line) { fmt::print(stderr, "gpudoctor: {}\n", line); };
  }
  // Metric labels must be unique: a second webhook becomes "webhook-2".
  std::map<std::string, int> seen;
  for (std::unique_ptr<AlertSink>& sink : sinks) {
    std::string name(sink->kind());
    if (const int n = ++seen[name]; n > 1) name += fmt::format("-{}", n);
    workers_.push_back(
        std::make_unique<SinkWorker>(std::move(sink), std::move(name), options_.max_queue, options_.log, clock_));
  }
}

AlertDispatcher::~AlertDispatcher() { Stop(); }

void AlertDispatcher::Log(std::string_view line) const { options_.log(line); }

void AlertDispatcher::Submit(const std::vector<FindingTransition>& transitions, std::span<const StoredFinding> open) {
  std::vector<Alert> ready;
  {
    std::lock_guard lock(limiter_mutex_);
    const WallTime now = clock_.Now();
    ready = limiter_.Due(options_.hostname, now);
    for (const FindingTransition& t : grouper_.Pass(transitions, open, now)) {
      if (std::optional<Alert> alert = limiter_.Offer(t, options_.hostname, now)) {
        ready.push_back(std::move(*alert));
      }
    }
  }
  for (const Alert& alert : ready) Dispatch(alert);
}

void AlertDispatcher::Dispatch(const Alert& alert) {
  if (options_.dry_run) {
    const std::string json = AlertJson(alert);
    if (workers_.empty()) Log(fmt::format("dry-run: would alert (no sinks configured): {}", json));
    for (const auto& worker : workers_) {
      Log(fmt::format("dry-run: would send to {}: {}", worker->sink().Describe(), json));
    }
    return;
  }
  for (const auto& worker : workers_) worker->Enqueue(alert);
}

void AlertDispatcher::Flush() {
  for (const auto& worker : workers_) worker->WaitIdle(std::nullopt);
}

void AlertDispatcher::Stop(Duration drain) {
  const auto deadline = std::chrono::steady_clock::now() + drain;
  for (const auto& worker : workers_) {
    const auto left = std::max(
        Duration::zero(), std::chrono::duration_cast<Duration>(deadline - std::chrono::steady_clock::now()));
    worker->Stop(left);
  }
}

void AlertDispatcher::TakeRateLimitsFrom(AlertDispatcher& previous) {
  std::scoped_lock lock(limiter_mutex_, previous.limiter_mutex_);
  limiter_.TakeFindingsFrom(previous.limiter_);
  grouper_.TakeFindingsFrom(previous.grouper_);
}

AlertCounters AlertDispatcher::Counters() const {
  AlertCounters counters;
  for (const auto& worker : workers_) {
    counters.sinks.push_back(worker->Counters());
    counters.dropped += worker->dropped();
  }
  std::lock_guard lock(limiter_mutex_);
  counters.suppressed = limiter_.suppressed_total();
  counters.grouped = grouper_.grouped_total();
  return counters;
}

}  // namespace gpudoctor
