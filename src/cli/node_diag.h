// The stress test `gpudoctor slurm --diag-level N` runs after its node check:
// a child `gpudoctor diag --level N --json --quiet` on the node's GPUs, ended
// at the level's deadline (diag/diag_levels.h), whose summary becomes
// findings. A GPU faulty or hung in a test is diagnostic_failed, judged as
// the agent's history will judge the same run (memtest and burn critical,
// pcie a warning); a GPU that could not be tested (a job's processes on it,
// another diag testing it) is a note, never a fault.
//
//   NodeDiagResult diag = RunNodeDiag(context, 1, config, runner);
//   for (Finding& f : diag.findings) check.problems.push_back(std::move(f));
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "health/finding.h"
#include "health/health_config.h"
#include "host/command_runner.h"

namespace gpudoctor {

struct NodeDiagResult {
  bool ran = false;                // a summary came back
  std::string line;                // the run's summary line
  std::vector<Finding> findings;   // diagnostic_failed, one per GPU and test at fault
  std::vector<std::string> notes;  // what was not tested and why, or why the run gave nothing to judge
};

// The child's command line: this binary with the global options that choose
// the GPUs (--simulate, --nvml-lib, --probe-timeout).
std::vector<std::string> NodeDiagCommand(const CommandContext& context, int level);

NodeDiagResult RunNodeDiag(const CommandContext& context, int level, const HealthConfig& config,
                           CommandRunner& runner);

}  // namespace gpudoctor
