// Escalation over a history played forward on a FakeClock: days in microseconds.
#include "health/correlate/escalate.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "health/catalog_event_grader.h"
#include "health/health_config.h"
#include "health/health_test_support.h"
#include "logs/catalog.h"

namespace gpudoctor {
namespace {

using namespace std::chrono_literals;
using testing_support::EvidenceHas;

GpuRef Gpu(uint32_t index) {
  return {.index = index, .uuid = fmt::format("GPU-{}", index), .pci_bus_id = fmt::format("0000:{:02x}:00.0", index)};
}

// What happened to a server, recorded as the clock moves on.
class History {
 public:
  FakeClock clock;

  void Xid(uint32_t gpu, uint32_t code) {
    input_.xids.push_back({Gpu(gpu), code, clock.Now(), fmt::format("NVRM: Xid (PCI:0000:{:02x}:00): {}", gpu, code)});
  }
  void Reboot() { input_.restarts.push_back({clock.Now(), std::nullopt, "reboot (boot id b-" + Stamp() + ")"}); }
  void ResetGpu(uint32_t gpu) { input_.restarts.push_back({clock.Now(), Gpu(gpu), "GPU reset recorded with an ack"}); }
  void Remediate(std::optional<uint32_t> gpu, std::string what = "acknowledged by alice") {
    input_.remediations.push_back({clock.Now(), gpu ? std::optional(Gpu(*gpu)) : std::nullopt, std::move(what)});
  }

  std::vector<Finding> Escalations(std::string_view toml = "") {
    auto config = ApplyHealthConfig(DefaultHealthConfig(), toml, "test");
    EXPECT_TRUE(config.ok());
    input_.event_grader = &grader_;
    input_.now = clock.Now();
    return Escalate(input_, config->escalation);
  }

 private:
  std::string Stamp() const { return std::to_string(ToUnixMillis(clock.Now())); }

