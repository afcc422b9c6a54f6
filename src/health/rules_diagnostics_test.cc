// diagnostic_failed: the tests of `gpudoctor diag` as the agent's history keeps them.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "health/health_test_support.h"

namespace gpudoctor {
namespace {

using namespace testing_support;
using namespace std::chrono_literals;

std::string UuidOf(uint32_t index) { return fmt::format("GPU-0000000{}-aaaa-bbbb-cccc-dddddddddddd", index); }

DiagnosticRecord Record(uint32_t gpu, std::string test, std::string state, Duration ago) {
  return {.finished_at = kNow - std::chrono::duration_cast<WallTime::duration>(ago),
          .gpu_index = gpu,
          .uuid = UuidOf(gpu),
          .pci_bus_id = fmt::format("0000:{:02x}:00.0", 0x1b + gpu * 0x28),
          .test = test,
          .state = state,
          .summary = fmt::format("{} on GPU {}: {}", test, gpu, state),
          .command = fmt::format("gpudoctor diag {} --gpu {} --duration 10m", test, gpu)};
}

std::vector<Finding> EvaluateWith(const std::vector<DiagnosticRecord>* diagnostics, const Snapshot* snapshot) {
  HealthInput input;
  input.snapshot = snapshot;
  input.diagnostics = diagnostics;
  input.now = kNow;
  return EvaluateRules(input, DefaultHealthConfig());
}

bool ActionsHave(const Finding& finding, std::string_view text) {
  return std::any_of(finding.actions.begin(), finding.actions.end(),
                     [&](const std::string& action) { return action.find(text) != std::string::npos; });
}

TEST(DiagnosticFailed, AFaultyMemtestIsCriticalAndNamesItsCommand) {
  const Snapshot snapshot = HealthySnapshot(2);
  const std::vector<DiagnosticRecord> diagnostics{Record(0, "memtest", "passed", 48h),
                                                  Record(1, "memtest", "faulty", 3h)};
  const Finding finding = Single(EvaluateWith(&diagnostics, &snapshot), "diagnostic_failed");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  ASSERT_TRUE(finding.gpu);
  EXPECT_EQ(finding.gpu->index, 1u);
  EXPECT_EQ(finding.gpu->uuid, UuidOf(1));
  EXPECT_EQ(finding.subject, "memtest");
  EXPECT_EQ(finding.newest_event_at, diagnostics[1].finished_at);
  EXPECT_EQ(finding.summary, "GPU 1 failed gpudoctor diag memtest 3h ago");
  EXPECT_TRUE(EvidenceHas(finding, "memtest on GPU 1: faulty"));
  EXPECT_TRUE(ActionsHave(finding, "gpudoctor diag memtest --gpu 1 --duration 10m")) << finding.actions.front();
  EXPECT_FALSE(ActionsHave(finding, "{command}"));
  EXPECT_EQ(finding.cause, DefaultHealthConfig().RemedyFor("diagnostic_failed", "memtest").cause);
}

TEST(DiagnosticFailed, AHungBurnIsCriticalAndAFaultyPcieTestAWarning) {
  const Snapshot snapshot = HealthySnapshot(2);
  const std::vector<DiagnosticRecord> diagnostics{Record(0, "burn", "hung", 26h), Record(0, "pcie", "faulty", 1h)};
  const std::vector<Finding> findings = WithId(EvaluateWith(&diagnostics, &snapshot), "diagnostic_failed");
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].severity, Severity::kCritical);
  EXPECT_EQ(findings[0].summary, "GPU 0 hung in gpudoctor diag burn 26h ago");
  EXPECT_TRUE(ActionsHave(findings[0], "gpudoctor diag burn --gpu 0 --duration 10m"));
  EXPECT_EQ(findings[1].severity, Severity::kWarning);
  EXPECT_EQ(findings[1].subject, "pcie");  // a second incident on the same GPU
  EXPECT_NE(FindingKey(findings[0]), FindingKey(findings[1]));
  EXPECT_TRUE(ActionsHave(findings[1], "gpudoctor diag pcie --gpu 0 --duration 10m"));
}

TEST(DiagnosticFailed, AGpuHungInThePcieTestIsCriticalToo) {
  const Snapshot snapshot = HealthySnapshot(1);
  const std::vector<DiagnosticRecord> diagnostics{Record(0, "pcie", "hung", 1h)};
  const std::vector<Finding> findings = WithId(EvaluateWith(&diagnostics, &snapshot), "diagnostic_failed");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kCritical);
}

// A run just made (gpudoctor slurm --diag-level) is judged as the history will judge it.
TEST(DiagnosticFailed, ARunJustMadeGetsTheFindingTheHistoryWouldGive) {
  const Snapshot snapshot = HealthySnapshot(2);
  const DiagnosticRecord record = Record(1, "burn", "faulty", 0h);
  const std::vector<DiagnosticRecord> diagnostics{record};
  const Finding from_history = Single(EvaluateWith(&diagnostics, &snapshot), "diagnostic_failed");
  const Finding made = DiagnosticFailedFinding(record, DefaultHealthConfig(), record.finished_at);
  EXPECT_EQ(made.severity, from_history.severity);
  EXPECT_EQ(made.cause, from_history.cause);
  EXPECT_EQ(made.actions, from_history.actions);
  EXPECT_EQ(made.subject, "burn");
  EXPECT_EQ(made.gpu->index, 1u);
}

