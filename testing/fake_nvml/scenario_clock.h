// ScenarioClock: maps wall-clock time to scenario time.
//
//   t = (wall_now - epoch) * time_scale          (seconds)
//
// The epoch comes from GPUDOCTOR_FAKE_EPOCH_MS (Unix ms) so that separate
// processes share one timeline, or else from the first nvmlInit in this
// process. GPUDOCTOR_FAKE_TIME_SCALE overrides the scenario's time_scale, and
// GPUDOCTOR_FAKE_NOW ("10m") pins scenario time for deterministic tests.
//
//   auto clock = MakeScenarioClock(ClockOverrides::FromEnvironment(), 1.0, first_init);
//   double t = clock->SecondsAt(std::chrono::system_clock::now());
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/result.h"

namespace gpudoctor::fake_nvml {

class ScenarioClock {
 public:
  ScenarioClock(int64_t epoch_ms, double time_scale, std::optional<double> pinned_seconds)
      : epoch_ms_(epoch_ms), time_scale_(time_scale), pinned_seconds_(pinned_seconds) {}

  double SecondsAt(WallTime now) const {
    if (pinned_seconds_) return *pinned_seconds_;
    double elapsed_ms =
        static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count()) /
            1000.0 -
        static_cast<double>(epoch_ms_);
    return elapsed_ms / 1000.0 * time_scale_;
  }
  // Wall-clock seconds until scenario time `t`; nullopt when it never comes
  // (time is pinned) and 0 when it has passed.
  std::optional<double> RealSecondsUntil(double t, WallTime now) const;

  int64_t epoch_ms() const { return epoch_ms_; }
  double time_scale() const { return time_scale_; }
  std::optional<double> pinned_seconds() const { return pinned_seconds_; }

 private:
  int64_t epoch_ms_;
  double time_scale_;
  std::optional<double> pinned_seconds_;
};

// The environment variables that steer scenario time; unset ones are nullopt.
struct ClockOverrides {
  std::optional<std::string> epoch_ms;    // GPUDOCTOR_FAKE_EPOCH_MS
  std::optional<std::string> time_scale;  // GPUDOCTOR_FAKE_TIME_SCALE
  std::optional<std::string> now;         // GPUDOCTOR_FAKE_NOW
  static ClockOverrides FromEnvironment();
};

// Fails with a message naming the variable when an override is malformed.
Result<ScenarioClock> MakeScenarioClock(const ClockOverrides& overrides, double scenario_time_scale,
                                        WallTime first_init);

}  // namespace gpudoctor::fake_nvml
