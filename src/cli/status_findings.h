// The findings `status` shows beside its table: every rule that can judge
// from the snapshot alone (no logs, no host signals). `command_lines` reads
// the GPU processes' command lines on this machine (empty: not read).
#pragma once

#include <vector>

#include "common/clock.h"
#include "health/finding.h"
#include "health/health_config.h"
#include "host/process_command_line.h"
#include "model/snapshot.h"

namespace gpudoctor {

std::vector<Finding> StatusFindings(const Snapshot& snapshot, const HealthConfig& config, WallTime now,
                                    ProcessCommandLines command_lines = {});

}  // namespace gpudoctor
