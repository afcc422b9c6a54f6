#include "health/detectors/utilization_rules.h"

#include <gtest/gtest.h>

#include <cmath>

#include "health/detectors/detector_test_support.h"

namespace gpudoctor {
namespace {

using namespace testing;

const Duration kGap = std::chrono::minutes(2);

TEST(UtilizationStuck, SpinningAtFullFiresAfterTheThresholdAndNotBefore) {
  UtilizationStuckConfig config;  // 15 minutes
  auto spinning = [](double) { return Busy(100, /*power=*/90); };  // 100% at 22% of the power limit
  EXPECT_FALSE(DetectUtilizationStuck(TrackOf(14min + 55s, 5s, spinning), config, kGap));
  auto finding = DetectUtilizationStuck(TrackOf(15min, 5s, spinning), config, kGap);
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->id, "utilization_stuck");
  EXPECT_EQ(finding->severity, Severity::kWarning);
  EXPECT_EQ(finding->gpu->index, 0u);
  EXPECT_NE(finding->summary.find("stuck at 100%"), std::string::npos) << finding->summary;
  EXPECT_NE(finding->evidence[1].find("power=90 W"), std::string::npos);
}

TEST(UtilizationStuck, FullWithoutAnyProcessFires) {
  auto orphan = [](double) {
    GpuReadings p = Busy(100, 300);
    p.process_count = 0;
    return p;
  };
  auto finding = DetectUtilizationStuck(TrackOf(20min, 5s, orphan), {}, kGap);
  ASSERT_TRUE(finding);
  EXPECT_NE(finding->summary.find("no compute process"), std::string::npos);
}

TEST(UtilizationStuck, HealthyTrainingAtFullPowerStaysQuiet) {
  auto training = [](double s) { return Busy(100, 360 + 20 * std::sin(s / 7)); };
  EXPECT_FALSE(DetectUtilizationStuck(TrackOf(3h, 5s, training), {}, kGap));
}

// Where the GPU has GPM the SMs decide, not the power: a kernel spinning on a
// few SMs at full power is stuck; memory-bound work at low power is not.
TEST(UtilizationStuck, OnAGpuWithGpmTheSmActivityDecidesInsteadOfThePower) {
  auto spinning_hot = [](double) {
    GpuReadings p = Busy(100, /*power=*/380);  // near the limit: the power alone says "working"
    p.sm_active = 0.015;                    // 2 of 132 SMs
    return p;
  };
  auto finding = DetectUtilizationStuck(TrackOf(16min, 5s, spinning_hot), {}, kGap);
  ASSERT_TRUE(finding);
  EXPECT_NE(finding->summary.find("while its SMs are idle"), std::string::npos) << finding->summary;
  EXPECT_NE(finding->evidence[1].find("sm_active=1.5%"), std::string::npos) << finding->evidence[1];

  auto memory_bound = [](double) {
    GpuReadings p = Busy(100, /*power=*/90);  // low power: the power alone says "spinning"
    p.sm_active = 0.62;
    return p;
  };
  EXPECT_FALSE(DetectUtilizationStuck(TrackOf(2h, 5s, memory_bound), {}, kGap));

  UtilizationStuckConfig stricter;
  stricter.busy_wait_sm_active = 0.7;
  EXPECT_TRUE(DetectUtilizationStuck(TrackOf(16min, 5s, memory_bound), stricter, kGap));
}

// A job keeping the SMs busy with its tensor cores idle is slow on Hopper;
// one using them, a GPU without GPM, and a spin (utilization_stuck's case) stay quiet.
TEST(TensorCoresIdle, BusySmsWithIdleTensorCoresFireAfterTheThreshold) {
  auto fp32_training = [](double) {
    GpuReadings p = Busy(98, 600);
    p.sm_active = 0.86;
    p.tensor_active = 0.012;
    return p;
  };
  TensorCoresIdleConfig config;  // 30 minutes
  EXPECT_FALSE(DetectTensorCoresIdle(TrackOf(29min, 5s, fp32_training), config, kGap));
  auto finding = DetectTensorCoresIdle(TrackOf(31min, 5s, fp32_training), config, kGap);
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->id, "tensor_cores_idle");
  EXPECT_EQ(finding->severity, Severity::kWarning);
  EXPECT_NE(finding->summary.find("tensor cores at 1.2%"), std::string::npos) << finding->summary;
  EXPECT_NE(finding->evidence[1].find("sm_active=86%"), std::string::npos) << finding->evidence[1];

  auto mixed_precision = [](double) {
    GpuReadings p = Busy(98, 650);
    p.sm_active = 0.88;
    p.tensor_active = 0.52;
    return p;
  };
  EXPECT_FALSE(DetectTensorCoresIdle(TrackOf(2h, 5s, mixed_precision), config, kGap));
  auto without_gpm = [](double) { return Busy(98, 600); };
  EXPECT_FALSE(DetectTensorCoresIdle(TrackOf(2h, 5s, without_gpm), config, kGap));
  auto spinning = [](double) {
    GpuReadings p = Busy(100, 380);
    p.sm_active = 0.015;
    p.tensor_active = 0;
    return p;
  };
  EXPECT_FALSE(DetectTensorCoresIdle(TrackOf(2h, 5s, spinning), config, kGap));
}

