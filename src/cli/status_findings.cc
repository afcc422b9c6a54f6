#include "cli/status_findings.h"

#include "health/rules.h"

namespace gpudoctor {

std::vector<Finding> StatusFindings(const Snapshot& snapshot, const HealthConfig& config, WallTime now,
                                    ProcessCommandLines command_lines) {
  HealthInput input;
  input.snapshot = &snapshot;
  input.command_lines = std::move(command_lines);
  input.now = now;
  return EvaluateRules(input, config);
}

}  // namespace gpudoctor
