// The rule about the agent's history, as the one-shot commands read it.
#include "common/text.h"
#include "health/agent_record.h"
#include "health/rule_context.h"

namespace gpudoctor::rules_internal {

// Fresh: the agent's trend findings are part of this run (AgentOpenFindings).
// Stale: the agent stopped; its last open findings are evidence, not findings.
// Absent or unreadable: the trend checks were not run, which the ok line says.
void AgentHistory(RuleContext& context) {
  const AgentRecord* record = context.input.agent;
  if (record == nullptr) return;
  constexpr std::string_view kNotRun = "Trend checks not run: they need `gpudoctor agent` and its history";
  switch (record->state) {
    case AgentRecord::State::kMissing: context.Pass("agent_history", std::string(kNotRun), {record->note}); return;
    case AgentRecord::State::kUnreadable:
      context.Pass("agent_history", std::string(kNotRun), {"not read: " + record->note});
      return;
    case AgentRecord::State::kRead: break;
  }
  const WallTime now = context.input.now;
  const std::optional<WallTime> last = record->LastActive();
  if (!last) {
    // Only other records (gpudoctor maintenance done) are in it: no agent has run here.
    context.Pass("agent_history", std::string(kNotRun),
                 {record->database + " holds no sample: no agent has recorded here yet"});
    return;
  }
  std::vector<std::string> evidence{"history: " + record->database,
                                    "the agent's last sample: " + FormatIsoUtc(*last)};
  const std::string ago = FormatSpan(std::max(Duration::zero(), now - *last));
  if (record->FreshAt(now, context.thresholds.agent_history.stale_after)) {
    context.Pass("agent_history",
                 fmt::format("The agent sampled {} ago; it holds {}", ago,
                             Plural(record->open.size(), "open finding", "open findings")),
                 std::move(evidence));
    return;
  }
  for (const AgentFinding& open : record->open) {
    evidence.push_back(fmt::format("open when it stopped: {} ({}, since {}): {}", open.finding.id,
                                   SeverityName(open.finding.severity), FormatIsoUtc(open.opened_at),
                                   open.finding.summary));
  }
  evidence.push_back("stale after " + FormatSpan(context.thresholds.agent_history.stale_after));
  context.Report("agent_history", Severity::kWarning, std::nullopt,
                 fmt::format("The agent's history is stale: its last sample is {} old", ago), std::move(evidence));
}

}  // namespace gpudoctor::rules_internal
