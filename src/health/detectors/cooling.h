// cooling_failure: the temperature keeps climbing while power and utilisation
// hold steady and the fans are already at maximum (or there are none: liquid
// cooling). A warm-up after a load change levels off and is not reported.
#pragma once

#include <optional>

#include "health/detectors/gpu_track.h"
#include "health/detectors/trend_config.h"

namespace gpudoctor {

std::optional<Finding> DetectCoolingFailure(const GpuTrack& track, const CoolingConfig& config, WallTime now);

}  // namespace gpudoctor
