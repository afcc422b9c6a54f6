// The upkeep schedule (maintenance_due), and the GPU count the agent learns.
#include <gtest/gtest.h>

#include "health/health_test_support.h"

namespace gpudoctor {
namespace {

using namespace testing_support;
using std::chrono::days;

std::vector<Finding> EvaluateWith(const HostHistory* history, const HostSignals* host,
                                  const Snapshot* snapshot = nullptr) {
  HealthInput input;
  input.snapshot = snapshot;
  input.host = host;
  input.host_history = history;
  input.now = kNow;
  return EvaluateRules(input, DefaultHealthConfig());
}

HostHistory Maintained(std::vector<MaintenanceDone> records) { return HostHistory{.maintenance = std::move(records)}; }

TEST(MaintenanceSchedule, TheDefaultsAreTheOperatorsGuides) {
  const std::vector<MaintenanceTask>& schedule = DefaultHealthConfig().maintenance;
  ASSERT_EQ(schedule.size(), 3u);
  EXPECT_EQ(FindMaintenanceTask(schedule, "dust_cleaning")->every, days(30));
  EXPECT_EQ(FindMaintenanceTask(schedule, "power_and_cabling")->every, days(90));
  EXPECT_EQ(FindMaintenanceTask(schedule, "driver_and_firmware")->every, days(180));
  EXPECT_EQ(FindMaintenanceTask(schedule, "defrag"), nullptr);
}

TEST(MaintenanceSchedule, AConfigFileMovesATaskAndAddsOne) {
  auto config = ApplyHealthConfig(DefaultHealthConfig(), R"(
    [maintenance.dust_cleaning]
    every = "14d"
    [maintenance.bmc_firmware]
    every = "365d"
    title = "Update the BMC firmware"
  )", "test");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(FindMaintenanceTask(config->maintenance, "dust_cleaning")->every, days(14));
  const MaintenanceTask* added = FindMaintenanceTask(config->maintenance, "bmc_firmware");
  ASSERT_NE(added, nullptr);
  EXPECT_EQ(added->title, "Update the BMC firmware");
}

TEST(MaintenanceSchedule, ANewTaskNeedsATitle) {
  EXPECT_FALSE(ApplyHealthConfig(DefaultHealthConfig(), "[maintenance.bmc]\nevery = \"365d\"\n", "test").ok());
}

TEST(MaintenanceStatus, TheLaterOfRecordAndDriverBuildCounts) {
  const MaintenanceTask& driver = *FindMaintenanceTask(DefaultHealthConfig().maintenance, "driver_and_firmware");
  const std::vector<MaintenanceDone> records{{"driver_and_firmware", kNow - days(20), ""}};
  MaintenanceStatus status = StatusOf(driver, records, kNow - days(200));
  EXPECT_EQ(status.last_done(), kNow - days(20));  // reviewed since the build
  EXPECT_FALSE(status.OverdueAt(kNow));
  status = StatusOf(driver, {}, kNow - days(200));
  EXPECT_EQ(status.last_done(), kNow - days(200));
  EXPECT_TRUE(status.OverdueAt(kNow));
  // Only the driver task takes the build date.
  const MaintenanceTask& dust = *FindMaintenanceTask(DefaultHealthConfig().maintenance, "dust_cleaning");
  EXPECT_FALSE(StatusOf(dust, {}, kNow - days(1)).last_done());
}

TEST(MaintenanceDue, EachOverdueTaskIsItsOwnWarning) {
  HostHistory history = Maintained({{"dust_cleaning", kNow - days(45), "filters"},
                                    {"dust_cleaning", kNow - days(75), ""},
                                    {"power_and_cabling", kNow - days(10), ""}});
  HostSignals host = HealthyHost(2);
  host.nvidia_driver_built_at = Field<WallTime>::Value(kNow - days(200));
  std::vector<Finding> findings = WithId(EvaluateWith(&history, &host), "maintenance_due");
  ASSERT_EQ(findings.size(), 2u);  // in the schedule's order, by name
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  EXPECT_EQ(findings[0].subject, "driver_and_firmware");
  EXPECT_NE(findings[0].summary.find("driver built 200 days ago, due every 180 days"), std::string::npos)
      << findings[0].summary;
  EXPECT_NE(std::find(findings[0].evidence.begin(), findings[0].evidence.end(),
                      "the loaded driver was built 2023-04-28 (200 days ago)"),
            findings[0].evidence.end());
  EXPECT_EQ(findings[1].severity, Severity::kWarning);
  EXPECT_EQ(findings[1].subject, "dust_cleaning");
  EXPECT_EQ(findings[1].summary,
            "Clean dust from the air filters, fans and heatsinks overdue: last done 45 days ago, due every 30 days");
}

TEST(MaintenanceDue, ADriverOlderThanTheScheduleIsFoundWithoutAnyRecord) {
  HostHistory history = Maintained({});
  HostSignals host = HealthyHost(2);
  host.nvidia_driver_built_at = Field<WallTime>::Value(kNow - days(365));
  std::vector<Finding> findings = WithId(EvaluateWith(&history, &host), "maintenance_due");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].subject, "driver_and_firmware");
}

