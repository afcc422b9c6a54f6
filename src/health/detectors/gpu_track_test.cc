// The track's storage: packed points read back what they were given, and the
// error counters, kept once per change, read back per point across trimming.
#include "health/detectors/gpu_track.h"

#include <gtest/gtest.h>

#include "health/detectors/detector_test_support.h"

namespace gpudoctor {
namespace {

using namespace testing;

// Every reading of a point, so two points compare whole.
struct Read {
  WallTime time;
  std::optional<float> utilization_percent, temperature_c, power_w, power_limit_w, sm_active, tensor_active,
      fan_percent;
  std::optional<uint32_t> process_count;
  bool idle_while_peers_busy;
  bool operator==(const Read&) const = default;
};

Read ReadBack(const GpuPoint& p) {
  return {p.time(),          p.utilization_percent(), p.temperature_c(), p.power_w(),
          p.power_limit_w(), p.sm_active(),           p.tensor_active(), p.fan_percent(),
          p.process_count(), p.idle_while_peers_busy()};
}

TEST(GpuPoint, EachReadingRoundTripsWithItsPresence) {
  EXPECT_EQ(ReadBack(GpuPoint(GpuReadings{.time = Start()})), Read{.time = Start()});

  const GpuReadings full{.time = Start() + 1s,
                         .utilization_percent = 97,
                         .temperature_c = 63,
                         .power_w = 612.347f,
                         .power_limit_w = 700,
                         .sm_active = 0.88f,
                         .tensor_active = 0.52f,
                         .fan_percent = 0,
                         .process_count = 0,
                         .idle_while_peers_busy = true};
  const Read all{full.time,          full.utilization_percent, full.temperature_c, full.power_w,
                 full.power_limit_w, full.sm_active,           full.tensor_active, full.fan_percent,
                 full.process_count, true};
  EXPECT_EQ(ReadBack(GpuPoint(full)), all);

  // One reading at a time, zero included: presence is not taken from the value.
  auto only = [](auto field, auto value) {
    GpuReadings readings{.time = Start()};
    readings.*field = value;
    return ReadBack(GpuPoint(readings));
  };
  EXPECT_EQ(only(&GpuReadings::utilization_percent, 0.0f), (Read{.time = Start(), .utilization_percent = 0}));
  EXPECT_EQ(only(&GpuReadings::temperature_c, 41.0f), (Read{.time = Start(), .temperature_c = 41}));
  EXPECT_EQ(only(&GpuReadings::power_w, 0.5f), (Read{.time = Start(), .power_w = 0.5f}));
  EXPECT_EQ(only(&GpuReadings::power_limit_w, 400.0f), (Read{.time = Start(), .power_limit_w = 400}));
  EXPECT_EQ(only(&GpuReadings::sm_active, 0.0f), (Read{.time = Start(), .sm_active = 0}));
  EXPECT_EQ(only(&GpuReadings::tensor_active, 1.0f), (Read{.time = Start(), .tensor_active = 1}));
  EXPECT_EQ(only(&GpuReadings::fan_percent, 100.0f), (Read{.time = Start(), .fan_percent = 100}));
  EXPECT_EQ(only(&GpuReadings::process_count, 0u), (Read{.time = Start(), .process_count = 0}));
}

TEST(GpuPoint, ProcessCountSaturatesAndTheStragglerMarkLeavesTheRestAlone) {
  EXPECT_EQ(GpuPoint(GpuReadings{.process_count = 65'535}).process_count(), 65'535u);
  EXPECT_EQ(GpuPoint(GpuReadings{.process_count = 100'000}).process_count(), 65'535u);

  GpuPoint point(Busy(3, 70));
  const Read before = ReadBack(point);
  point.set_idle_while_peers_busy(true);
  EXPECT_TRUE(point.idle_while_peers_busy());
  point.set_idle_while_peers_busy(false);
  EXPECT_EQ(ReadBack(point), before);
}

// The pcie_replays readings of `history` since `since`, as (seconds since Start(), value).
std::vector<std::pair<double, double>> Replays(const PointHistory& history, WallTime since = WallTime{}) {
  std::vector<std::pair<double, double>> out;
  for (const CounterReading& reading : history.CounterSince(&ErrorCounters::pcie_replays, since))
    out.emplace_back(std::chrono::duration<double>(reading.time - Start()).count(), reading.value);
  return out;
}

GpuReadings At(double seconds, std::optional<double> replays) {
  GpuReadings readings = Busy();
  readings.time = Start() + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
  readings.counters.pcie_replays = replays;
  return readings;
}

TEST(PointHistory, CountersAreKeptPerChangeAndReadBackPerPoint) {
  PointHistory history;
  history.push_back(At(0, 5));
  history.push_back(At(1, 5));
  history.push_back(At(2, std::nullopt));
  history.push_back(At(3, std::nullopt));
  history.push_back(At(4, 7));
  history.push_back(At(5, 7));
  history.push_back(At(6, 7));
  EXPECT_EQ(history.size(), 7u);
  EXPECT_EQ(history.counter_steps(), 3u);  // 5, none, 7
  EXPECT_EQ(Replays(history), (std::vector<std::pair<double, double>>{{0, 5}, {1, 5}, {4, 7}, {5, 7}, {6, 7}}));
  EXPECT_EQ(Replays(history, Start() + 5s), (std::vector<std::pair<double, double>>{{5, 7}, {6, 7}}));
  EXPECT_TRUE(history.CounterSince(&ErrorCounters::ecc_corrected, WallTime{}).empty());

  // A change of another counter is a step too; this one reads on unchanged.
  GpuReadings other = At(7, 7);
  other.counters.nvlink_errors = 1;
  history.push_back(other);
  EXPECT_EQ(history.counter_steps(), 4u);
  EXPECT_EQ(Replays(history, Start() + 6s), (std::vector<std::pair<double, double>>{{6, 7}, {7, 7}}));
}

TEST(PointHistory, DroppingKeepsTheStepThatHoldsForTheOldestPoint) {
  PointHistory history;
  for (int s = 0; s < 10; ++s) history.push_back(At(s, s < 4 ? 1 : 2));
  EXPECT_EQ(history.counter_steps(), 2u);

  history.DropBefore(Start() + 2s);  // the first step still holds for 2 and 3
  EXPECT_EQ(history.front().time(), Start() + 2s);
  EXPECT_EQ(history.counter_steps(), 2u);
  EXPECT_EQ(Replays(history, Start() + 3s).front(), (std::pair<double, double>{3, 1}));

  history.DropBefore(Start() + 4s);  // now only the second does
  EXPECT_EQ(history.counter_steps(), 1u);
  EXPECT_EQ(Replays(history).front(), (std::pair<double, double>{4, 2}));

  history.DropBefore(Start() + 1h);
  EXPECT_TRUE(history.empty());
  EXPECT_EQ(history.counter_steps(), 0u);
  history.push_back(At(3600, 2));  // the same readings after a gap start a step of their own
  EXPECT_EQ(history.counter_steps(), 1u);
  EXPECT_EQ(Replays(history), (std::vector<std::pair<double, double>>{{3600, 2}}));
}

// An agent's history wraps many times over: a window of 100 points over
// 10,000 samples, the counter moving every 7th sample, reads back exactly.
TEST(PointHistory, ReadsBackExactlyAfterWrappingManyTimes) {
  GpuTrack track;
  for (int s = 0; s < 10'000; ++s) {
    track.points.push_back(At(s, s / 7 * 3));
    track.Trim(Start() + std::chrono::seconds(s), 99s);
  }
  ASSERT_EQ(track.points.size(), 100u);
  EXPECT_EQ(track.points.front().time(), Start() + 9'900s);
  EXPECT_LE(track.points.counter_steps(), 100u / 7 + 2);
  const auto replays = Replays(track.points);
  ASSERT_EQ(replays.size(), 100u);
  for (const auto& [seconds, value] : replays) EXPECT_EQ(value, static_cast<int>(seconds) / 7 * 3) << seconds;
}

}  // namespace
}  // namespace gpudoctor