TEST(DiagnosticFailed, OlderFaultsPassedRunsAndBoardsThatLeftAreNoFinding) {
  const Snapshot snapshot = HealthySnapshot(2);
  DiagnosticRecord replaced = Record(1, "memtest", "faulty", 1h);
  replaced.uuid = "GPU-99999999-aaaa-bbbb-cccc-dddddddddddd";  // the board was swapped since
  const std::vector<DiagnosticRecord> diagnostics{Record(0, "memtest", "faulty", 31 * 24h),
                                                  Record(0, "burn", "could_not_run", 1h), replaced,
                                                  Record(1, "burn", "passed", 2h)};
  const std::vector<Finding> findings = EvaluateWith(&diagnostics, &snapshot);
  const Finding finding = Single(findings, "diagnostic_failed");
  EXPECT_EQ(finding.severity, Severity::kOk);
  EXPECT_EQ(finding.summary, "No GPU failed a diagnostic in the last 30d");
  EXPECT_TRUE(EvidenceHas(finding, "GPU 0: memtest faulty 31d ago"));
  EXPECT_TRUE(EvidenceHas(finding, "GPU 1: memtest faulty 1h ago (that board is no longer in this server)"));
  EXPECT_TRUE(EvidenceHas(finding, "GPU 1: burn passed 2h ago"));
}

// A captured report that ran nothing on a GPU (gpu_burn's OK after 0 operations) proves nothing of it; gpudoctor's
// own run that could not start is in the history and says so itself (the test above).
TEST(DiagnosticFailed, ACapturedReportThatTestedAGpuNotIsNoPass) {
  const Snapshot snapshot = HealthySnapshot(2);
  auto captured = [](uint32_t gpu, std::string state) {
    DiagnosticRecord record = Record(gpu, "burn", std::move(state), 0h);
    record.tool = "gpu_burn";
    return record;
  };
  const std::vector<DiagnosticRecord> none_tested{captured(0, "could_not_run"), captured(1, "interrupted")};
  const Finding unknown = Single(EvaluateWith(&none_tested, &snapshot), "diagnostic_failed");
  EXPECT_EQ(unknown.severity, Severity::kUnknown);
  EXPECT_EQ(unknown.summary, "The captured report did not test GPUs 0, 1: no verdict on them");

  const std::vector<DiagnosticRecord> one_tested{captured(0, "passed"), captured(1, "could_not_run")};
  EXPECT_EQ(Single(EvaluateWith(&one_tested, &snapshot), "diagnostic_failed").summary,
            "The captured report did not test GPU 1: no verdict on it");

  const std::vector<DiagnosticRecord> one_failed{captured(0, "faulty"), captured(1, "could_not_run")};
  EXPECT_EQ(Single(EvaluateWith(&one_failed, &snapshot), "diagnostic_failed").severity, Severity::kCritical);
}

TEST(DiagnosticFailed, TheWindowIsConfigurable) {
  auto config = ApplyHealthConfig(DefaultHealthConfig(), "[rules.diagnostic_failed]\nwindow = \"60d\"\n", "test");
  ASSERT_TRUE(config.ok()) << config.error().message;
  const Snapshot snapshot = HealthySnapshot(1);
  const std::vector<DiagnosticRecord> diagnostics{Record(0, "memtest", "faulty", 31 * 24h)};
  HealthInput input;
  input.snapshot = &snapshot;
  input.diagnostics = &diagnostics;
  input.now = kNow;
  EXPECT_EQ(Single(EvaluateRules(input, *config), "diagnostic_failed").severity, Severity::kCritical);
}

TEST(DiagnosticFailed, WithoutAHistoryOrARecordItJudgesNothing) {
  const Snapshot snapshot = HealthySnapshot(1);
  EXPECT_TRUE(WithId(EvaluateWith(nullptr, &snapshot), "diagnostic_failed").empty());
  const std::vector<DiagnosticRecord> none;
  HealthInput input;
  input.snapshot = &snapshot;
  input.diagnostics = &none;
  input.now = kNow;
  std::vector<UncheckedRule> unchecked;
  EXPECT_TRUE(WithId(EvaluateRules(input, DefaultHealthConfig(), unchecked), "diagnostic_failed").empty());
  EXPECT_TRUE(std::any_of(unchecked.begin(), unchecked.end(),
                          [](const UncheckedRule& rule) { return rule.rule_id == "diagnostic_failed"; }));
}

TEST(GpuPlaceholder, NamesTheFindingsGpusOrLeavesTheOptionOut) {
  const std::vector<std::string> actions{"Test it: gpudoctor diag memtest --gpu {gpu}.", "Reseat it."};
  EXPECT_EQ(FillGpuPlaceholder(actions, GpuRef{.index = 3}),
            (std::vector<std::string>{"Test it: gpudoctor diag memtest --gpu 3.", "Reseat it."}));
  EXPECT_EQ(FillGpuPlaceholder(actions, std::vector<uint32_t>{0, 2})[0], "Test it: gpudoctor diag memtest --gpu 0,2.");
  EXPECT_EQ(FillGpuPlaceholder(actions, GpuRef{.pci_bus_id = "0000:3b:00.0"})[0], "Test it: gpudoctor diag memtest.");
  EXPECT_EQ(FillGpuPlaceholder(actions, std::nullopt)[0], "Test it: gpudoctor diag memtest.");
  const std::vector<std::string> reset{"Reset it: nvidia-smi -r -i {gpu}."};
  EXPECT_EQ(FillGpuPlaceholder(reset, GpuRef{.index = 5})[0], "Reset it: nvidia-smi -r -i 5.");
  EXPECT_EQ(FillGpuPlaceholder(reset, std::nullopt)[0], "Reset it: nvidia-smi -r -i <index>.");
}

}  // namespace
}  // namespace gpudoctor
