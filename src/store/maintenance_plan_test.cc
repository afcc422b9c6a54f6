#include "store/maintenance_plan.h"

#include <gtest/gtest.h>

#include "store/test_support.h"

namespace gpudoctor {
namespace {

using namespace std::chrono_literals;
using testing::MakeFinding;
using testing::T0;

constexpr int64_t kMinute = 60'000;

TEST(NextDownsampleStep, StartsAtTheBucketOfTheOldestSample) {
  const int64_t first = ToUnixMillis(T0());  // 22:13:20
  auto step = NextDownsampleStep(Resolution::kMinute, std::nullopt, first, T0() + 150s);
  ASSERT_TRUE(step);
  EXPECT_EQ(step->from_ms, first - 20'000);
  EXPECT_EQ(step->until_ms, first - 20'000 + 2 * kMinute);  // 22:15:50 completes 22:13 and 22:14
  EXPECT_FALSE(step->more_after);
}

TEST(NextDownsampleStep, WaitsForACompleteBucket) {
  const int64_t done = FloorToBucket(ToUnixMillis(T0()), Resolution::kHour) + 3'600'000;
  EXPECT_FALSE(NextDownsampleStep(Resolution::kHour, done, done + 10, T0() + 30min));
  EXPECT_FALSE(NextDownsampleStep(Resolution::kHour, done, std::nullopt, T0() + 30h));
}

TEST(NextDownsampleStep, SkipsGapsAndBoundsEachStep) {
  const int64_t done = FloorToBucket(ToUnixMillis(T0()), Resolution::kMinute);
  const int64_t after_gap = done + 48 * 3600'000 + 5'000;  // agent was off for two days
  auto step = NextDownsampleStep(Resolution::kMinute, done, after_gap, T0() + 100h);
  ASSERT_TRUE(step);
  EXPECT_EQ(step->from_ms, after_gap - 5'000);
  EXPECT_EQ(step->until_ms - step->from_ms, 6 * 3600'000);
  EXPECT_TRUE(step->more_after);
}

TEST(RawPruneCutoff, NeverPassesUnfoldedSamples) {
  RetentionPolicy retention;
  retention.raw = 1h;
  const WallTime now = T0() + 10h;
  EXPECT_EQ(RawPruneCutoffMs(retention, now, ToUnixMillis(now), ToUnixMillis(now)), ToUnixMillis(now - 1h));
  EXPECT_EQ(RawPruneCutoffMs(retention, now, ToUnixMillis(T0() + 2h), ToUnixMillis(now)), ToUnixMillis(T0() + 2h));
  EXPECT_EQ(RawPruneCutoffMs(retention, now, std::nullopt, ToUnixMillis(now)), INT64_MIN);
}

TEST(FloorToBucket, RoundsDown) {
  EXPECT_EQ(FloorToBucket(119'999, Resolution::kMinute), 60'000);
  EXPECT_EQ(FloorToBucket(-1, Resolution::kMinute), -60'000);
  EXPECT_EQ(FloorToBucket(123, Resolution::kRaw), 123);
}

TEST(PlanFindingUpdate, SortsFindingsIntoOpenRefreshResolve) {
  StoredFinding hot{.incident_id = 1, .key = "temperature_high@GPU-00000000-0000-0000-0000-000000000000"};
  StoredFinding gone{.incident_id = 2, .key = "pcie_replay_rate@GPU-10000000-0000-0000-0000-000000000000"};
  hot.key = FindingKey(MakeFinding("temperature_high", 0));
  const std::vector<StoredFinding> open = {hot, gone};
  const std::vector<Finding> now = {MakeFinding("temperature_high", 0), MakeFinding("xid", 1),
                                    MakeFinding("xid", 1, Severity::kCritical)};
  FindingPlan plan = PlanFindingUpdate(open, now);
  ASSERT_EQ(plan.to_refresh.size(), 1u);
  EXPECT_EQ(plan.to_refresh[0].first->incident_id, 1);
  ASSERT_EQ(plan.to_resolve.size(), 1u);
  EXPECT_EQ(plan.to_resolve[0]->incident_id, 2);
  ASSERT_EQ(plan.to_open.size(), 1u);
  EXPECT_EQ(plan.to_open[0]->severity, Severity::kCritical);
}

TEST(FindingKey, NamesRuleAndGpu) {
  EXPECT_EQ(FindingKey(MakeFinding("job_stall", std::nullopt)), "job_stall");
  Finding by_bus = MakeFinding("x", std::nullopt);
  by_bus.gpu = GpuRef{.index = 2, .pci_bus_id = "0000:3b:00.0"};
  EXPECT_EQ(FindingKey(by_bus), "x@0000:3b:00.0");
  by_bus.gpu = GpuRef{.index = 2};
  EXPECT_EQ(FindingKey(by_bus), "x@gpu2");
  Finding job = MakeFinding("job_stall", std::nullopt);
  job.subject = "llama";
  EXPECT_EQ(FindingKey(job), "job_stall/llama");
  by_bus.subject = "a";
  EXPECT_EQ(FindingKey(by_bus), "x@gpu2/a");
}

TEST(ChooseResolution, ByRangeAndByWhatIsKept) {
  RetentionPolicy retention;
  const WallTime now = T0() + 100 * 24h;
  EXPECT_EQ(ChooseResolution(now - 1h, now, now, retention), Resolution::kRaw);
  EXPECT_EQ(ChooseResolution(now - 2 * 24h, now, now, retention), Resolution::kMinute);
  EXPECT_EQ(ChooseResolution(now - 30 * 24h, now, now, retention), Resolution::kHour);
  EXPECT_EQ(ChooseResolution(now - 8 * 24h, now - 8 * 24h + 1h, now, retention), Resolution::kMinute);
  EXPECT_EQ(ChooseResolution(now - 95 * 24h, now - 95 * 24h + 1h, now, retention), Resolution::kHour);
}

}  // namespace
}  // namespace gpudoctor
