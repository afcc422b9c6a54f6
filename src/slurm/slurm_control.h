// Slurm node control for `gpudoctor slurm`: reading `sinfo`, deciding whether
// to drain or resume a node (with the circuit breaker that stops gpudoctor
// from draining too much of a partition), and the scontrol command lines.
// Pure functions: the command runs the programs (host/command_runner.h) and
// hands their output here, so every decision is tested without Slurm.
//
//   auto rows = ParseSinfoNodes(runner.Run(SinfoCommand("sinfo"), deadline).output);
//   SlurmPlan plan = PlanSlurmAction(*rows, {.node = "node1", .max_drain_share = 0.1,
//                                            .critical = true, .drain_reason = reason});
//   if (plan.action == SlurmAction::kDrain) runner.Run(DrainCommand("scontrol", "node1", plan.reason), deadline);
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace gpudoctor {

// Every drain reason gpudoctor sets starts with this; a node drained with any
// other reason is someone else's and is never resumed or counted.
inline constexpr std::string_view kSlurmReasonPrefix = "gpudoctor:";
// Slurm keeps longer reasons, but `sinfo` and `scontrol show node` lines stay readable under this.
inline constexpr size_t kMaxSlurmReasonBytes = 120;

// One line of `sinfo --Node`: a node appears once per partition it is in.
struct SlurmNodeRow {
  std::string node;
  std::string partition;
  std::string state;   // sinfo's long form, lower case, flags kept: "idle", "drained*", "draining"
  std::string reason;  // empty when sinfo says "none"
  bool operator==(const SlurmNodeRow&) const = default;
};

// The sinfo command line whose output ParseSinfoNodes reads (`sinfo` is the
// program to run: a name looked up on PATH, or a path).
std::vector<std::string> SinfoCommand(const std::string& sinfo);

// Parses `sinfo --noheader --Node --format=%N|%R|%T|%E`. Blank lines and lines
// that are not four fields (a warning sinfo printed, say) are skipped; a
// reason may itself hold '|'. An error when nothing but such lines came.
Result<std::vector<SlurmNodeRow>> ParseSinfoNodes(std::string_view output);

// The partitions `node` is in, in sinfo's order.
std::vector<std::string> SlurmPartitionsOf(const std::vector<SlurmNodeRow>& rows, std::string_view node);

// Whether a state has Slurm's drain flag: "drained", "draining", "drain", "drng", with or without flags ("drained*").
bool IsDrainState(std::string_view state);
// Whether a state is down or failed (not drained): Slurm already keeps jobs off the node.
bool IsDownState(std::string_view state);
// Drained or draining, with a reason gpudoctor set.
bool DrainedByGpudoctor(const SlurmNodeRow& row);

// The drain reason: "gpudoctor: <rule> gpu <N>: <summary>", or without
// " gpu N" for a finding about the host; " (+N more)" when `more_problems`
// other critical findings stand behind it. On one line (control characters
// become spaces, '"' becomes '\''), at most kMaxSlurmReasonBytes: a longer
// summary is cut at a character boundary and ends in "...".
std::string FormatDrainReason(std::string_view rule, std::optional<uint32_t> gpu, std::string_view summary,
                              int more_problems);

// The circuit breaker for one partition.
struct SlurmBreaker {
  std::string partition;
  int nodes = 0;                 // distinct nodes in the partition
  int drained_by_gpudoctor = 0;  // of them, drained or draining by gpudoctor (not counting the node itself)
  double max_share = 0;
  bool allowed = true;  // (drained_by_gpudoctor + 1) / nodes <= max_share
};

enum class SlurmAction {
  kNone,           // nothing to do
  kDrain,          // drain the node with `reason`
  kHeldByBreaker,  // would drain, but the circuit breaker holds
  kResume,         // gpudoctor drained it and it is healthy again
};

struct SlurmPlanInput {
  std::string node;
  std::string partition;         // empty: every partition the node is in
  double max_drain_share = 0.1;  // 0 to 1
  bool critical = false;         // the node has a critical finding
  std::string drain_reason;      // FormatDrainReason(...), when critical
};

struct SlurmPlan {
  SlurmAction action = SlurmAction::kNone;
  // kDrain and kHeldByBreaker: the reason to drain with; kResume: the
  // gpudoctor reason the node is drained with now; kNone: the node's current reason, if any.
  std::string reason;
  // The partition nearest its limit, when a drain was weighed.
  std::optional<SlurmBreaker> breaker;
  // One sentence for the person: why this action (or none).
  std::string explanation;
};

// What to do with the node. An error when sinfo does not list the node, or
// not in `partition`.
Result<SlurmPlan> PlanSlurmAction(const std::vector<SlurmNodeRow>& rows, const SlurmPlanInput& input);

// scontrol command lines (argv, never through a shell, so a reason needs no quoting).
std::vector<std::string> DrainCommand(const std::string& scontrol, const std::string& node, const std::string& reason);
std::vector<std::string> ResumeCommand(const std::string& scontrol, const std::string& node);

// "drain", "held_by_breaker", ...: the JSON names of the actions.
const char* SlurmActionName(SlurmAction action, bool dry_run);

}  // namespace gpudoctor
