// The findings `status` shows beside its table: every rule that can judge
// from the snapshot alone (no logs, no host signals).
#pragma once

#include <vector>

#include "common/clock.h"
#include "health/finding.h"
#include "health/health_config.h"
#include "model/snapshot.h"

namespace gpudoctor {

std::vector<Finding> StatusFindings(const Snapshot& snapshot, const HealthConfig& config, WallTime now);

}  // namespace gpudoctor
