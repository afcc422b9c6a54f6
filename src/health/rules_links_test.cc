// The NVLink fabric rule, and Xid findings that take what their log lines say.
#include <gtest/gtest.h>

#include <algorithm>

#include "health/catalog_event_grader.h"
#include "health/health_test_support.h"
#include "logs/log_parser.h"

namespace gpudoctor {
namespace {

using namespace testing_support;

Snapshot RegisteredBoard(uint32_t count) {
  Snapshot snapshot = HealthySnapshot(count);
  for (GpuSnapshot& gpu : snapshot.gpus) {
    gpu.fabric_state.SetValue("completed");
    gpu.fabric_status.SetValue("success");
    gpu.fabric_clique_id.SetValue(32766);
    gpu.fabric_health_mask.SetValue(0xaa);  // every health field "false"
  }
  return snapshot;
}

TEST(NvlinkFabric, ARegisteredHealthyBoardPasses) {
  Snapshot snapshot = RegisteredBoard(8);
  auto findings = WithId(Evaluate(&snapshot), "nvlink_fabric");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kOk);
  EXPECT_EQ(findings[0].summary, "All 8 GPUs registered with the NVLink fabric and healthy");
}

TEST(NvlinkFabric, NoNvSwitchNoJudgement) {
  Snapshot snapshot = HealthySnapshot(2);
  EXPECT_TRUE(WithId(Evaluate(&snapshot), "nvlink_fabric").empty());
}

TEST(NvlinkFabric, EachWayRegistrationGoesWrong) {
  Snapshot snapshot = RegisteredBoard(4);
  snapshot.gpus[0].fabric_state.SetValue("not_started");
  snapshot.gpus[1].fabric_state.SetValue("in_progress");
  snapshot.gpus[2].fabric_status.SetValue("the system is not ready (NVML_ERROR_NOT_READY)");
  snapshot.gpus[3].fabric_health_mask.SetValue(0xa9);  // bandwidth degraded only
  auto findings = WithId(Evaluate(&snapshot), "nvlink_fabric");
  ASSERT_EQ(findings.size(), 4u);
  EXPECT_EQ(findings[0].severity, Severity::kCritical);
  EXPECT_NE(findings[0].summary.find("never started"), std::string::npos);
  EXPECT_EQ(findings[1].severity, Severity::kWarning);
  EXPECT_EQ(findings[2].severity, Severity::kCritical);
  EXPECT_NE(findings[2].summary.find("failed: the system is not ready"), std::string::npos);
  EXPECT_EQ(findings[3].severity, Severity::kWarning);
  EXPECT_EQ(findings[3].summary, "GPU 3: NVLink bandwidth is degraded");
}

TEST(NvlinkFabric, UnhealthyRouteIsCritical) {
  Snapshot snapshot = RegisteredBoard(2);
  snapshot.gpus[1].fabric_health_mask.SetValue(0x99);
  auto findings = WithId(Evaluate(&snapshot), "nvlink_fabric");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kCritical);
  EXPECT_EQ(findings[0].summary, "GPU 1: a fabric route is unhealthy and NVLink bandwidth is degraded");
}

TEST(XidRecent, ANonfatalNvLink5LineIsAWarningWithItsDecodedAction) {
  Snapshot snapshot = HealthySnapshot(1);
  // testdata/kernel_logs/nvlink5_xid_decode.log
  std::vector<LogEvent> events = ParseText(
      "NVRM: Xid (PCI:" + snapshot.gpus[0].pci_bus_id.value().substr(0, 10) +
      "): 144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)\n");
  ASSERT_EQ(events.size(), 1u);
  CatalogEventGrader grader(LogCatalog::Builtin());
  HealthInput input;
  input.snapshot = &snapshot;
  input.log_events = &events;
  input.event_grader = &grader;
  input.now = kNow;
  auto findings = WithId(EvaluateRules(input, DefaultHealthConfig()), "xid_recent");  // no time: inside any window
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kWarning);  // the catalog alone says critical
  ASSERT_FALSE(findings[0].actions.empty());
  EXPECT_NE(findings[0].actions[0].find("No action needed for this error itself"), std::string::npos);
  EXPECT_NE(std::find(findings[0].evidence.begin(), findings[0].evidence.end(),
                      "resolution: IGNORE, then CONTACT_SUPPORT"),
            findings[0].evidence.end());
}

}  // namespace
}  // namespace gpudoctor
