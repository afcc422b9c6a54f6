#include "diag/progress_pulse.h"

#include <algorithm>

namespace gpudoctor {

void WorkPulse::Beat(std::chrono::steady_clock::time_point now) {
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  const int64_t last = last_ns_.exchange(ns);
  // The first unit comes after the worker's start-up (loading the driver, a
  // context): the stall timeout covers that, and it is no measure of a unit.
  if (last != 0 && ns > last) {
    int64_t slowest = slowest_ns_.load();
    while (ns - last > slowest && !slowest_ns_.compare_exchange_weak(slowest, ns - last)) {
    }
  }
  units_.fetch_add(1);
}

PulseReading WorkPulse::Read() const { return {.units = units_.load(), .slowest_unit = Duration(slowest_ns_.load())}; }

WorkPulse& ProcessWorkPulse() {
  static WorkPulse pulse;
  return pulse;
}

void StallWatch::Pulse(uint64_t units, Duration slowest_unit, TimePoint now) {
  slowest_unit_ = std::max(slowest_unit_, slowest_unit);
  if (units > units_) {
    units_ = units;
    last_progress_ = now;
  }
}

Duration StallWatch::deadline() const { return std::max(stall_timeout_, kSlowUnitFactor * slowest_unit_); }

}  // namespace gpudoctor
