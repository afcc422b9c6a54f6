#include "slurm/slurm_control.h"
#include "common/text.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace gpudoctor {
namespace {

// Four nodes in `debug`, node1 and node2 also in `gpu`; `drained` lists the
// nodes gpudoctor drained.
std::vector<SlurmNodeRow> Cluster(const std::vector<std::string>& drained_by_us = {}) {
  std::vector<SlurmNodeRow> rows;
  for (const char* partition : {"debug", "gpu"}) {
    for (const char* node : {"node1", "node2", "node3", "node4"}) {
      if (std::string(partition) == "gpu" && std::string(node) > "node2") continue;
      SlurmNodeRow row{node, partition, "idle", ""};
      if (std::find(drained_by_us.begin(), drained_by_us.end(), node) != drained_by_us.end()) {
        row.state = "drained";
        row.reason = "gpudoctor: xid_recent gpu 1: Xid 79";
      }
      rows.push_back(row);
    }
  }
  return rows;
}

SlurmPlanInput Critical(double max_share, const std::string& partition = "") {
  return {.node = "node1",
          .partition = partition,
          .max_drain_share = max_share,
          .critical = true,
          .drain_reason = "gpudoctor: xid_recent gpu 0: Xid 79"};
}

SlurmPlan Plan(const std::vector<SlurmNodeRow>& rows, const SlurmPlanInput& input) {
  auto plan = PlanSlurmAction(rows, input);
  EXPECT_TRUE(plan.ok()) << plan.error().message;
  return plan.ok() ? *plan : SlurmPlan{};
}

// ---- sinfo ---------------------------------------------------------------------

TEST(SlurmSinfo, AskedForOneNodePerLineWithTheReasonLast) {
  EXPECT_EQ(SinfoCommand("/usr/bin/sinfo"),
            (std::vector<std::string>{"/usr/bin/sinfo", "--noheader", "--Node", "--format=%N|%R|%T|%E"}));
}

TEST(SlurmSinfo, ParsesRowsAsSlurm22PrintsThem) {
  auto rows = ParseSinfoNodes(
      "node1|debug|idle|none\n"
      "node2|debug|drained*|gpudoctor: test\n"
      "node3|debug|DRAINING|admin: maintenance\n");
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0], (SlurmNodeRow{"node1", "debug", "idle", ""}));
  EXPECT_EQ((*rows)[1], (SlurmNodeRow{"node2", "debug", "drained*", "gpudoctor: test"}));
  EXPECT_EQ((*rows)[2], (SlurmNodeRow{"node3", "debug", "draining", "admin: maintenance"}));
}

TEST(SlurmSinfo, AReasonKeepsItsBarsQuotesAndSpaces) {
  auto rows = ParseSinfoNodes("node3|debug|drained|gpudoctor: test \"quoted\" | pipe  \n");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].reason, "gpudoctor: test \"quoted\" | pipe");
}

TEST(SlurmSinfo, OddLinesAreSkipped) {
  auto rows = ParseSinfoNodes(
      "\n"
      "sinfo: warning: something to say\n"
      "node1|debug|idle|none\r\n"
      "|debug|idle|none\n"
      "node9|debug|idle\n"
      "   \n"
      "node2|gpu|mixed|\n");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].node, "node1");
  EXPECT_EQ((*rows)[0].reason, "");
  EXPECT_EQ((*rows)[1], (SlurmNodeRow{"node2", "gpu", "mixed", ""}));
}

TEST(SlurmSinfo, NothingButOddLinesIsAnError) {
  auto rows = ParseSinfoNodes("slurm_load_partitions: Unable to contact slurm controller\n");
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.error().message.find("Unable to contact slurm controller"), std::string::npos);
}

TEST(SlurmSinfo, EmptyOutputIsNoNodes) {
  auto rows = ParseSinfoNodes("");
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(rows->empty());
}

TEST(SlurmSinfo, PartitionsOfANodeInSinfoOrder) {
  EXPECT_EQ(SlurmPartitionsOf(Cluster(), "node2"), (std::vector<std::string>{"debug", "gpu"}));
  EXPECT_EQ(SlurmPartitionsOf(Cluster(), "node4"), (std::vector<std::string>{"debug"}));
  EXPECT_TRUE(SlurmPartitionsOf(Cluster(), "node9").empty());
}

