#include "health/checklist.h"

#include <gtest/gtest.h>

#include "health/finding_json.h"
#include "health/health_test_support.h"

namespace gpudoctor {
namespace {

using namespace testing_support;

TEST(BuildChecklist, HealthyServerPassesEveryConfiguredItem) {
  Snapshot snapshot = HealthySnapshot(8);
  HostSignals host = HealthyHost(8);
  std::vector<LogEvent> events;
  std::vector<Finding> findings = Evaluate(&snapshot, &host, &events);
  Checklist checklist = BuildChecklist(findings, DefaultHealthConfig());
  ASSERT_EQ(checklist.items.size(), 9u);
  for (const ChecklistItem& item : checklist.items) {
    EXPECT_EQ(item.severity, Severity::kOk) << item.title;
    // Upkeep is judged from the agent's history, which a run on captured input has none of.
    EXPECT_EQ(item.checked, item.title != "Maintenance up to date") << item.title;
  }
  EXPECT_EQ(checklist.items[0].summary, "All 8 GPUs below their warning temperatures (nearest: GPU 7 at 47 °C, warning at 77 °C)");
  EXPECT_FALSE(checklist.other_findings.empty());
  for (size_t index : checklist.other_findings) EXPECT_NE(findings[index].id, "temperature_high");
}

TEST(BuildChecklist, ItemTakesItsWorstFinding) {
  Snapshot snapshot = HealthySnapshot(2);
  snapshot.gpus[0].access_error = AccessError::kGpuLost;
  snapshot.gpus[1].access_error = AccessError::kResetRequired;
  std::vector<Finding> findings = Evaluate(&snapshot);
  Checklist checklist = BuildChecklist(findings, DefaultHealthConfig());
  const ChecklistItem& answering = checklist.items[3];
  EXPECT_EQ(answering.title, "nvidia-smi answering");
  EXPECT_EQ(answering.severity, Severity::kCritical);
  EXPECT_EQ(answering.summary, "GPU 0 has fallen off the bus (+1 more)");
  EXPECT_EQ(findings[answering.findings.front()].id, "gpu_lost");
}

TEST(BuildChecklist, ItemsWithNothingToJudgeAreNotChecked) {
  Snapshot snapshot = HealthySnapshot(1);
  std::vector<Finding> findings = Evaluate(&snapshot);  // no host signals, no logs
  Checklist checklist = BuildChecklist(findings, DefaultHealthConfig());
  const ChecklistItem& backups = checklist.items.back();
  EXPECT_EQ(backups.title, "Backups working");
  EXPECT_FALSE(backups.checked);
  EXPECT_EQ(backups.summary, "not checked");
  EXPECT_EQ(backups.severity, Severity::kOk);
}

TEST(BuildChecklist, AnItemNotCheckedKeepsItsRulesReasons) {
  std::vector<UncheckedRule> unchecked = {{"fan_failure", "no fans"}, {"fan_failure", "no chassis fans"}};
  Checklist checklist = BuildChecklist({}, DefaultHealthConfig(), unchecked);
  const ChecklistItem& fans = checklist.items[1];
  EXPECT_EQ(fans.title, "Fans turning");
  EXPECT_FALSE(fans.checked);
  EXPECT_EQ(fans.unchecked_reason, "no fans; no chassis fans");
  EXPECT_EQ(fans.summary, "not checked: no fans; no chassis fans");
  EXPECT_EQ(ChecklistStateName(fans), "unchecked");
}

TEST(BuildOpenChecklist, ItemsStandAsTheOpenFindingsAndWereCheckedAsJudged) {
  const HealthConfig config = DefaultHealthConfig();
  const Finding hot{.id = "temperature_high", .severity = Severity::kWarning, .summary = "GPU 1 at 85 °C"};
  const Finding xid{.id = "xid_recent", .severity = Severity::kCritical, .summary = "Xid 79 on GPU 2"};
  const Finding disk{.id = "disk_space", .severity = Severity::kOk, .summary = "/ 40% used"};
  // This round: all three; the Xid's incident was acknowledged, so only the heat is open.
  const std::vector<UncheckedRule> unchecked = {{"fan_failure", "no fans"}};
  const Checklist judged = BuildChecklist({hot, xid, disk}, config, unchecked);
  const Checklist open = BuildOpenChecklist({hot}, judged, config.checklist);
  ASSERT_EQ(open.items.size(), judged.items.size());
  auto item = [&](const std::string& title) -> const ChecklistItem& {
    for (const ChecklistItem& i : open.items)
      if (i.title == title) return i;
    ADD_FAILURE() << title;
    return open.items.front();
  };
  EXPECT_EQ(ChecklistStateName(item("GPUs below their temperature limits")), "warning");
  EXPECT_EQ(ChecklistStateName(item("No GPU errors in the system log")), "ok");  // acknowledged, not open
  EXPECT_EQ(ChecklistStateName(item("Enough free storage")), "ok");
  EXPECT_EQ(item("Enough free storage").summary, "/ 40% used");
  EXPECT_EQ(ChecklistStateName(item("Fans turning")), "unchecked");
  EXPECT_EQ(item("Fans turning").unchecked_reason, "no fans");
  EXPECT_EQ(ChecklistStateName(item("Backups working")), "unchecked");
  EXPECT_EQ(item("Backups working").unchecked_reason, "");
}

TEST(FindingJson, HasTheDocumentedShape) {
  Finding finding;
  finding.id = "temperature_high";
  finding.severity = Severity::kCritical;
  finding.gpu = GpuRef{3, "GPU-abc", "0000:3b:00.0", ""};
  finding.summary = "GPU 3 at 83 °C";
  finding.evidence = {"GPU 3 temperature: 83 °C"};
  finding.cause = "dust";
  finding.actions = {"clean"};
  nlohmann::json j = FindingToJson(finding);
  EXPECT_EQ(j["id"], "temperature_high");
  EXPECT_EQ(j["severity"], "critical");
  EXPECT_EQ(j["gpu"]["index"], 3);
  EXPECT_EQ(j["gpu"]["uuid"], "GPU-abc");
  EXPECT_EQ(j["gpu"]["pci_bus_id"], "0000:3b:00.0");
  EXPECT_FALSE(j["gpu"].contains("serial"));
  finding.gpu = GpuRef{std::nullopt, "", "0000:3b:00.0", ""};
  EXPECT_TRUE(FindingToJson(finding)["gpu"]["index"].is_null());
  EXPECT_TRUE(FindingToJson(finding)["gpu"]["uuid"].is_null());
  EXPECT_EQ(j["evidence"].size(), 1u);
  EXPECT_EQ(j["actions"][0], "clean");
  finding.gpu.reset();
  EXPECT_TRUE(FindingToJson(finding)["gpu"].is_null());
  EXPECT_EQ(WorstSeverity({finding}), Severity::kCritical);
  EXPECT_EQ(WorstSeverity({}), Severity::kOk);
}

}  // namespace
}  // namespace gpudoctor
