// How a diagnostic worker proves its GPU work advances, and how the parent
// tells a slow worker from a hung one.
//
// Worker side, WorkPulse: every driver call that returns (DeviceSession::Call)
// is one unit of work done. The worker's heartbeat sends the count of units
// and the longest time one unit took, every kHeartbeatInterval, whatever the
// work is doing (a kernel that never returns stops the count, not the beat).
//
// Parent side, StallWatch: a worker is hung when its count has not moved for
// its deadline, max(stall timeout, kSlowUnitFactor x the slowest unit it has
// reported). A loaded host or a slow GPU makes every unit slower and the
// deadline longer with them; a launch that never returns is still caught
// within the stall timeout when the units before it were quick.
//
//   WorkPulse& pulse = ProcessWorkPulse();           // the worker
//   pulse.Beat();                                     // a driver call returned
//   StallWatch watch(stall_timeout, now);             // the parent, per worker
//   watch.Pulse(units, slowest_unit, now);            // each heartbeat or progress line
//   if (watch.Hung(now)) Kill(worker);
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "common/clock.h"

namespace gpudoctor {

// How often a worker says how far it got, busy or not.
inline constexpr auto kHeartbeatInterval = std::chrono::seconds(1);
// The deadline is at least this many times the slowest unit seen.
inline constexpr int kSlowUnitFactor = 20;

struct PulseReading {
  uint64_t units = 0;      // units of work done so far
  Duration slowest_unit{};  // the longest time between two units (start-up not counted)
};

// Counts units of work. Beat from the thread that does the work; Read from any thread.
class WorkPulse {
 public:
  void Beat() { Beat(std::chrono::steady_clock::now()); }
  void Beat(std::chrono::steady_clock::time_point now);
  PulseReading Read() const;

 private:
  std::atomic<uint64_t> units_{0};
  std::atomic<int64_t> last_ns_{0};     // steady time of the last unit; 0: none yet
  std::atomic<int64_t> slowest_ns_{0};
};

// The worker process's one pulse.
WorkPulse& ProcessWorkPulse();

// The parent's view of one worker: when its work last advanced, and its deadline.
class StallWatch {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  StallWatch(Duration stall_timeout, TimePoint started) : stall_timeout_(stall_timeout), last_progress_(started) {}

  // A heartbeat or progress line's counters: progress when `units` grew.
  void Pulse(uint64_t units, Duration slowest_unit, TimePoint now);
  // A step the worker finished (a progress line, counters or not).
  void Progressed(TimePoint now) { last_progress_ = now; }

  // max(stall timeout, kSlowUnitFactor x the slowest unit reported).
  Duration deadline() const;
  bool Hung(TimePoint now) const { return now - last_progress_ > deadline(); }
  Duration slowest_unit() const { return slowest_unit_; }

 private:
  Duration stall_timeout_;
  TimePoint last_progress_;
  uint64_t units_ = 0;
  Duration slowest_unit_{};
};

}  // namespace gpudoctor
