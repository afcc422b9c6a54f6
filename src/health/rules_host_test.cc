// Rules judged from host signals and log events.
#include <gtest/gtest.h>

#include "common/clock.h"
#include "health/health_test_support.h"

namespace gpudoctor {
namespace {

using namespace testing_support;
using std::chrono::hours;
using std::chrono::minutes;

// Grades Xids and kinds the way a catalog would, for tests.
class TableGrader final : public EventGrader {
 public:
  std::optional<EventGrade> GradeXid(uint32_t code) const override {
    if (code == 79)
      return EventGrade{
          Severity::kCritical, "GPU has fallen off the bus", {"hardware", "PCIe"}, "", "Reboot, then reseat the GPU."};
    if (code == 13) return EventGrade{Severity::kOk, "Graphics engine exception", {"application"}, "", ""};
    return std::nullopt;
  }
  std::optional<EventGrade> GradeKind(std::string_view kind) const override {
    if (kind == "pcie_aer")
      return EventGrade{
          Severity::kWarning, "PCIe AER error", {"PCIe"}, "The PCIe link reported errors.", "Reseat the card."};
    return std::nullopt;
  }
};

// Logs, host signals and a clock for time-dependent rules.
class LogRulesTest : public ::testing::Test {
 protected:
  std::vector<Finding> Run(const EventGrader* grader = nullptr) {
    HealthInput input;
    input.snapshot = &snapshot;
    input.log_events = &events;
    input.nvml_xid_events = nvml_window;
    input.event_grader = grader;
    input.now = clock.Now();
    return EvaluateRules(input, DefaultHealthConfig());
  }
  FakeClock clock{kNow};
  Snapshot snapshot = HealthySnapshot();
  std::vector<LogEvent> events;
  const std::vector<XidEvent>* nvml_window = nullptr;
};

TEST_F(LogRulesTest, RecentXidIsGradedByTheEvent) {
  events.push_back(XidLogEvent(79, "0000:43:00.0", EventSeverity::kCritical, kNow - minutes(5)));
  events.push_back(XidLogEvent(79, "0000:43:00.0", EventSeverity::kCritical, kNow - minutes(3)));
  Finding finding = Single(Run(), "xid_recent");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  ASSERT_TRUE(finding.gpu.has_value());
  EXPECT_EQ(finding.gpu->index, 1u);
  EXPECT_EQ(finding.summary, "Xid 79 on GPU 1 (2 times)");
  EXPECT_TRUE(EvidenceHas(finding, "kern.log:179: NVRM: Xid (PCI:0000:43:00.0): 79"));
  EXPECT_TRUE(EvidenceHas(finding, "first at 2023-11-14T22:08:20.000Z"));
}

TEST_F(LogRulesTest, CatalogGradeNamesTheXidAndLeadsTheActions) {
  events.push_back(XidLogEvent(79, "0000:1b:00.0", EventSeverity::kWarning, kNow - minutes(5)));
  events.push_back(XidLogEvent(13, "0000:1b:00.0", EventSeverity::kWarning, kNow - minutes(5)));
  TableGrader grader;
  std::vector<Finding> findings = WithId(Run(&grader), "xid_recent");
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].summary, "Xid 13 on GPU 0: Graphics engine exception");
  EXPECT_EQ(findings[0].severity, Severity::kOk);  // an application fault, not a server problem
  EXPECT_EQ(findings[1].severity, Severity::kCritical);
  EXPECT_EQ(findings[1].actions.front(), "Reboot, then reseat the GPU.");
  EXPECT_NE(findings[1].cause.find("Likely causes: hardware and PCIe."), std::string::npos);
}

TEST_F(LogRulesTest, OldXidsAreOutsideTheWindow) {
  events.push_back(XidLogEvent(79, "0000:43:00.0", EventSeverity::kCritical, kNow - hours(30)));
  Finding finding = Single(Run(), "xid_recent");
  EXPECT_EQ(finding.severity, Severity::kOk);
  EXPECT_EQ(finding.summary, "No Xid errors in the last 24h");
  clock.Set(kNow - hours(20));  // the same log read the day before
  EXPECT_EQ(Single(Run(), "xid_recent").severity, Severity::kCritical);
}

