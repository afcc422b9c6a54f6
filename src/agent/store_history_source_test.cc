#include "agent/store_history_source.h"

#include <gtest/gtest.h>

#include "agent/testing/synthetic_agent.h"
#include "agent/testing/test_start.h"
#include "store/memory_store.h"
#include "store/snapshot_samples.h"

namespace gpudoctor {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

using agent_testing::kStart;

// Lends a store the test owns.
StoreHistorySource::StoreAccess Borrow(const HistoryStore& store) {
  return [&store] { return std::shared_ptr<const HistoryStore>(std::shared_ptr<void>(), &store); };
}

TEST(StoreHistorySource, PlotsStoredSamples) {
  MemoryHistoryStore store;
  for (int i = 0; i < 60; ++i)
    ASSERT_TRUE(AppendSnapshot(store, SyntheticSnapshot(2, kStart + seconds(5 * i))).ok());
  StoreHistorySource history(Borrow(store));

  Result<HistorySeries> temps = history.Query({.gpu_index = 1,
                                               .metric = "temperature_c",
                                               .from = kStart,
                                               .to = kStart + seconds(295),
                                               .max_points = 1000});
  ASSERT_TRUE(temps.ok()) << temps.error().message;
  EXPECT_EQ(temps->unit, "°C");
  ASSERT_EQ(temps->points.size(), 60u);  // `to` is inclusive
  EXPECT_EQ(temps->points[0].time, kStart);
  EXPECT_EQ(temps->points[0].value, SyntheticReading(1, "temperature_c", kStart));
  EXPECT_EQ(temps->points[59].time, kStart + seconds(295));

  Result<HistorySeries> thinned = history.Query(
      {.gpu_index = 0, .metric = "power_w", .from = kStart, .to = kStart + minutes(10), .max_points = 10});
  ASSERT_TRUE(thinned.ok());
  EXPECT_EQ(thinned->points.size(), 10u);
}

TEST(StoreHistorySource, UnknownGpuHasNoHistoryAndUnknownMetricIsAnError) {
  MemoryHistoryStore store;
  ASSERT_TRUE(AppendSnapshot(store, SyntheticSnapshot(1, kStart)).ok());
  StoreHistorySource history(Borrow(store));
  Result<HistorySeries> none =
      history.Query({.gpu_index = 7, .metric = "power_w", .from = kStart, .to = kStart + seconds(1)});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->points.empty());
  EXPECT_FALSE(
      history.Query({.gpu_index = 0, .metric = "bogus", .from = kStart, .to = kStart + seconds(1)}).ok());
  const std::vector<std::string> names = history.MetricNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "utilization_gpu_percent"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "memory_used_bytes"), names.end());
}

TEST(ThinHistory, AveragesNeighbours) {
  std::vector<HistoryPoint> points;
  for (int i = 0; i < 10; ++i) points.push_back({kStart + seconds(i), static_cast<double>(i)});
  std::vector<HistoryPoint> thin = ThinHistory(points, 4);  // groups of 3
  ASSERT_EQ(thin.size(), 4u);
  EXPECT_EQ(thin[0].value, 1);
  EXPECT_EQ(thin[0].time, kStart);
  EXPECT_EQ(thin[3].value, 9);
  EXPECT_EQ(ThinHistory(points, 10).size(), 10u);
  EXPECT_EQ(ThinHistory(points, 0).size(), 10u);
}

}  // namespace
}  // namespace gpudoctor

namespace gpudoctor {
namespace {

TEST(StoreHistorySource, SaysSoWhileTheHistoryIsNotOpen) {
  StoreHistorySource history([] { return std::shared_ptr<const HistoryStore>(); });
  auto series = history.Query({.gpu_index = 0, .metric = "temperature_c", .from = kStart, .to = kStart + minutes(1)});
  ASSERT_FALSE(series.ok());
  EXPECT_NE(series.error().message.find("not open"), std::string::npos) << series.error().message;
  EXPECT_FALSE(history.LatestDiagnostics().ok());
}

TEST(StoreHistorySource, GivesTheStoresLatestDiagnostics) {
  MemoryHistoryStore store;
  const DiagnosticRecord older{.finished_at = kStart, .gpu_index = 1, .uuid = "GPU-1", .test = "burn", .state = "hung"};
  DiagnosticRecord newer = older;
  newer.finished_at = kStart + minutes(30);
  newer.state = "passed";
  ASSERT_TRUE(store.RecordDiagnostic(older).ok());
  ASSERT_TRUE(store.RecordDiagnostic(newer).ok());
  StoreHistorySource history(Borrow(store));
  auto latest = history.LatestDiagnostics();
  ASSERT_TRUE(latest.ok()) << latest.error().message;
  EXPECT_EQ(*latest, std::vector<DiagnosticRecord>{newer});
}

}  // namespace
}  // namespace gpudoctor
