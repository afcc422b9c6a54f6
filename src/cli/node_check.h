// The fast health check that `gpudoctor slurm` and `gpudoctor npd` run on a
// node every few minutes: the same judgement as `check` (RunChecks, every
// rule), but log events count over the last 10 minutes by default (--since),
// so an Xid an operator already dealt with does not keep the node sick for a
// day. The result is what a scheduler needs: the worst severity and the
// problems, most important first.
//
//   CheckOptions options;                        // filled by AddNodeCheckOptions
//   NodeCheckResult result = RunNodeCheck(context, options);
//   if (result.error) return Fail(*result.error);
//   if (result.worst == Severity::kCritical) Drain(result.problems.front());
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/check_inputs.h"
#include "cli/commands.h"
#include "health/finding.h"

namespace gpudoctor {

// How far back log events count in a node check: a periodic check sees each
// event within a few runs, and a repaired node comes back soon after.
inline constexpr const char* kNodeCheckSince = "10m";

// Adds check's input options (--since defaulting to kNodeCheckSince).
void AddNodeCheckOptions(CLI::App* command, CheckOptions& options);

struct NodeCheckResult {
  std::optional<SourceError> error;  // set: the check could not run; nothing below is meaningful
  std::string hostname;
  Severity worst = Severity::kOk;
  // The critical and warning findings: worst first, and among equals a root
  // cause or a finding that stands alone before the findings told under it.
  std::vector<Finding> problems;
  HealthConfig config;  // what judged them (--config over the defaults)
};

NodeCheckResult RunNodeCheck(const CommandContext& context, const CheckOptions& options);

// Adds findings found after the check (a stress test's) in their place among
// the problems, and makes `worst` count them.
void AddNodeProblems(NodeCheckResult& result, std::vector<Finding> findings);

// The problems at `at_least` or worse that stand on their own (a finding
// told under a root is counted through its root), most important first: the
// first names the node's problem, the rest are "+N more".
std::vector<const Finding*> HeadlineProblems(const NodeCheckResult& result, Severity at_least);

// The finding's summary without a leading "GPU 6: " naming its own GPU, for
// a line that names the GPU itself ("gpu 6: ecc_uncorrectable: 2 uncorrectable ...").
std::string SummaryAfterGpu(const Finding& finding);

// [{"id", "severity", "gpu": index or null, "summary"}] of the problems.
nlohmann::json NodeProblemsToJson(const std::vector<Finding>& problems);

}  // namespace gpudoctor
