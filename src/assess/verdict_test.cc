#include "assess/verdict.h"

#include <gtest/gtest.h>

#include "health/catalog_event_grader.h"
#include "health/health_test_support.h"
#include "logs/catalog.h"

namespace gpudoctor {
namespace {

using testing_support::HealthySnapshot;
using testing_support::kNow;

struct Judged {
  Assessment assessment;
  TriageVerdict verdict;
};

Judged Judge(const Snapshot& snapshot) {
  static const CatalogEventGrader grader(LogCatalog::Builtin());
  static const HealthConfig config = DefaultHealthConfig();
  const AssessInputs inputs{.snapshot = &snapshot, .now = kNow};
  Judged judged{Assess(inputs, config, grader), {}};
  judged.verdict = Diagnose({.assessment = &judged.assessment, .inputs = &inputs, .config = &config, .grader = &grader});
  return judged;
}

bool IsRuledOut(const TriageVerdict& verdict, Cause cause) {
  return std::any_of(verdict.ruled_out.begin(), verdict.ruled_out.end(),
                     [&](const RuledOut& r) { return r.cause == cause; });
}

TEST(Diagnose, AHealthyServerHasNoCauseAndEveryGpuCauseRuledOut) {
  Judged judged = Judge(HealthySnapshot(4));
  EXPECT_FALSE(judged.verdict.cause.has_value());
  for (Cause cause : {Cause::kThermal, Cause::kPower, Cause::kPcie, Cause::kMemory})
    EXPECT_TRUE(IsRuledOut(judged.verdict, cause)) << CauseName(cause);
}

// The GPUs that still answer say nothing about the one that does not: a lost
// GPU's causes (power, overheating, the bus) stay open.
TEST(Diagnose, WhatTheOtherGpusShowRulesNothingOutForALostOne) {
  Snapshot snapshot = HealthySnapshot(8);
  snapshot.gpus[3].MarkUnreadable(AccessError::kGpuLost, "GPU is lost");
  Judged judged = Judge(snapshot);
  ASSERT_TRUE(judged.verdict.cause.has_value());
  EXPECT_EQ(*judged.verdict.cause, Cause::kPcie);
  EXPECT_TRUE(judged.verdict.hardware_service);
  for (Cause cause : {Cause::kThermal, Cause::kPower, Cause::kMemory}) {
    EXPECT_FALSE(IsRuledOut(judged.verdict, cause)) << CauseName(cause);
    bool open = false;
    for (const NotRuledOut& n : judged.verdict.not_ruled_out) open |= n.cause == cause && n.why == "GPU 3 does not answer";
    EXPECT_TRUE(open) << CauseName(cause);
  }
}

TEST(Diagnose, WithoutADriverTheAdviceIsToInstallItNotToResetTheGpus) {
  Snapshot snapshot;
  snapshot.driver_error = AccessError::kLibraryNotFound;
  snapshot.driver_message = "NVML library not found";
  Judged judged = Judge(snapshot);
  ASSERT_TRUE(judged.verdict.cause.has_value());
  EXPECT_FALSE(judged.verdict.restart_advisable);
  EXPECT_EQ(judged.verdict.recommendation.find("reset the GPUs"), std::string::npos) << judged.verdict.recommendation;
  EXPECT_NE(judged.verdict.recommendation.find("driver"), std::string::npos) << judged.verdict.recommendation;
  for (Cause cause : {Cause::kThermal, Cause::kPower, Cause::kPcie, Cause::kMemory})
    EXPECT_FALSE(IsRuledOut(judged.verdict, cause)) << CauseName(cause);
}

// After a driver update without a reboot the loaded module and the library
// differ: a clean restart is exactly the fix.
TEST(Diagnose, ADriverUpdatedWithoutARebootNeedsARestart) {
  Snapshot snapshot;
  snapshot.driver_error = AccessError::kVersionMismatch;
  snapshot.driver_message = "Driver/library version mismatch";
  Judged judged = Judge(snapshot);
  ASSERT_EQ(judged.verdict.cause, Cause::kDriver);
  EXPECT_TRUE(judged.verdict.restart_advisable);
  EXPECT_NE(judged.verdict.recommendation.find("reboot"), std::string::npos) << judged.verdict.recommendation;
}

// The same step for several GPUs is one step that names them all.
TEST(Diagnose, OneStepForEveryGpuThatNeedsIt) {
  Snapshot snapshot = HealthySnapshot(4);
  for (uint32_t i : {1u, 2u}) snapshot.gpus[i].temperature_c = Field<uint32_t>::Value(92);
  Judged judged = Judge(snapshot);
  ASSERT_TRUE(judged.verdict.cause.has_value());
  EXPECT_EQ(*judged.verdict.cause, Cause::kThermal);
  std::set<std::string> steps(judged.verdict.next_steps.begin(), judged.verdict.next_steps.end());
  EXPECT_EQ(steps.size(), judged.verdict.next_steps.size()) << "no step twice";
  for (const std::string& step : judged.verdict.next_steps)
    EXPECT_EQ(step.find("--gpu 1 "), std::string::npos) << "merged with GPU 2's: " << step;
}

TEST(Cause, IdsAndNames) {
  for (Cause cause : kCauses) EXPECT_EQ(CauseFromId(CauseId(cause)), cause);
  EXPECT_EQ(CauseFromId("cooling"), std::nullopt);
  EXPECT_EQ(CauseName(Cause::kPcie), "PCIe/bus");
}

}  // namespace
}  // namespace gpudoctor
