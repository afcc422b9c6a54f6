#include "cli/status_findings.h"

#include "health/rules.h"

namespace gpudoctor {

std::vector<Finding> StatusFindings(const Snapshot& snapshot, const HealthConfig& config, WallTime now) {
  HealthInput input;
  input.snapshot = &snapshot;
  input.now = now;
  return EvaluateRules(input, config);
}

}  // namespace gpudoctor