TEST(SlurmSinfo, StatesWithTheDrainFlag) {
  for (const char* state : {"drained", "draining", "drain", "drng", "drained*", "DRAINING@", "idle+drain", "drain~"})
    EXPECT_TRUE(IsDrainState(state)) << state;
  for (const char* state : {"idle", "mixed", "allocated*", "down*", "unknown", "maint", ""})
    EXPECT_FALSE(IsDrainState(state)) << state;
  EXPECT_TRUE(IsDownState("down*"));
  EXPECT_TRUE(IsDownState("fail"));
  EXPECT_FALSE(IsDownState("drained*"));
  EXPECT_FALSE(IsDownState("idle"));
}

TEST(SlurmSinfo, OnlyDrainedNodesWithOurReasonAreOurs) {
  EXPECT_TRUE(DrainedByGpudoctor({"n", "p", "drained*", "gpudoctor: test"}));
  EXPECT_TRUE(DrainedByGpudoctor({"n", "p", "draining", "gpudoctor:x"}));
  EXPECT_FALSE(DrainedByGpudoctor({"n", "p", "drained", "admin: maintenance"}));
  EXPECT_FALSE(DrainedByGpudoctor({"n", "p", "drained", "Prolog error: gpudoctor: x"}));
  EXPECT_FALSE(DrainedByGpudoctor({"n", "p", "down*", "gpudoctor: test"}));
  EXPECT_FALSE(DrainedByGpudoctor({"n", "p", "idle", "gpudoctor: test"}));
}

// ---- reasons ---------------------------------------------------------------------

TEST(SlurmReason, NamesTheRuleTheGpuAndTheSummary) {
  EXPECT_EQ(FormatDrainReason("xid_recent", 3, "GPU 3: Xid 79 (fallen off the bus)", 0),
            "gpudoctor: xid_recent gpu 3: GPU 3: Xid 79 (fallen off the bus)");
  EXPECT_EQ(FormatDrainReason("driver_unavailable", std::nullopt, "NVML library not found", 2),
            "gpudoctor: driver_unavailable: NVML library not found (+2 more)");
}

TEST(SlurmReason, IsOneLineWithoutDoubleQuotes) {
  EXPECT_EQ(FormatDrainReason("x", 0, "line one\nline two\t\"quoted\"\r\n", 0), "gpudoctor: x gpu 0: line one line two 'quoted'");
}

TEST(SlurmReason, ALongSummaryIsCutButTheCountStays) {
  const std::string reason = FormatDrainReason("ecc_uncorrectable", 7, std::string(300, 'a'), 4);
  EXPECT_EQ(reason.size(), kMaxSlurmReasonBytes);
  EXPECT_TRUE(reason.starts_with("gpudoctor: ecc_uncorrectable gpu 7: aaa")) << reason;
  EXPECT_TRUE(reason.ends_with("aaa... (+4 more)")) << reason;
}

TEST(SlurmReason, CutsNeverSplitACharacter) {
  // "°" is two bytes: a cut between them would leave invalid UTF-8 in Slurm's state.
  std::string summary;
  for (int i = 0; i < 60; ++i) summary += "°";
  for (size_t max = 3; max < 20; ++max) {
    std::string fitted = FitOneLine(summary, max);
    EXPECT_LE(fitted.size(), max);
    ASSERT_TRUE(fitted.ends_with("..."));
    EXPECT_EQ((fitted.size() - 3) % 2, 0u) << max;  // whole characters only
  }
  std::string reason = FormatDrainReason("temperature_high", 1, summary, 0);
  EXPECT_LE(reason.size(), kMaxSlurmReasonBytes);
}

TEST(SlurmReason, FitOneLineLeavesAShortLineAlone) {
  EXPECT_EQ(FitOneLine("  gpu 0:   xid_recent  ", 80), "gpu 0: xid_recent");
  EXPECT_EQ(FitOneLine("abcdef", 6), "abcdef");
  EXPECT_EQ(FitOneLine("abcdefg", 6), "abc...");
  EXPECT_EQ(FitOneLine("abc defg", 7), "abc...");  // no space before the dots
}

