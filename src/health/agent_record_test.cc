// agent_history and AgentOpenFindings: what `check` and `triage` take from
// the agent's history.
#include "health/agent_record.h"

#include <gtest/gtest.h>

#include "common/text.h"
#include "health/health_test_support.h"

namespace gpudoctor {
namespace {

using namespace testing_support;
using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

AgentFinding Open(std::string id, Severity severity, std::string summary, WallTime opened_at) {
  Finding finding;
  finding.id = std::move(id);
  finding.severity = severity;
  finding.gpu = GpuRef{.index = 2};
  finding.summary = std::move(summary);
  return {finding, opened_at, kNow - seconds(5)};
}

// An agent that sampled 5 s ago, holding a GPU stuck at 100% for 3 hours and
// a hot GPU.
AgentRecord FreshRecord() {
  AgentRecord record;
  record.state = AgentRecord::State::kRead;
  record.database = "/var/lib/gpudoctor/history.db";
  record.last_sample = kNow - seconds(5);
  record.open = {Open("utilization_stuck", Severity::kWarning, "GPU 2 stuck at 100% utilisation", kNow - hours(3)),
                 Open("temperature_high", Severity::kWarning, "GPU 2 at 80 °C", kNow - hours(1))};
  return record;
}

std::vector<Finding> EvaluateWith(const AgentRecord& record) {
  HealthInput input;
  input.agent = &record;
  input.now = kNow;
  return EvaluateRules(input, DefaultHealthConfig());
}

TEST(AgentOpenFindings, TheAgentsTrendFindingsJoinTheCommandsWithTheirAge) {
  const AgentRecord record = FreshRecord();
  std::vector<Finding> added = AgentOpenFindings(record, {}, kNow, DefaultHealthConfig());
  // temperature_high is a rule the command judges itself, now.
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0].id, "utilization_stuck");
  EXPECT_EQ(added[0].severity, Severity::kWarning);
  EXPECT_EQ(added[0].summary, "GPU 2 stuck at 100% utilisation (agent: open for 3h)");
  EXPECT_EQ(added[0].evidence.back(),
            "open in the agent's history /var/lib/gpudoctor/history.db since " + FormatIsoUtc(kNow - hours(3)) +
                "; the agent's last sample 5s ago");

  Finding agent = WithId(EvaluateWith(record), "agent_history").at(0);
  EXPECT_EQ(agent.severity, Severity::kOk);
  EXPECT_EQ(agent.summary, "The agent sampled 5s ago; it holds 2 open findings");
}

TEST(AgentOpenFindings, WhatTheCommandReportsItselfIsNotRepeated) {
  AgentRecord record = FreshRecord();
  record.open.push_back(Open("xid_recent", Severity::kCritical, "Xid 79 on GPU 2", kNow - minutes(10)));
  std::vector<Finding> current{record.open.back().finding};
  std::vector<Finding> added = AgentOpenFindings(record, current, kNow, DefaultHealthConfig());
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0].id, "utilization_stuck");
}

TEST(AgentHistory, AStaleHistoryIsAWarningAndItsFindingsOnlyEvidence) {
  AgentRecord record = FreshRecord();
  record.last_sample = kNow - hours(3);
  for (AgentFinding& open : record.open) open.last_seen = kNow - hours(3);
  EXPECT_TRUE(AgentOpenFindings(record, {}, kNow, DefaultHealthConfig()).empty());

  Finding agent = WithId(EvaluateWith(record), "agent_history").at(0);
  EXPECT_EQ(agent.severity, Severity::kWarning);
  EXPECT_EQ(agent.summary, "The agent's history is stale: its last sample is 3h old");
  EXPECT_NE(std::find(agent.evidence.begin(), agent.evidence.end(),
                      "open when it stopped: utilization_stuck (warning, since " + FormatIsoUtc(kNow - hours(3)) +
                          "): GPU 2 stuck at 100% utilisation"),
            agent.evidence.end());
  EXPECT_FALSE(agent.actions.empty());
}

TEST(AgentHistory, WithoutAHistoryTheTrendChecksNeedTheAgent) {
  AgentRecord record;
  record.note = "/var/lib/gpudoctor/history.db does not exist: no agent has recorded here";
  Finding agent = WithId(EvaluateWith(record), "agent_history").at(0);
  EXPECT_EQ(agent.severity, Severity::kOk);
  EXPECT_EQ(agent.summary, "Trend checks not run: they need `gpudoctor agent` and its history");
  EXPECT_EQ(agent.evidence, std::vector<std::string>{record.note});
  EXPECT_TRUE(AgentOpenFindings(record, {}, kNow, DefaultHealthConfig()).empty());
}

TEST(AgentHistory, NotLookedForIsNotJudged) {
  HealthInput input;
  input.now = kNow;
  EXPECT_TRUE(WithId(EvaluateRules(input, DefaultHealthConfig()), "agent_history").empty());
}

}  // namespace
}  // namespace gpudoctor
