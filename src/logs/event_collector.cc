#include "logs/event_collector.h"

#include <algorithm>

namespace gpudoctor {

EventCollector::EventCollector(CollectOptions options) : options_(options) {}

std::string EventCollector::KeyOf(const LogEvent& event) {
  std::string key;
  key.reserve(event.kind.size() + event.pci_bus_id.size() + event.message.size() + event.detail.size() +
              event.source.size() + event.host.size() + event.process.size() + 48);
  auto add = [&key](std::string_view part) {
    key.append(part);
    key.push_back('\x1f');
  };
  add(event.kind);
  add(EventSeverityName(event.severity));
  add(event.xid ? std::to_string(*event.xid) : "");
  add(event.pid ? std::to_string(*event.pid) : "");
  add(event.process);
  add(event.pci_bus_id);
  add(event.gpu_uuid);
  add(event.gpu_serial);
  add(event.host);
  add(event.source);
  add(event.message);
  add(event.detail);
  return key;
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

  std::string key = KeyOf(event);
  auto found = runs_.find(key);
  if (found != runs_.end() && Continues(events_[found->second.last], event)) {
    Run& run = found->second;
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
    runs_.insert_or_assign(std::move(key), Run{.last = events_.size(), .verbatim = 1, .has_slot = false});
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
  crowds_.clear();
  for (size_t i = 0; i < events_.size(); ++i) {
    Run& run = runs_[KeyOf(events_[i])];
    run.last = i;
    if (events_[i].repeats > 0) run.has_slot = true;
    else run.verbatim = std::min(run.verbatim + 1, options_.keep_verbatim);
  }
}

std::vector<LogEvent> EventCollector::Take() {
  Prune();
  runs_.clear();
  crowds_.clear();
  prune_at_ = 4096;
  return std::exchange(events_, {});
}

}  // namespace gpudoctor
