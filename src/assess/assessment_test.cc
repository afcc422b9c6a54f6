#include "assess/assessment.h"

#include <gtest/gtest.h>

#include "assess/assessment_json.h"
#include "assess/identity.h"
#include "health/catalog_event_grader.h"
#include "health/health_test_support.h"
#include "logs/catalog.h"

namespace gpudoctor {
namespace {

using testing_support::HealthySnapshot;
using testing_support::kNow;
using testing_support::XidLogEvent;

const GpuVerdict& VerdictOf(const Assessment& assessment, uint32_t index) {
  const GpuVerdict* gpu = assessment.Gpu(index);
  EXPECT_NE(gpu, nullptr) << "GPU " << index;
  static const GpuVerdict kNone;
  return gpu ? *gpu : kNone;
}

std::vector<std::string> IdsOf(const Assessment& assessment, const GpuVerdict& gpu) {
  std::vector<std::string> ids;
  for (size_t index : gpu.findings)
    if (assessment.findings[index].severity != Severity::kOk) ids.push_back(assessment.findings[index].id);
  return ids;
}

Assessment AssessWith(const AssessInputs& inputs) {
  static const CatalogEventGrader grader(LogCatalog::Builtin());
  return Assess(inputs, DefaultHealthConfig(), grader);
}

TEST(Assess, AHealthyServerIsWellOnEveryGpu) {
  const Snapshot snapshot = HealthySnapshot(4);
  Assessment assessment = AssessWith({.snapshot = &snapshot, .now = kNow});
  EXPECT_EQ(assessment.worst, Severity::kOk);
  EXPECT_EQ(assessment.ExitStatus(), 0);
  ASSERT_EQ(assessment.gpus.size(), 4u);
  for (const GpuVerdict& gpu : assessment.gpus) {
    EXPECT_EQ(gpu.health, Severity::kOk);
    EXPECT_FALSE(gpu.identity.uuid.empty());
    EXPECT_FALSE(gpu.identity_from_memory);
  }
  EXPECT_FALSE(assessment.checklist.items.empty());
}

// A GPU that fell off the bus answers nothing, yet it is one card: named by
// what it was last seen as, and its Xid 79 is part of the same incident.
TEST(Assess, ALostGpuKeepsItsIdentityAndItsXidIsPartOfTheLoss) {
  Snapshot snapshot = HealthySnapshot(4);
  GpuSnapshot& lost = snapshot.gpus[3];
  const std::string uuid = lost.uuid.value(), bus = lost.pci_bus_id.value(), serial = lost.serial.value();
  lost.MarkUnreadable(AccessError::kGpuLost, "GPU is lost");
  lost.last_known = KnownGpuIdentity{.uuid = uuid, .serial = serial, .pci_bus_id = bus, .name = "NVIDIA H100",
                                     .source = "the agent's history"};
  const std::vector<LogEvent> events = {XidLogEvent(79, bus, EventSeverity::kCritical, kNow)};
  Assessment assessment = AssessWith({.snapshot = &snapshot, .log_events = &events, .now = kNow});
  const GpuVerdict& gpu = VerdictOf(assessment, 3);
  EXPECT_EQ(gpu.health, Severity::kCritical);
  EXPECT_TRUE(gpu.identity_from_memory);
  EXPECT_EQ(gpu.identity.uuid, uuid);
  EXPECT_EQ(gpu.identity.serial, serial);
  EXPECT_EQ(gpu.identity.pci_bus_id, bus);
  EXPECT_EQ(gpu.identity_source, "the agent's history");
  const std::vector<std::string> ids = IdsOf(assessment, gpu);
  EXPECT_NE(std::find(ids.begin(), ids.end(), "gpu_lost"), ids.end()) << ::testing::PrintToString(ids);
  EXPECT_NE(std::find(ids.begin(), ids.end(), "xid_recent"), ids.end()) << ::testing::PrintToString(ids);
  // One incident: the Xid is told under the loss, which names the card.
  const Finding* gpu_lost = nullptr;
  for (const Finding& finding : assessment.findings)
    if (finding.id == "gpu_lost") gpu_lost = &finding;
  ASSERT_NE(gpu_lost, nullptr);
  EXPECT_EQ(gpu_lost->gpu->uuid, uuid);
  EXPECT_EQ(gpu_lost->gpu->serial, serial);
  for (const Finding& finding : assessment.findings) {
    if (finding.id != "xid_recent") continue;
    EXPECT_EQ(finding.part_of, FindingKey(*gpu_lost)) << finding.summary;
    EXPECT_NE(finding.summary.find("GPU 3"), std::string::npos) << "the Xid names the GPU, not only its address: "
                                                                << finding.summary;
  }
  for (const GpuVerdict& other : assessment.gpus) {
    if (other.index == 3) continue;
    EXPECT_EQ(other.health, Severity::kOk) << "GPU " << other.index;
  }
}

// Every output labels how a GPU's identity is known; a GPU that never
// answered and that nothing recalls is "unknown", never "read".
TEST(Assess, TheJsonSaysHowEachIdentityIsKnown) {
  Snapshot snapshot = HealthySnapshot(3);
  const std::string uuid = snapshot.gpus[1].uuid.value(), bus = snapshot.gpus[1].pci_bus_id.value();
  snapshot.gpus[1].MarkUnreadable(AccessError::kGpuLost, "GPU is lost");
  snapshot.gpus[1].last_known = KnownGpuIdentity{.uuid = uuid, .pci_bus_id = bus, .source = "the kernel log"};
  snapshot.gpus[2].MarkUnreadable(AccessError::kGpuLost, "GPU is lost");
  const Assessment assessment = AssessWith({.snapshot = &snapshot, .now = kNow});
  const nlohmann::json gpus = GpuVerdictsToJson(assessment, nullptr);
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus[0]["identity"], "read");
  EXPECT_EQ(gpus[1]["identity"], "last_known");
  EXPECT_EQ(gpus[1]["identity_source"], "the kernel log");
  EXPECT_EQ(gpus[2]["identity"], "unknown");
  EXPECT_TRUE(gpus[2]["uuid"].is_null());
  EXPECT_STREQ(IdentityKnowledgeName(IdentityKnowledgeOf(snapshot.gpus[0])), "read");
  EXPECT_STREQ(IdentityKnowledgeName(IdentityKnowledgeOf(snapshot.gpus[1])), "last_known");
  EXPECT_STREQ(IdentityKnowledgeName(IdentityKnowledgeOf(snapshot.gpus[2])), "unknown");
}

TEST(Assess, ProblemsComeWorstFirstAndRootsBeforeWhatTheyTell) {
  Snapshot snapshot = HealthySnapshot(2);
  snapshot.gpus[0].temperature_c = Field<uint32_t>::Value(77);  // warning
  snapshot.gpus[1].MarkUnreadable(AccessError::kGpuLost, "GPU is lost");  // critical
  Assessment assessment = AssessWith({.snapshot = &snapshot, .now = kNow});
  std::vector<const Finding*> problems = assessment.Problems();
  ASSERT_GE(problems.size(), 2u);
  EXPECT_EQ(problems.front()->severity, Severity::kCritical);
  EXPECT_EQ(problems.back()->severity, Severity::kWarning);
  EXPECT_EQ(assessment.worst, Severity::kCritical);
  EXPECT_EQ(VerdictOf(assessment, 0).health, Severity::kWarning);
}

// What the agent watched over time is judged with the rest.
TEST(Assess, WhatWasWatchedOverTimeJoins) {
  const Snapshot snapshot = HealthySnapshot(2);
  Finding leak{.id = "memory_leak", .severity = Severity::kWarning, .gpu = GpuRef{.index = 1}, .summary = "leak"};
  Assessment assessment = AssessWith({.snapshot = &snapshot, .watched = {leak}, .now = kNow});
  EXPECT_EQ(assessment.worst, Severity::kWarning);
  EXPECT_EQ(IdsOf(assessment, VerdictOf(assessment, 1)), std::vector<std::string>{"memory_leak"});
}

}  // namespace
}  // namespace gpudoctor
