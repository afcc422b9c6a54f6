#include "slurm/slurm_control.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "common/text.h"

namespace gpudoctor {
namespace {

// sinfo marks a state with one of these after its name: "*" not responding,
// "~" powered off, "#" powering up, "!" pending power down, "%" powering
// down, "$" maintenance reservation, "@" pending reboot, "^" reboot issued,
// "-" planned by the backfill scheduler.
constexpr std::string_view kStateFlags = "*~#!%$@^-";

// The parts of a state without its flags, lower case: "IDLE+DRAIN" -> {"idle", "drain"}.
std::vector<std::string> StateParts(std::string_view state) {
  std::vector<std::string> parts;
  for (std::string_view part : Split(state, '+')) {
    while (!part.empty() && kStateFlags.find(part.back()) != std::string_view::npos) part.remove_suffix(1);
    if (!part.empty()) parts.push_back(ToLower(part));
  }
  return parts;
}

// "75", "12.5", "33.3": a share as a percentage for a sentence.
std::string Percent(double share) { return fmt::format("{:.3g}%", share * 100); }

std::string NodeCount(int count) { return fmt::format("{} node{}", count, count == 1 ? "" : "s"); }

SlurmBreaker CountPartition(const std::vector<SlurmNodeRow>& rows, const std::string& partition,
                            const SlurmPlanInput& input) {
  std::set<std::string> nodes, drained;
  for (const SlurmNodeRow& row : rows) {
    if (row.partition != partition) continue;
    nodes.insert(row.node);
    if (row.node != input.node && DrainedByGpudoctor(row)) drained.insert(row.node);
  }
  SlurmBreaker breaker{.partition = partition,
                       .nodes = static_cast<int>(nodes.size()),
                       .drained_by_gpudoctor = static_cast<int>(drained.size()),
                       .max_share = input.max_drain_share};
  // The tolerance keeps 1 of 10 within a share of 0.1 whatever the rounding.
  breaker.allowed = breaker.drained_by_gpudoctor + 1 <= input.max_drain_share * breaker.nodes + 1e-9;
  return breaker;
}

double ShareAfterDrain(const SlurmBreaker& breaker) {
  return breaker.nodes == 0 ? 1.0 : (breaker.drained_by_gpudoctor + 1.0) / breaker.nodes;
}

std::string BreakerSentence(const SlurmBreaker& breaker, const std::string& node) {
  const double share = ShareAfterDrain(breaker);
  if (!breaker.allowed) {
    return fmt::format(
        "circuit breaker: {} of {} in partition {} {} already drained by gpudoctor; draining {} would make {} > {}; "
        "not draining",
        breaker.drained_by_gpudoctor, NodeCount(breaker.nodes), breaker.partition,
        breaker.drained_by_gpudoctor == 1 ? "is" : "are", node, Percent(share), Percent(breaker.max_share));
  }
  return fmt::format("circuit breaker allows it: {} of {} in partition {} drained by gpudoctor with {} ({} <= {})",
                     breaker.drained_by_gpudoctor + 1, NodeCount(breaker.nodes), breaker.partition, node,
                     Percent(share), Percent(breaker.max_share));
}

std::string Quoted(const std::string& reason) { return reason.empty() ? "no reason given" : "\"" + reason + "\""; }

}  // namespace

std::vector<std::string> SinfoCommand(const std::string& sinfo) {
  return {sinfo, "--noheader", "--Node", "--format=%N|%R|%T|%E"};
}

Result<std::vector<SlurmNodeRow>> ParseSinfoNodes(std::string_view output) {
  std::vector<SlurmNodeRow> rows;
  std::string_view first_odd_line;
  for (std::string_view line : Split(output, '\n')) {
    line = Trim(line);
    if (line.empty()) continue;
    std::vector<std::string_view> fields = Split(line, '|');
    if (fields.size() < 4 || Trim(fields[0]).empty() || Trim(fields[1]).empty() || Trim(fields[2]).empty()) {
      if (first_odd_line.empty()) first_odd_line = line;
      continue;
    }
    // The reason is the rest of the line: it may hold '|' itself.
    const size_t reason_start = static_cast<size_t>(fields[3].data() - line.data());
    std::string_view reason = Trim(line.substr(reason_start));
    if (reason == "none" || reason == "(null)") reason = {};
    rows.push_back({std::string(Trim(fields[0])), std::string(Trim(fields[1])), ToLower(Trim(fields[2])),
                    std::string(reason)});
  }
  if (rows.empty() && !first_odd_line.empty())
    return Error{"sinfo printed no line of the form node|partition|state|reason: " +
                 FitOneLine(first_odd_line, kMaxSlurmReasonBytes)};
  return rows;
}

std::vector<std::string> SlurmPartitionsOf(const std::vector<SlurmNodeRow>& rows, std::string_view node) {
  std::vector<std::string> partitions;
  for (const SlurmNodeRow& row : rows)
    if (row.node == node && std::find(partitions.begin(), partitions.end(), row.partition) == partitions.end())
      partitions.push_back(row.partition);
  return partitions;
}

bool IsDrainState(std::string_view state) {
  for (const std::string& part : StateParts(state))
    if (StartsWith(part, "drain") || part == "drng") return true;
  return false;
}

bool IsDownState(std::string_view state) {
  if (IsDrainState(state)) return false;
  for (const std::string& part : StateParts(state))
    if (part == "down" || part == "fail" || part == "failing") return true;
  return false;
}

bool DrainedByGpudoctor(const SlurmNodeRow& row) {
  return IsDrainState(row.state) && StartsWith(row.reason, kSlurmReasonPrefix);
}

std::string FormatDrainReason(std::string_view rule, std::optional<uint32_t> gpu, std::string_view summary,
                              int more_problems) {
  std::string head = fmt::format("{} {}", kSlurmReasonPrefix, rule);
  if (gpu) head += fmt::format(" gpu {}", *gpu);
  head += ": ";
  const std::string tail = more_problems > 0 ? fmt::format(" (+{} more)", more_problems) : "";
  return FitOneLine(head + std::string(summary), kMaxSlurmReasonBytes - tail.size()) + tail;
}

Result<SlurmPlan> PlanSlurmAction(const std::vector<SlurmNodeRow>& rows, const SlurmPlanInput& input) {
  const std::vector<std::string> partitions = SlurmPartitionsOf(rows, input.node);
  if (partitions.empty())
    return Error{"sinfo lists no node named " + input.node +
                 ": give --node the name slurm.conf uses for this machine (slurmd sets SLURMD_NODENAME)"};
  if (!input.partition.empty() && std::find(partitions.begin(), partitions.end(), input.partition) == partitions.end()) {
    std::string in;
    for (const std::string& p : partitions) in += (in.empty() ? "" : ", ") + p;
    return Error{"node " + input.node + " is not in partition " + input.partition + " (it is in " + in + ")"};
  }
  const SlurmNodeRow& current = *std::find_if(rows.begin(), rows.end(), [&](const SlurmNodeRow& row) {
    return row.node == input.node;
  });

  SlurmPlan plan;
  if (!input.critical) {
    if (DrainedByGpudoctor(current)) {
      plan.action = SlurmAction::kResume;
      plan.reason = current.reason;
      plan.explanation = input.node + " has no critical finding and gpudoctor drained it (" + Quoted(current.reason) +
                         "): resume it";
      return plan;
    }
    plan.reason = current.reason;
    plan.explanation = IsDrainState(current.state)
                           ? input.node + " is " + current.state + " for another reason (" + Quoted(current.reason) +
                                 "); gpudoctor resumes only the nodes it drained"
                           : input.node + " has no critical finding; nothing to do";
    return plan;
  }

  if (IsDrainState(current.state) || IsDownState(current.state)) {
    plan.reason = current.reason;
    plan.explanation = DrainedByGpudoctor(current)
                           ? input.node + " is already " + current.state + " by gpudoctor (" + Quoted(current.reason) + ")"
                           : input.node + " is already " + current.state + " (" + Quoted(current.reason) +
                                 "); gpudoctor leaves it and its reason as they are";
    return plan;
  }

  const std::vector<std::string> weighed =
      input.partition.empty() ? partitions : std::vector<std::string>{input.partition};
  for (const std::string& partition : weighed) {
    SlurmBreaker breaker = CountPartition(rows, partition, input);
    if (!plan.breaker || ShareAfterDrain(breaker) > ShareAfterDrain(*plan.breaker)) plan.breaker = breaker;
  }
  plan.reason = input.drain_reason;
  plan.action = plan.breaker->allowed ? SlurmAction::kDrain : SlurmAction::kHeldByBreaker;
  plan.explanation = BreakerSentence(*plan.breaker, input.node);
  return plan;
}

std::vector<std::string> DrainCommand(const std::string& scontrol, const std::string& node, const std::string& reason) {
  return {scontrol, "update", "nodename=" + node, "state=drain", "reason=" + reason};
}

std::vector<std::string> ResumeCommand(const std::string& scontrol, const std::string& node) {
  return {scontrol, "update", "nodename=" + node, "state=resume"};
}

const char* SlurmActionName(SlurmAction action, bool dry_run) {
  switch (action) {
    case SlurmAction::kNone: return "none";
    case SlurmAction::kDrain: return dry_run ? "would_drain" : "drain";
    case SlurmAction::kHeldByBreaker: return "held_by_breaker";
    case SlurmAction::kResume: return dry_run ? "would_resume" : "resume";
  }
  return "none";
}

}  // namespace gpudoctor