TEST(UtilizationStuck, IdleWhileProcessesHoldTheGpu) {
  auto idle_held = [](double) { return Busy(0, 60); };
  EXPECT_FALSE(DetectUtilizationStuck(TrackOf(14min, 5s, idle_held), {}, kGap));
  auto finding = DetectUtilizationStuck(TrackOf(16min, 5s, idle_held), {}, kGap);
  ASSERT_TRUE(finding);
  EXPECT_NE(finding->summary.find("at 0% utilisation"), std::string::npos) << finding->summary;

  auto idle_free = [](double) {
    GpuReadings p = Busy(0, 60);
    p.process_count = 0;
    return p;
  };
  EXPECT_FALSE(DetectUtilizationStuck(TrackOf(2h, 5s, idle_free), {}, kGap));  // an unused GPU is fine
  auto unknown_processes = [](double) {
    GpuReadings p = Busy(0, 60);
    p.process_count.reset();
    return p;
  };
  EXPECT_FALSE(DetectUtilizationStuck(TrackOf(2h, 5s, unknown_processes), {}, kGap));
}

TEST(UtilizationStuck, ABriefBreakOrASamplingGapRestartsTheClock) {
  auto with_blip = [](double s) { return Busy(s > 600 && s < 606 ? 0 : 100, 90); };
  EXPECT_FALSE(DetectUtilizationStuck(TrackOf(20min, 5s, with_blip), {}, kGap));  // held 10 min since the blip
  auto with_gap = [](double s) -> std::optional<GpuReadings> {
    if (s > 480 && s < 660) return std::nullopt;  // no samples from 8 to 11 minutes
    return Busy(100, 90);
  };
  GpuTrack gapped = TrackOf(20min, 5s, with_gap);
  EXPECT_FALSE(DetectUtilizationStuck(gapped, {}, kGap));
}

TEST(UtilizationFlapping, SwingsAreCountedWithHysteresis) {
  UtilizationFlappingConfig config;  // 6 transitions in 10 minutes
  auto roller_coaster = [](double s) { return Busy(static_cast<int>(s / 40) % 2 ? 95 : 3); };
  GpuTrack track = TrackOf(10min, 5s, roller_coaster);
  auto finding = DetectUtilizationFlapping(track, config, track.points.back().time());
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->id, "utilization_flapping");
  EXPECT_NE(finding->evidence[0].find("transitions=15"), std::string::npos) << finding->evidence[0];

  auto noisy_middle = [](double s) { return Busy(50 + 25 * std::sin(s / 20)); };  // never crosses both bands
  GpuTrack middle = TrackOf(30min, 5s, noisy_middle);
  EXPECT_FALSE(DetectUtilizationFlapping(middle, config, middle.points.back().time()));

  auto job_start = [](double s) { return Busy(s < 300 ? 0 : 98); };
  GpuTrack start = TrackOf(10min, 5s, job_start);
  EXPECT_FALSE(DetectUtilizationFlapping(start, config, start.points.back().time()));

  auto slow_swings = [](double s) { return Busy(static_cast<int>(s / 240) % 2 ? 95 : 3); };  // 4-minute phases
  GpuTrack slow = TrackOf(1h, 5s, slow_swings);
  EXPECT_FALSE(DetectUtilizationFlapping(slow, config, slow.points.back().time()));
}

TEST(GpuStraggler, MarksTheIdleRankOnlyWhenPeersAreBusy) {
  StragglerConfig config;
  std::vector<GpuPoint> points(8, GpuPoint(Busy(99)));
  points[3] = GpuPoint(Busy(0, 70));
  std::vector<GpuPoint*> instant;
  for (GpuPoint& p : points) instant.push_back(&p);
  MarkStragglers(instant, config);
  for (size_t i = 0; i < points.size(); ++i) EXPECT_EQ(points[i].idle_while_peers_busy(), i == 3) << i;

  GpuReadings unused = Busy(0, 70);
  unused.process_count = 0;  // not part of the job: an unused GPU
  points[3] = GpuPoint(unused);
  MarkStragglers(instant, config);
  EXPECT_FALSE(points[3].idle_while_peers_busy());

  std::vector<GpuPoint> pair = {GpuPoint(Busy(99)), GpuPoint(Busy(0, 70))};  // two GPUs: one busy peer is not enough
  std::vector<GpuPoint*> pair_instant = {&pair[0], &pair[1]};
  MarkStragglers(pair_instant, config);
  EXPECT_FALSE(pair[1].idle_while_peers_busy());

  std::vector<GpuPoint> mostly_idle(8, GpuPoint(Busy(0, 70)));  // everyone idle but two: no straggler
  mostly_idle[0] = GpuPoint(Busy(99));
  mostly_idle[1] = GpuPoint(Busy(99));
  std::vector<GpuPoint*> idle_instant;
  for (GpuPoint& p : mostly_idle) idle_instant.push_back(&p);
  MarkStragglers(idle_instant, config);
  for (const GpuPoint& p : mostly_idle) EXPECT_FALSE(p.idle_while_peers_busy());
}

TEST(GpuStraggler, FiresAfterTheThreshold) {
  StragglerConfig config;  // 5 minutes
  auto straggling = [](double) {
    GpuReadings p = Busy(0, 70);
    p.idle_while_peers_busy = true;
    return p;
  };
  EXPECT_FALSE(DetectGpuStraggler(TrackOf(4min + 55s, 5s, straggling), config, kGap));
  auto finding = DetectGpuStraggler(TrackOf(5min, 5s, straggling), config, kGap);
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->id, "gpu_straggler");
  EXPECT_NE(finding->summary.find("idle for 5m"), std::string::npos) << finding->summary;
}

}  // namespace
}  // namespace gpudoctor
