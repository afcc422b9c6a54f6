#include "agent/alert_hub.h"

#include <algorithm>
#include <utility>

namespace gpudoctor {
namespace {

// Adds `more` to `total`, sink by sink (by metric label).
void Accumulate(AlertCounters& total, const AlertCounters& more) {
  for (const AlertCounters::Sink& sink : more.sinks) {
    auto same = std::find_if(total.sinks.begin(), total.sinks.end(),
                             [&](const AlertCounters::Sink& known) { return known.name == sink.name; });
    if (same == total.sinks.end()) {
      total.sinks.push_back(sink);
    } else {
      same->delivered += sink.delivered;
      same->failed += sink.failed;
      same->queued += sink.queued;
      if (!same->delivering_since) same->delivering_since = sink.delivering_since;
      if (!sink.last_error.empty()) same->last_error = sink.last_error;
    }
  }
  total.suppressed += more.suppressed;
  total.grouped += more.grouped;
  total.dropped += more.dropped;
}

}  // namespace

AlertHub::AlertHub(const Clock& clock, Duration drain) : clock_(clock), drain_(drain) {}

AlertHub::~AlertHub() { Stop(); }

Status AlertHub::Configure(const AlertConfig& config, bool force_dry_run, const std::string& hostname) {
  auto sinks = MakeAlertSinks(config);
  if (!sinks) return sinks.error();
  Replace(std::move(*sinks), {.min_interval = config.min_interval,
                              .group_wait = config.group_wait,
                              .dry_run = config.dry_run || force_dry_run,
                              .hostname = hostname});
  return {};
}

void AlertHub::Replace(std::vector<std::unique_ptr<AlertSink>> sinks, AlertDispatcherOptions options) {
  auto fresh = std::make_shared<AlertDispatcher>(std::move(sinks), std::move(options), clock_);
  std::shared_ptr<AlertDispatcher> old;
  {
    std::lock_guard lock(mutex_);
    if (current_) {
      fresh->TakeRateLimitsFrom(*current_);
      stopping_.push_back(current_);
    }
    old = std::exchange(current_, std::move(fresh));
  }
  if (old) Retire(std::move(old));
}

void AlertHub::Submit(const std::vector<FindingTransition>& transitions, std::span<const StoredFinding> open) {
  std::shared_ptr<AlertDispatcher> current;
  {
    std::lock_guard lock(mutex_);
    current = current_;
  }
  if (current) current->Submit(transitions, open);
}

AlertCounters AlertHub::Counters() const {
  AlertCounters total;
  std::vector<std::shared_ptr<AlertDispatcher>> counting;
  {
    std::lock_guard lock(mutex_);
    total = retired_;
    counting = stopping_;
    if (current_) counting.push_back(current_);
  }
  // Outside the lock: a dispatcher answers while it is being stopped.
  for (const auto& dispatcher : counting) Accumulate(total, dispatcher->Counters());
  return total;
}

void AlertHub::Stop() {
  std::shared_ptr<AlertDispatcher> old;
  {
    std::lock_guard lock(mutex_);
    if (current_) stopping_.push_back(current_);
    old = std::exchange(current_, nullptr);
  }
  if (old) Retire(std::move(old));
}

void AlertHub::Retire(std::shared_ptr<AlertDispatcher> dispatcher) {
  dispatcher->Stop(drain_);  // never under the lock: this waits for the sinks
  const AlertCounters final_counts = dispatcher->Counters();
  std::lock_guard lock(mutex_);
  Accumulate(retired_, final_counts);
  std::erase(stopping_, dispatcher);
}

}  // namespace gpudoctor