TEST_F(LogRulesTest, XidWithoutTimeAlwaysCounts) {
  events.push_back(XidLogEvent(48, "", EventSeverity::kCritical, std::nullopt));
  Finding finding = Single(Run(), "xid_recent");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_FALSE(finding.gpu.has_value());
}

TEST_F(LogRulesTest, NvmlXidEventsCount) {
  snapshot.xid_events.push_back({0, 94, kNow - minutes(1)});
  Finding finding = Single(Run(), "xid_recent");
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_EQ(finding.gpu->index, 0u);
  EXPECT_TRUE(EvidenceHas(finding, "NVML event: Xid 94 on GPU 0"));
}

TEST_F(LogRulesTest, NvmlXidEventsKeptOverTheWindowCountInsteadOfTheSnapshotsOwn) {
  // The agent keeps what earlier samples delivered; this sample delivered none.
  const std::vector<XidEvent> window = {{2, 48, kNow - hours(20)}, {2, 48, kNow - minutes(1)}, {3, 13, kNow - hours(30)}};
  nvml_window = &window;
  Finding finding = Single(Run(), "xid_recent");
  EXPECT_EQ(finding.gpu->index, 2u);
  EXPECT_NE(finding.summary.find("2 times"), std::string::npos) << finding.summary;  // the 30 h old one is out
}

TEST_F(LogRulesTest, OtherHardwareErrorsInTheLog) {
  LogEvent aer;
  aer.kind = "pcie_aer";
  aer.severity = EventSeverity::kWarning;
  aer.pci_bus_id = "0000:1b:00.0";
  aer.raw = "pcieport 0000:17:01.0: AER: Corrected error received: 0000:1b:00.0";
  aer.time = kNow - minutes(10);
  events.push_back(aer);
  LogEvent info = aer;
  info.kind = "nvrm_info";
  info.severity = EventSeverity::kInfo;
  events.push_back(info);
  TableGrader grader;
  Finding finding = Single(Run(&grader), "log_errors");
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_EQ(finding.summary, "PCIe AER error on GPU 0");
  EXPECT_EQ(finding.cause, "The PCIe link reported errors.");
  EXPECT_EQ(finding.actions.front(), "Reseat the card.");
}

TEST_F(LogRulesTest, KindsFromAnXidLineAreNotReportedTwice) {
  LogEvent xid = XidLogEvent(79, "0000:1b:00.0", EventSeverity::kCritical, kNow);
  LogEvent off_bus = xid;
  off_bus.kind = "gpu_off_bus";
  off_bus.xid.reset();
  events = {xid, off_bus};
  std::vector<Finding> findings = Run();
  EXPECT_EQ(Single(findings, "xid_recent").severity, Severity::kCritical);
  EXPECT_EQ(Single(findings, "log_errors").severity, Severity::kOk);
}

TEST(DiskSpace, GradesFreeSpaceAndInodes) {
  HostSignals host = HealthyHost();
  host.disks = {{"/data", Field<FileSystemSpace>::Value({1000, 50, 0, 0})},
                {"/scratch", Field<FileSystemSpace>::Value({1000, 10, 0, 0})},
                {"/home", Field<FileSystemSpace>::Value({1000, 900, 1000, 20})},
                {"/missing", Field<FileSystemSpace>::Failed("cannot statvfs /missing: No such file or directory")}};
  std::vector<Finding> findings = WithId(Evaluate(nullptr, &host), "disk_space");
  ASSERT_EQ(findings.size(), 4u);
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  EXPECT_EQ(findings[0].summary, "/data has only 5% of its space free");
  EXPECT_EQ(findings[1].severity, Severity::kCritical);
  EXPECT_EQ(findings[2].severity, Severity::kCritical);
  EXPECT_EQ(findings[2].summary, "/home has only 2% of its inodes free");
  EXPECT_EQ(findings[3].severity, Severity::kWarning);
  EXPECT_EQ(findings[3].summary, "Cannot check free space on /missing");
}

