// Error counter rates: ecc_rate, pcie_replay_rate, nvlink_error_rate.
// A counter that goes down (driver reload, reset) restarts the count there.
//
//   auto rate = CounterRatePerMinute(track.points, &ErrorCounters::pcie_replays, now - window, min_span);
#pragma once

#include <optional>
#include <vector>

#include "health/detectors/gpu_track.h"
#include "health/detectors/trend_config.h"

namespace gpudoctor {

struct CounterRate {
  double increase = 0;
  Duration span{};
  double per_minute = 0;
};

// nullopt when the counter has fewer than two readings since `since`, or they span under `min_span`.
std::optional<CounterRate> CounterRatePerMinute(const PointHistory& points,
                                                std::optional<double> ErrorCounters::*counter, WallTime since,
                                                Duration min_span);

std::vector<Finding> DetectCounterRates(const GpuTrack& track, const CounterRateConfig& config, WallTime now);

}  // namespace gpudoctor