TEST(MaintenanceDue, NothingOverdueSaysWhatWasNeverRecorded) {
  HostHistory history = Maintained({{"dust_cleaning", kNow - days(3), ""}});
  HostSignals host = HealthyHost(2);
  host.nvidia_driver_built_at = Field<WallTime>::Value(kNow - days(60));
  std::vector<Finding> findings = WithId(EvaluateWith(&history, &host), "maintenance_due");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kOk);
  EXPECT_EQ(findings[0].summary, "No maintenance overdue; never recorded: power_and_cabling");
}

TEST(MaintenanceDue, NotJudgedWithoutTheHistoryNorByTheAgent) {
  HostSignals host = HealthyHost(2);
  host.nvidia_driver_built_at = Field<WallTime>::Value(kNow - days(365));
  EXPECT_TRUE(WithId(EvaluateWith(nullptr, &host), "maintenance_due").empty());
  HostHistory agent{.learned_gpu_count = 8};  // the agent's: maintenance not judged
  EXPECT_TRUE(WithId(EvaluateWith(&agent, &host), "maintenance_due").empty());
  // Nothing recorded and no build date: unchecked, not "up to date".
  HostHistory empty = Maintained({});
  HealthInput input{.host_history = &empty, .now = kNow};
  std::vector<UncheckedRule> unchecked;
  EXPECT_TRUE(WithId(EvaluateRules(input, DefaultHealthConfig(), unchecked), "maintenance_due").empty());
  ASSERT_FALSE(unchecked.empty());
  EXPECT_EQ(unchecked.back().rule_id, "maintenance_due");
}

TEST(GpuCountMismatch, TheLearnedCountIsExpectedWhenNoneIsConfigured) {
  Snapshot snapshot = HealthySnapshot(7);
  HostSignals host = HealthyHost(7);
  HostHistory history{.learned_gpu_count = 8, .gpu_count_learned_at = kNow - days(90)};
  Finding finding = WithId(EvaluateWith(&history, &host, &snapshot), "gpu_count_mismatch").at(0);
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.summary, "NVML sees 7 GPUs, 8 expected");
  EXPECT_EQ(finding.evidence.at(0), "expected: 8 (learned by the agent from its first healthy sample, 2023-08-16)");
  EXPECT_EQ(finding.evidence.at(2), "PCI bus: 7");
}

TEST(GpuCountMismatch, AGpuGoneFromTheBusIsFoundByTheLearnedCount) {
  Snapshot snapshot = HealthySnapshot(8);
  HostSignals host = HealthyHost(7);
  HostHistory history{.learned_gpu_count = 8};
  Finding finding = WithId(EvaluateWith(&history, &host, &snapshot), "gpu_count_mismatch").at(0);
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.summary, "7 GPUs on the PCI bus, 8 expected");
}

TEST(GpuCountMismatch, NoExpectedCountIsUnchecked) {
  Snapshot snapshot = HealthySnapshot(2);
  HealthInput input{.snapshot = &snapshot, .now = kNow};
  std::vector<UncheckedRule> unchecked;
  EXPECT_TRUE(WithId(EvaluateRules(input, DefaultHealthConfig(), unchecked), "gpu_count_mismatch").empty());
  EXPECT_TRUE(std::any_of(unchecked.begin(), unchecked.end(),
                          [](const UncheckedRule& rule) { return rule.rule_id == "gpu_count_mismatch"; }));
}

TEST(HealthyGpuCount, OnlyAWholeHealthySampleIsLearned) {
  Snapshot snapshot = HealthySnapshot(8);
  HostSignals host = HealthyHost(8);
  EXPECT_EQ(HealthyGpuCount(snapshot, host), 8u);
  EXPECT_EQ(HealthyGpuCount(snapshot, HostSignals{}), 8u);  // no PCI bus to read (a container)

  EXPECT_FALSE(HealthyGpuCount(snapshot, HealthyHost(9)));  // one on the bus NVML does not see
  Snapshot lost = snapshot;
  lost.gpus[3].access_error = AccessError::kGpuLost;
  EXPECT_FALSE(HealthyGpuCount(lost, host));
  Snapshot down = snapshot;
  down.driver_error = AccessError::kDriverNotLoaded;
  EXPECT_FALSE(HealthyGpuCount(down, host));
  Snapshot simulated = snapshot;
  simulated.source = "simulate:examples/hgx-fabric-fault.toml";
  EXPECT_FALSE(HealthyGpuCount(simulated, host));
}

}  // namespace
}  // namespace gpudoctor