TEST(ProcessMissing, NotRunningIsCritical) {
  HostSignals host = HealthyHost();
  host.processes.push_back({"nvidia-fabricmanager", Field<std::vector<uint32_t>>::Value({})});
  Finding finding = Single(Evaluate(nullptr, &host), "process_missing");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.summary, "nvidia-fabricmanager is not running");

  Result<HealthConfig> config =
      ApplyHealthConfig(DefaultHealthConfig(), "[rules.process_missing]\nseverity = \"warning\"\n", "test");
  ASSERT_TRUE(config.ok());
  HealthInput input;
  input.host = &host;
  input.now = kNow;
  EXPECT_EQ(Single(EvaluateRules(input, *config), "process_missing").severity, Severity::kWarning);
}

TEST(BackupStale, OldNewestFileIsAWarning) {
  FakeClock clock{kNow};
  HostSignals host = HealthyHost();  // newest checkpoint written 2h before kNow
  HealthInput input;
  input.host = &host;
  input.now = clock.Now();
  EXPECT_EQ(Single(EvaluateRules(input, DefaultHealthConfig()), "backup_stale").severity, Severity::kOk);

  clock.Advance(hours(23));
  input.now = clock.Now();
  Finding finding = Single(EvaluateRules(input, DefaultHealthConfig()), "backup_stale");
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_EQ(finding.summary, "No new file in /checkpoints for 25h");
  EXPECT_TRUE(EvidenceHas(finding, "/checkpoints/step_900.pt"));
}

TEST(BackupStale, EmptyOrUnreadableDirectory) {
  HostSignals host = HealthyHost();
  host.backups = {{"/empty", Field<BackupScan>::Value({})},
                  {"/gone", Field<BackupScan>::Failed("cannot stat /gone: No such file or directory")}};
  std::vector<Finding> findings = WithId(Evaluate(nullptr, &host), "backup_stale");
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].summary, "Backup directory /empty is empty");
  EXPECT_EQ(findings[1].severity, Severity::kWarning);
}

TEST(HostMemory, LowAvailableRamIsAWarning) {
  HostSignals host = HealthyHost();
  host.memory = Field<MemoryInfo>::Value({100ull << 30, 2ull << 30, 0, 0});
  Finding finding = Single(Evaluate(nullptr, &host), "host_memory");
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_EQ(finding.summary, "Only 2% of RAM available");
}

TEST(HostPressure, MemoryStallsAreAWarning) {
  HostSignals host = HealthyHost();
  host.memory_pressure = Field<Pressure>::Value({{40, 35, 20, 1}, PressureAverages{30, 25.25, 12, 1}});
  Finding finding = Single(Evaluate(nullptr, &host), "host_pressure");
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_EQ(finding.summary, "Host stalled on memory");
  EXPECT_TRUE(EvidenceHas(finding, "load average: 3.5 3.2 3 on 64 CPUs"));
}

TEST(HealthyHost, OkSummariesCountWhatWasChecked) {
  HostSignals host = HealthyHost();
  host.processes.push_back({"cmdline:train.py", Field<std::vector<uint32_t>>::Value({950, 951})});
  std::vector<Finding> findings = Evaluate(nullptr, &host);
  EXPECT_EQ(Single(findings, "disk_space").summary, "Enough free space on 1 file system");
  Finding processes = Single(findings, "process_missing");
  EXPECT_EQ(processes.summary, "All 2 key processes running");
  EXPECT_TRUE(EvidenceHas(processes, "cmdline:train.py: pid 950 and 951"));
  EXPECT_EQ(Single(findings, "backup_stale").summary, "Backups recent (newest file younger than 24h)");
  EXPECT_EQ(Single(findings, "psu_fault").summary, "No power supply fault (1 sensor)");
}

TEST(HostSignalsMissing, RulesWithNothingToJudgeStaySilent) {
  HostSignals nothing;  // every signal not available
  std::vector<Finding> findings = Evaluate(nullptr, &nothing);
  EXPECT_TRUE(findings.empty()) << findings.front().id;
}

}  // namespace
}  // namespace gpudoctor