// ---- the plan and its circuit breaker ------------------------------------------

TEST(SlurmPlan, DrainsWhenTheBreakerAllows) {
  SlurmPlan plan = Plan(Cluster(), Critical(0.5));
  EXPECT_EQ(plan.action, SlurmAction::kDrain);
  EXPECT_EQ(plan.reason, "gpudoctor: xid_recent gpu 0: Xid 79");
  ASSERT_TRUE(plan.breaker);
  // gpu (2 nodes) is nearer its limit than debug (4 nodes): 1 of 2 is 50%.
  EXPECT_EQ(plan.breaker->partition, "gpu");
  EXPECT_EQ(plan.breaker->nodes, 2);
  EXPECT_EQ(plan.breaker->drained_by_gpudoctor, 0);
  EXPECT_TRUE(plan.breaker->allowed);
}

TEST(SlurmPlan, TheBreakerHoldsPastTheShareAndSaysSoPlainly) {
  SlurmPlan plan = Plan(Cluster({"node2", "node3"}), Critical(0.5, "debug"));
  EXPECT_EQ(plan.action, SlurmAction::kHeldByBreaker);
  ASSERT_TRUE(plan.breaker);
  EXPECT_EQ(plan.breaker->partition, "debug");
  EXPECT_EQ(plan.breaker->nodes, 4);
  EXPECT_EQ(plan.breaker->drained_by_gpudoctor, 2);
  EXPECT_FALSE(plan.breaker->allowed);
  EXPECT_EQ(plan.explanation,
            "circuit breaker: 2 of 4 nodes in partition debug are already drained by gpudoctor; draining node1 would "
            "make 75% > 50%; not draining");
}

TEST(SlurmPlan, TheShareIsInclusive) {
  // (2 + 1) / 4 = 0.75: allowed at 0.75 and 0.8, held at 0.74.
  EXPECT_EQ(Plan(Cluster({"node2", "node3"}), Critical(0.75, "debug")).action, SlurmAction::kDrain);
  EXPECT_EQ(Plan(Cluster({"node2", "node3"}), Critical(0.8, "debug")).action, SlurmAction::kDrain);
  EXPECT_EQ(Plan(Cluster({"node2", "node3"}), Critical(0.74, "debug")).action, SlurmAction::kHeldByBreaker);
  // 1 of 10 is exactly 0.1.
  std::vector<SlurmNodeRow> ten;
  for (int i = 1; i <= 10; ++i) ten.push_back({"node" + std::to_string(i), "big", "idle", ""});
  EXPECT_EQ(Plan(ten, Critical(0.1)).action, SlurmAction::kDrain);
  ten[4] = {"node5", "big", "draining", "gpudoctor: x"};
  EXPECT_EQ(Plan(ten, Critical(0.1)).action, SlurmAction::kHeldByBreaker);
}

TEST(SlurmPlan, AnyOfTheNodesPartitionsCanHold) {
  // node2 drained by us: gpu has 2 nodes, so node1 would make 100% of it; debug alone would allow 50%.
  SlurmPlan plan = Plan(Cluster({"node2"}), Critical(0.5));
  EXPECT_EQ(plan.action, SlurmAction::kHeldByBreaker);
  EXPECT_EQ(plan.breaker->partition, "gpu");
  EXPECT_EQ(plan.explanation,
            "circuit breaker: 1 of 2 nodes in partition gpu is already drained by gpudoctor; draining node1 would make "
            "100% > 50%; not draining");
  // --partition debug weighs debug alone.
  EXPECT_EQ(Plan(Cluster({"node2"}), Critical(0.5, "debug")).action, SlurmAction::kDrain);
}

TEST(SlurmPlan, NodesDrainedForOtherReasonsAreNotCounted) {
  std::vector<SlurmNodeRow> rows = Cluster();
  rows[1] = {"node2", "debug", "drained", "admin: maintenance"};
  rows[2] = {"node3", "debug", "down*", "gpudoctor: x"};
  SlurmPlan plan = Plan(rows, Critical(0.25, "debug"));
  EXPECT_EQ(plan.action, SlurmAction::kDrain);
  EXPECT_EQ(plan.breaker->drained_by_gpudoctor, 0);
}