  EscalationInput input_;
  CatalogEventGrader grader_{LogCatalog::Builtin()};
};

std::vector<Finding> WithId(const std::vector<Finding>& findings, std::string_view id) {
  return testing_support::WithId(findings, id);
}

// ---- xid_recurring: it came back after restarts ----------------------------------

TEST(XidRecurring, AFatalXidThatComesBackAfterTwoRebootsMeansHardwareInspection) {
  History history;
  history.Xid(3, 79);
  history.clock.Advance(1h);
  history.Reboot();
  history.clock.Advance(5h);
  history.Xid(3, 79);
  EXPECT_TRUE(WithId(history.Escalations(), "xid_recurring").empty()) << "one reboot is not yet enough";
  history.clock.Advance(1h);
  history.Reboot();
  history.clock.Advance(24h);
  history.Xid(3, 79);

  std::vector<Finding> recurring = WithId(history.Escalations(), "xid_recurring");
  ASSERT_EQ(recurring.size(), 1u);
  const Finding& finding = recurring.front();
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.gpu, Gpu(3));
  EXPECT_EQ(finding.subject, "79");
  EXPECT_EQ(finding.summary, "Xid 79 on GPU 3 came back after 2 restarts: inspect the hardware");
  EXPECT_EQ(finding.newest_event_at, history.clock.Now());
  // Each occurrence and each restart between them, in time order.
  EXPECT_EQ(std::count_if(finding.evidence.begin(), finding.evidence.end(),
                          [](const std::string& line) { return line.find(": Xid 79: NVRM") != std::string::npos; }),
            3);
  EXPECT_EQ(std::count_if(finding.evidence.begin(), finding.evidence.end(),
                          [](const std::string& line) { return line.find("restart: reboot") != std::string::npos; }),
            2);
  EXPECT_FALSE(finding.actions.empty());
}

TEST(XidRecurring, ALineRepeatedWithinAMinuteIsOneOccurrenceAndAResetCountsLikeAReboot) {
  History history;
  history.Xid(0, 48);
  history.clock.Advance(20s);
  history.Xid(0, 48);  // the same event, reported again
  history.clock.Advance(10min);
  history.ResetGpu(0);
  history.clock.Advance(1h);
  history.Xid(0, 48);
  history.clock.Advance(1h);
  history.ResetGpu(1);  // another GPU's reset does not count for GPU 0
  history.clock.Advance(1h);
  history.Xid(0, 48);
  EXPECT_TRUE(WithId(history.Escalations(), "xid_recurring").empty());
  EXPECT_EQ(WithId(history.Escalations("[escalation.xid.48]\nafter_restarts = 1\n"), "xid_recurring").size(), 1u);
}

TEST(XidRecurring, ApplicationXidsDoNotEscalateUnlessNamed) {
  History history;
  for (int day = 0; day < 3; ++day) {
    history.Xid(1, 43);
    history.clock.Advance(1h);
    history.Reboot();
    history.clock.Advance(1h);
  }
  history.Xid(1, 43);
  EXPECT_TRUE(WithId(history.Escalations(), "xid_recurring").empty());
  EXPECT_EQ(WithId(history.Escalations("[escalation.xid.43]\nafter_restarts = 2\n"), "xid_recurring").size(), 1u);
}

TEST(XidRecurring, OccurrencesOlderThanTheLookbackAreForgotten) {
  History history;
  history.Xid(2, 79);
  history.clock.Advance(1h);
  history.Reboot();
  history.clock.Advance(1h);
  history.Xid(2, 79);
  history.clock.Advance(1h);
  history.Reboot();
  history.clock.Advance(8 * 24h);
  history.Xid(2, 79);
  EXPECT_TRUE(WithId(history.Escalations(), "xid_recurring").empty());
}

// ---- xid_fatal_repeated: a fatal Xid again and again -------------------------------

TEST(XidFatalRepeated, AFatalXidFiveTimesInADayMeansContactSupport) {
  History history;
  for (int i = 0; i < 4; ++i) {
    history.Xid(5, 48);
    history.clock.Advance(2h);
  }
  EXPECT_TRUE(WithId(history.Escalations(), "xid_fatal_repeated").empty());
  history.Xid(5, 48);
  std::vector<Finding> repeated = WithId(history.Escalations(), "xid_fatal_repeated");
  ASSERT_EQ(repeated.size(), 1u);
  EXPECT_EQ(repeated.front().severity, Severity::kCritical);
  EXPECT_EQ(repeated.front().summary, "Xid 48 on GPU 5 5 times in the last 24h: contact support");
  EXPECT_TRUE(EvidenceHas(repeated.front(), "5 occurrences of Xid 48 in the last 24h; escalates at 5"));
  // A day later the first ones have left the window.
  history.clock.Advance(20h);
  EXPECT_TRUE(WithId(history.Escalations(), "xid_fatal_repeated").empty());
}

TEST(XidFatalRepeated, ANonFatalXidDoesNotCount) {
  History history;
  for (int i = 0; i < 6; ++i) {
    history.Xid(5, 43);
    history.clock.Advance(1h);
  }
  EXPECT_TRUE(WithId(history.Escalations(), "xid_fatal_repeated").empty());
}

// ---- xid_diagnostics_due: repeated Xid 13 or 31 on one GPU ----------------------

TEST(XidDiagnosticsDue, RepeatedXid13OnOneGpuMeansRunTheDiagnostics) {
  History history;
  for (int i = 0; i < 3; ++i) {
    history.Xid(4, 13);
    history.clock.Advance(10s);
    history.Xid(4, 13);  // one crash prints several lines
    history.clock.Advance(3h);
  }
  std::vector<Finding> due = WithId(history.Escalations(), "xid_diagnostics_due");
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due.front().severity, Severity::kWarning);
  EXPECT_EQ(due.front().summary, "Xid 13 on GPU 4 3 times in the last 24h: run the GPU diagnostics");
  EXPECT_TRUE(EvidenceHas(due.front(), "(+1 more)"));
  ASSERT_FALSE(due.front().actions.empty());
  EXPECT_NE(due.front().actions.front().find("gpudoctor diag memtest --gpu 4 "), std::string::npos)
      << due.front().actions.front();
  EXPECT_NE(due.front().actions.front().find("gpudoctor diag burn --gpu 4 "), std::string::npos)
      << due.front().actions.front();
}

