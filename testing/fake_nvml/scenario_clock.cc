#include "scenario_clock.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "common/text.h"

namespace gpudoctor::fake_nvml {
namespace {

std::optional<std::string> Environment(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

}  // namespace

std::optional<double> ScenarioClock::RealSecondsUntil(double t, WallTime now) const {
  if (pinned_seconds_) return std::nullopt;
  return std::max(0.0, (t - SecondsAt(now)) / time_scale_);
}

ClockOverrides ClockOverrides::FromEnvironment() {
  return {Environment("GPUDOCTOR_FAKE_EPOCH_MS"), Environment("GPUDOCTOR_FAKE_TIME_SCALE"),
          Environment("GPUDOCTOR_FAKE_NOW")};
}

Result<ScenarioClock> MakeScenarioClock(const ClockOverrides& overrides, double scenario_time_scale,
                                        WallTime first_init) {
  int64_t epoch_ms = ToUnixMillis(first_init);
  if (overrides.epoch_ms) {
    auto parsed = ParseInt<int64_t>(*overrides.epoch_ms);
    if (!parsed) return Error{"GPUDOCTOR_FAKE_EPOCH_MS=\"" + *overrides.epoch_ms + "\" is not Unix milliseconds"};
    epoch_ms = *parsed;
  }
  double time_scale = scenario_time_scale;
  if (overrides.time_scale) {
    auto parsed = ParseDouble(*overrides.time_scale);
    if (!parsed || !std::isfinite(*parsed) || *parsed <= 0)
      return Error{"GPUDOCTOR_FAKE_TIME_SCALE=\"" + *overrides.time_scale + "\" is not a number greater than zero"};
    time_scale = *parsed;
  }
  std::optional<double> pinned;
  if (overrides.now) {
    auto parsed = ParseDuration(*overrides.now);
    if (!parsed) return Error{"GPUDOCTOR_FAKE_NOW=\"" + *overrides.now + "\" is not a duration like \"10m\""};
    pinned = std::chrono::duration<double>(*parsed).count();
  }
  return ScenarioClock(epoch_ms, time_scale, pinned);
}

}  // namespace gpudoctor::fake_nvml
