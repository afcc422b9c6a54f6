#include "health/agent_record.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string_view>

#include "common/text.h"
#include "health/health_config.h"
#include "health/rule_context.h"
#include "health/rule_ids.h"

namespace gpudoctor {
namespace {

// Rules `check` runs too, which the agent judges better over its samples:
// tasks blocked for minutes, counters seen rising, Xids NVML delivered while
// it listened. Its findings of other rules describe the present no better
// than the command's own look.
constexpr std::string_view kRulesJudgedOverTime[] = {"host_hung_tasks", "driver_hang", "pcie_replay",
                                                      "nvlink_errors", "xid_recent"};

bool AgentJudgesBetter(std::string_view id) {
  return !IsRuleId(id) || std::find(std::begin(kRulesJudgedOverTime), std::end(kRulesJudgedOverTime), id) !=
                              std::end(kRulesJudgedOverTime);
}

std::string Ago(WallTime then, WallTime now) {
  return rules_internal::FormatSpan(std::max(Duration::zero(), now - then));
}

}  // namespace

std::optional<WallTime> AgentRecord::LastActive() const {
  std::optional<WallTime> last = last_sample;
  for (const AgentFinding& open_finding : open)
    if (!last || open_finding.last_seen > *last) last = open_finding.last_seen;
  return last;
}

bool AgentRecord::FreshAt(WallTime now, Duration stale_after) const {
  const std::optional<WallTime> last = LastActive();
  return state == State::kRead && last && now - *last <= stale_after;
}

std::vector<Finding> AgentOpenFindings(const AgentRecord& record, const std::vector<Finding>& findings, WallTime now,
                                       const HealthConfig& config) {
  std::vector<Finding> added;
  if (!record.FreshAt(now, config.thresholds.agent_history.stale_after)) return added;
  std::set<std::string> reported;
  for (const Finding& finding : findings)
    if (finding.severity != Severity::kOk) reported.insert(FindingKey(finding));
  for (const AgentFinding& open : record.open) {
    if (!AgentJudgesBetter(open.finding.id) || reported.count(FindingKey(open.finding))) continue;
    Finding finding = open.finding;
    finding.summary += fmt::format(" (agent: open for {})", Ago(open.opened_at, now));
    finding.evidence.push_back(fmt::format("open in the agent's history {} since {}; the agent's last sample {} ago",
                                           record.database, FormatIsoUtc(open.opened_at),
                                           Ago(*record.LastActive(), now)));
    added.push_back(std::move(finding));
  }
  return added;
}

}  // namespace gpudoctor
