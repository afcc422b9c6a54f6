// Utilisation trends: utilization_stuck, utilization_flapping, tensor_cores_idle, gpu_straggler.
//
//   if (auto finding = DetectUtilizationStuck(track, config.utilization_stuck, config.max_sample_gap))
//     findings.push_back(*finding);
#pragma once

#include <optional>
#include <vector>

#include "health/detectors/gpu_track.h"
#include "health/detectors/trend_config.h"

namespace gpudoctor {

std::optional<Finding> DetectUtilizationStuck(const GpuTrack& track, const UtilizationStuckConfig& config,
                                              Duration max_gap);
std::optional<Finding> DetectUtilizationFlapping(const GpuTrack& track, const UtilizationFlappingConfig& config,
                                                 WallTime now);
// Only GPUs with GPM (Hopper and newer) have the readings it judges; others never fire.
std::optional<Finding> DetectTensorCoresIdle(const GpuTrack& track, const TensorCoresIdleConfig& config,
                                             Duration max_gap);
std::optional<Finding> DetectGpuStraggler(const GpuTrack& track, const StragglerConfig& config, Duration max_gap);

// Sets idle_while_peers_busy on each point of one instant (one per GPU): idle,
// holding compute processes, while at least min_busy_peers others, and most
// of them, are busy.
void MarkStragglers(std::vector<GpuPoint*>& instant, const StragglerConfig& config);

}  // namespace gpudoctor
