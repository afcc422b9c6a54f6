// EventCollector: the events a judgement needs from a log of any size, in
// memory that follows what the log says rather than how long it is.
//
// - A storm of identical events (same kind, device, process and message,
//   each within `fold_gap` of the previous one) is kept as its first
//   `keep_verbatim` events and one more that stands for all the rest
//   (LogEvent::repeats, repeats_from). Counts, first and last times and the
//   first and last lines stay exact; the storm's other lines are dropped.
// - A storm of events that differ (each with its own pid, address or counter
//   in the message) cannot fold that way. Once `max_events` are held, an
//   event of the same kind, severity, Xid, device, host and source as one
//   already held past that mark joins it (repeats) whatever its message, so
//   that memory stays bounded however long and dense the log; the first of
//   each such crowd is kept as it is, with its count and time span exact.
// - With `keep_span`, events older than the newest event seen minus that span
//   are dropped as the log goes on: whatever the newest event turns out to
//   be, they lie outside every window of that length.
//
//   EventCollector collector({.keep_span = std::chrono::hours(24)});
//   ScanLogFile(path, {}, [&](LogEvent&& e) { collector.Add(std::move(e)); });
//   std::vector<LogEvent> events = collector.Take();
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "logs/event.h"

namespace gpudoctor {

struct CollectOptions {
  std::optional<Duration> keep_span;  // none: keep every time
  size_t keep_verbatim = 3;           // identical events kept one by one before folding
  Duration fold_gap = std::chrono::seconds(1);
  size_t max_events = 20000;  // held events past which differing events of one kind and device fold
};

class EventCollector {
 public:
  explicit EventCollector(CollectOptions options = {});

  void Add(LogEvent&& event);

  uint64_t seen() const { return seen_; }    // events added
  size_t kept() const { return events_.size(); }

  // The kept events, in the order they were added.
  const std::vector<LogEvent>& events() const { return events_; }
  // Drops the events older than `oldest` (a long-running reader's window).
  void DropOlderThan(WallTime oldest);
  // The kept events, in the order they were added (the collector is then empty).
  std::vector<LogEvent> Take();

 private:
  struct Run {
    size_t last = 0;        // index of the run's latest kept event
    size_t verbatim = 0;    // events of the run kept as they are
    bool has_slot = false;  // `last` stands for the rest of the storm
  };

  static size_t RunHashOf(const LogEvent& event);
  static bool SameRun(const LogEvent& a, const LogEvent& b);
  Run* FindRun(size_t hash, const LogEvent& event);
  static std::string CrowdKeyOf(const LogEvent& event);
  // Folds `event` into its crowd's event when the collector is full; false when it must be held.
  bool JoinCrowd(LogEvent& event);
  bool Continues(const LogEvent& last, const LogEvent& event) const;
  void Prune();

  static constexpr size_t kReserveFrom = 1024;  // held events from which room for all of them is taken at once

  CollectOptions options_;
  std::vector<LogEvent> events_;
  std::unordered_map<size_t, Run> runs_;  // by RunHashOf; checked with SameRun
  Run* last_run_ = nullptr;                // the run the latest held or folded event went to
  std::unordered_map<std::string, size_t> crowds_;  // crowd key -> index of the event standing for it
  std::optional<WallTime> newest_;
  size_t prune_at_ = 4096;
  uint64_t seen_ = 0;
};

}  // namespace gpudoctor