TEST(XidDiagnosticsDue, Xid31OnDifferentGpusIsNotRepeatedOnOne) {
  History history;
  for (uint32_t gpu = 0; gpu < 3; ++gpu) {
    history.Xid(gpu, 31);
    history.clock.Advance(1h);
  }
  EXPECT_TRUE(WithId(history.Escalations(), "xid_diagnostics_due").empty());
}

// ---- remediation_repeated ---------------------------------------------------------

TEST(RemediationRepeated, FiveRemediationsOfOneGpuInAWeekMeanContactSupport) {
  History history;
  for (int i = 0; i < 5; ++i) {
    history.Remediate(6, fmt::format("acknowledged incident {} by alice", i));
    history.clock.Advance(30h);
  }
  history.Remediate(7);
  std::vector<Finding> repeated = WithId(history.Escalations(), "remediation_repeated");
  ASSERT_EQ(repeated.size(), 1u);
  EXPECT_EQ(repeated.front().gpu, Gpu(6));
  EXPECT_EQ(repeated.front().summary, "GPU 6 needed 5 remediations in the last 7d: contact support");
  EXPECT_TRUE(EvidenceHas(repeated.front(), "acknowledged incident 0 by alice"));
  EXPECT_TRUE(EvidenceHas(repeated.front(), "acknowledged incident 4 by alice"));
  // The oldest leaves the week.
  history.clock.Advance(48h);
  EXPECT_TRUE(WithId(history.Escalations(), "remediation_repeated").empty());
}

TEST(RemediationRepeated, TheHostCountsOnItsOwn) {
  History history;
  for (int i = 0; i < 5; ++i) {
    history.Remediate(std::nullopt, "reboot while incident 3 (psu_fault) was critical");
    history.clock.Advance(1h);
  }
  std::vector<Finding> repeated = WithId(history.Escalations(), "remediation_repeated");
  ASSERT_EQ(repeated.size(), 1u);
  EXPECT_FALSE(repeated.front().gpu.has_value());
  EXPECT_EQ(repeated.front().summary, "The host needed 5 remediations in the last 7d: contact support");
}

TEST(Escalation, TurnedOffSaysNothing) {
  History history;
  for (int i = 0; i < 6; ++i) history.Xid(5, 48);
  for (int i = 0; i < 6; ++i) {
    history.Xid(5, 48);
    history.clock.Advance(2h);
  }
  EXPECT_FALSE(history.Escalations().empty());
  EXPECT_TRUE(history.Escalations("[escalation]\nenabled = false\n").empty());
}

// ---- the inputs -------------------------------------------------------------------

TEST(EscalationInputs, LogLinesAndNvmlEventsNameTheSnapshotsGpu) {
  Snapshot snapshot = testing_support::HealthySnapshot(2);
  const WallTime at = testing_support::kNow;
  std::vector<LogEvent> log = {
      testing_support::XidLogEvent(79, snapshot.gpus[1].pci_bus_id.value(), EventSeverity::kCritical, at)};
  LogEvent loaded;
  loaded.kind = "driver_loaded";
  loaded.time = at + 1h;
  loaded.fields = {{"driver_version", "550.54.15"}};
  log.push_back(loaded);
  std::vector<XidEvent> nvml = {{1, 79, at + 2s}};

  std::vector<XidRecord> records = XidRecordsFrom(snapshot, log, nvml);
  ASSERT_EQ(records.size(), 2u);
  for (const XidRecord& record : records) EXPECT_EQ(record.gpu.uuid, snapshot.gpus[1].uuid.value());
  EXPECT_EQ(records[1].line, "NVML event: Xid 79 on GPU 1");
  std::vector<RestartRecord> restarts = DriverLoads(log);
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_EQ(restarts[0].what, "NVIDIA driver 550.54.15 loaded");
  EXPECT_FALSE(restarts[0].gpu.has_value());
}

}  // namespace
}  // namespace gpudoctor