TEST(SlurmPlan, ZeroNeverDrainsAndOneAlwaysMay) {
  EXPECT_EQ(Plan(Cluster(), Critical(0)).action, SlurmAction::kHeldByBreaker);
  EXPECT_EQ(Plan(Cluster({"node2", "node3", "node4"}), Critical(1)).action, SlurmAction::kDrain);
}

TEST(SlurmPlan, AnAlreadyDrainedNodeIsLeftAsItIs) {
  std::vector<SlurmNodeRow> rows = Cluster({"node1"});
  SlurmPlan ours = Plan(rows, Critical(1));
  EXPECT_EQ(ours.action, SlurmAction::kNone);
  EXPECT_EQ(ours.reason, "gpudoctor: xid_recent gpu 1: Xid 79");
  EXPECT_NE(ours.explanation.find("already drained by gpudoctor"), std::string::npos) << ours.explanation;

  for (SlurmNodeRow& row : rows)
    if (row.node == "node1") row = {"node1", row.partition, "drained", "admin: maintenance"};
  SlurmPlan theirs = Plan(rows, Critical(1));
  EXPECT_EQ(theirs.action, SlurmAction::kNone);  // its reason is never overwritten
  EXPECT_EQ(theirs.reason, "admin: maintenance");

  for (SlurmNodeRow& row : rows)
    if (row.node == "node1") row.state = "down*";
  EXPECT_EQ(Plan(rows, Critical(1)).action, SlurmAction::kNone);
}

TEST(SlurmPlan, ResumesOnlyWhatGpudoctorDrained) {
  SlurmPlanInput healthy{.node = "node1", .max_drain_share = 0.1};
  SlurmPlan plan = Plan(Cluster({"node1"}), healthy);
  EXPECT_EQ(plan.action, SlurmAction::kResume);
  EXPECT_EQ(plan.reason, "gpudoctor: xid_recent gpu 1: Xid 79");
  EXPECT_FALSE(plan.breaker);

  std::vector<SlurmNodeRow> rows = Cluster();
  rows[0] = {"node1", "debug", "drained", "admin: maintenance"};
  plan = Plan(rows, healthy);
  EXPECT_EQ(plan.action, SlurmAction::kNone);
  EXPECT_NE(plan.explanation.find("another reason"), std::string::npos) << plan.explanation;

  EXPECT_EQ(Plan(Cluster(), healthy).action, SlurmAction::kNone);
}

TEST(SlurmPlan, AnUnknownNodeOrPartitionIsAnError) {
  auto unknown = PlanSlurmAction(Cluster(), {.node = "gpu-17", .critical = true});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("sinfo lists no node named gpu-17"), std::string::npos);

  auto elsewhere = PlanSlurmAction(Cluster(), Critical(0.5, "long"));
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_EQ(elsewhere.error().message, "node node1 is not in partition long (it is in debug, gpu)");
}

// ---- scontrol ---------------------------------------------------------------------

TEST(SlurmCommands, ArgvNeedsNoQuoting) {
  EXPECT_EQ(DrainCommand("scontrol", "node1", "gpudoctor: x gpu 0: a b"),
            (std::vector<std::string>{"scontrol", "update", "nodename=node1", "state=drain",
                                      "reason=gpudoctor: x gpu 0: a b"}));
  EXPECT_EQ(ResumeCommand("/opt/slurm/bin/scontrol", "node1"),
            (std::vector<std::string>{"/opt/slurm/bin/scontrol", "update", "nodename=node1", "state=resume"}));
}

TEST(SlurmCommands, ActionNames) {
  EXPECT_STREQ(SlurmActionName(SlurmAction::kDrain, false), "drain");
  EXPECT_STREQ(SlurmActionName(SlurmAction::kDrain, true), "would_drain");
  EXPECT_STREQ(SlurmActionName(SlurmAction::kResume, false), "resume");
  EXPECT_STREQ(SlurmActionName(SlurmAction::kResume, true), "would_resume");
  EXPECT_STREQ(SlurmActionName(SlurmAction::kHeldByBreaker, true), "held_by_breaker");
  EXPECT_STREQ(SlurmActionName(SlurmAction::kNone, false), "none");
}

}  // namespace
}  // namespace gpudoctor
