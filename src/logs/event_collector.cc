#include "logs/event_collector.h"

#include <algorithm>

namespace gpudoctor {

EventCollector::EventCollector(CollectOptions options) : options_(options) {}

// A run is the events alike in everything but their time and raw line. The
// runs are found by a hash of those fields and checked by comparing them with
// the run's latest kept event, so no key is built or held per run.
size_t EventCollector::RunHashOf(const LogEvent& event) {
  size_t hash = static_cast<size_t>(event.severity);
  auto mix = [&hash](size_t part) { hash ^= part + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2); };
  const std::hash<std::string_view> text;
  for (std::string_view part : {std::string_view(event.kind), std::string_view(event.process),
                                std::string_view(event.pci_bus_id), std::string_view(event.gpu_uuid),
                                std::string_view(event.gpu_serial), std::string_view(event.host),
                                std::string_view(event.source), std::string_view(event.message),
                                std::string_view(event.detail)}) {
    mix(text(part));
  }
  mix(event.xid ? *event.xid + 1ULL : 0);
  mix(event.pid ? *event.pid + 1ULL : 0);
  return hash;
}

bool EventCollector::SameRun(const LogEvent& a, const LogEvent& b) {
  return a.kind == b.kind && a.severity == b.severity && a.xid == b.xid && a.pid == b.pid && a.process == b.process &&
         a.pci_bus_id == b.pci_bus_id && a.gpu_uuid == b.gpu_uuid && a.gpu_serial == b.gpu_serial &&
         a.host == b.host && a.source == b.source && a.message == b.message && a.detail == b.detail;
}

EventCollector::Run* EventCollector::FindRun(size_t hash, const LogEvent& event) {
  auto it = runs_.find(hash);
  return it != runs_.end() && SameRun(events_[it->second.last], event) ? &it->second : nullptr;
}

std::string EventCollector::CrowdKeyOf(const LogEvent& event) {
  std::string key;
  for (std::string_view part : {std::string_view(event.kind), std::string_view(EventSeverityName(event.severity)),
                                std::string_view(event.pci_bus_id), std::string_view(event.gpu_uuid),
                                std::string_view(event.host), std::string_view(event.source)}) {
    key.append(part);
    key.push_back('\x1f');
  }
  if (event.xid) key.append(std::to_string(*event.xid));
  return key;
}

bool EventCollector::JoinCrowd(LogEvent& event) {
  if (events_.size() < options_.max_events) return false;
  std::string key = CrowdKeyOf(event);
  auto found = crowds_.find(key);
  if (found == crowds_.end()) {
    crowds_.emplace(std::move(key), events_.size());  // the caller holds it: it starts the crowd
    return false;
  }
  LogEvent& crowd = events_[found->second];
  if (crowd.repeats == 0) crowd.repeats_from = crowd.time;
  ++crowd.repeats;
  crowd.repeats_differ = true;
  if (event.time && crowd.repeats_from && *event.time < *crowd.repeats_from) crowd.repeats_from = event.time;
  if (event.time && (!crowd.time || *event.time > *crowd.time)) {
    crowd.time = event.time;
    crowd.uptime_seconds = event.uptime_seconds;
    crowd.raw = std::move(event.raw);
    crowd.line_number = event.line_number;
  }
  return true;
}

bool EventCollector::Continues(const LogEvent& last, const LogEvent& event) const {
  if (last.time.has_value() != event.time.has_value()) return false;
  if (!event.time) return true;  // no times to tell a storm from a slow trickle: the count is what matters
  const auto gap = *event.time - *last.time;
  return gap >= WallTime::duration::zero() && gap <= std::chrono::duration_cast<WallTime::duration>(options_.fold_gap);
}

void EventCollector::Add(LogEvent&& event) {
  ++seen_;
  if (event.time && (!newest_ || *event.time > *newest_)) newest_ = event.time;
  if (options_.keep_span && event.time &&
      *event.time < *newest_ - std::chrono::duration_cast<WallTime::duration>(*options_.keep_span)) {
    return;  // outside every window already
  }

  // A storm's events come one after another: the run of the event before is tried first, without hashing.
  size_t hash = 0;
  Run* found = nullptr;
  if (last_run_ && SameRun(events_[last_run_->last], event)) {
    found = last_run_;
  } else {
    hash = RunHashOf(event);
    found = FindRun(hash, event);
  }
  if (found && Continues(events_[found->last], event)) {
    last_run_ = found;
    Run& run = *found;
    if (run.has_slot) {
      LogEvent& slot = events_[run.last];
      if (slot.repeats == 0) slot.repeats_from = slot.time;
      ++slot.repeats;
      slot.time = event.time;
      slot.uptime_seconds = event.uptime_seconds;
      slot.raw = std::move(event.raw);
      slot.line_number = event.line_number;
      return;
    }
    if (run.verbatim < options_.keep_verbatim) ++run.verbatim;
    else run.has_slot = true;  // this one stands for the rest of the storm
    run.last = events_.size();
  } else {
    if (JoinCrowd(event)) return;
    const Run run{.last = events_.size(), .verbatim = 1, .has_slot = false};
    // The same events again after a pause start a new run; so do others that share their hash (a 64-bit
    // collision: the events before it are then kept as they are instead of folding, their counts exact).
    if (found) *found = run;
    else found = &runs_.insert_or_assign(hash, run).first->second;
    last_run_ = found;
  }
  // A log with many events is given room at once for what it may hold (max_events, and a quarter more for
  // the first event of each crowd), and past that a quarter more at a time: growing by doubling moved every
  // event, a dozen strings each, again and again, and held twice the memory while it did. Room not yet
  // used is address space, not memory.
  if (events_.size() == events_.capacity() && events_.size() >= kReserveFrom) {
    const size_t held = std::max(events_.size(), options_.max_events);
    events_.reserve(held + held / 4);
    runs_.reserve(events_.capacity());
  }
  events_.push_back(std::move(event));
  if (events_.size() >= prune_at_) Prune();
}

void EventCollector::Prune() {
  if (options_.keep_span && newest_) {
    DropOlderThan(*newest_ - std::chrono::duration_cast<WallTime::duration>(*options_.keep_span));
  }
  prune_at_ = std::max<size_t>(4096, events_.size() * 2);
}

void EventCollector::DropOlderThan(WallTime oldest) {
  const size_t before = events_.size();
  std::erase_if(events_, [&](const LogEvent& event) { return event.time && *event.time < oldest; });
  if (events_.size() == before) return;
  // Indices moved: rebuild the runs from what is left; crowds form again once the collector is full.
  runs_.clear();
  last_run_ = nullptr;
  crowds_.clear();
  for (size_t i = 0; i < events_.size(); ++i) {
    const size_t hash = RunHashOf(events_[i]);
    Run* found = FindRun(hash, events_[i]);
    Run& run = found ? *found : (runs_[hash] = Run{});
    run.last = i;
    if (events_[i].repeats > 0) run.has_slot = true;
    else run.verbatim = std::min(run.verbatim + 1, options_.keep_verbatim);
  }
}

std::vector<LogEvent> EventCollector::Take() {
  Prune();
  runs_.clear();
  last_run_ = nullptr;
  crowds_.clear();
  prune_at_ = 4096;
  return std::exchange(events_, {});
}

}  // namespace gpudoctor
