#include "health/detectors/counter_rates.h"

#include <gtest/gtest.h>

#include "health/detectors/detector_test_support.h"

namespace gpudoctor {
namespace {

using namespace testing;

GpuTrack CounterTrack(const std::function<void(GpuReadings&, double seconds)>& set) {
  return TrackOf(10min, 5s, [&](double s) {
    GpuReadings p = Busy();
    p.counters.ecc_corrected = 0;
    p.counters.ecc_uncorrected = 0;
    p.counters.pcie_replays = 100;
    p.counters.nvlink_errors = 0;
    set(p, s);
    return p;
  });
}

TEST(CounterRates, QuietWhenCountersStandStill) {
  GpuTrack track = CounterTrack([](GpuReadings&, double) {});
  EXPECT_TRUE(DetectCounterRates(track, {}, End(track)).empty());
}

TEST(CounterRates, PcieReplaysAboveTheRate) {
  GpuTrack fast = CounterTrack([](GpuReadings& p, double s) { p.counters.pcie_replays = 100 + s / 3; });  // 20/min
  auto findings = DetectCounterRates(fast, {}, End(fast));
  ASSERT_EQ(Ids(findings), std::vector<std::string>{"pcie_replay_rate"});
  EXPECT_NE(findings[0].evidence[0].find("= 20.0/min"), std::string::npos) << findings[0].evidence[0];

  GpuTrack slow = CounterTrack([](GpuReadings& p, double s) { p.counters.pcie_replays = 100 + s / 30; });  // 2/min
  EXPECT_TRUE(DetectCounterRates(slow, {}, End(slow)).empty());
}

TEST(CounterRates, ACounterResetIsNotANegativeOrHugeRate) {
  // Driver reload at 7 minutes resets the counter to 0; a slow 2/min before and after.
  GpuTrack track = CounterTrack(
      [](GpuReadings& p, double s) { p.counters.pcie_replays = s < 420 ? 5000 + s / 30 : (s - 420) / 30; });
  EXPECT_TRUE(DetectCounterRates(track, {}, End(track)).empty());
}

TEST(CounterRates, EccUncorrectedIsCriticalCorrectedByRate) {
  GpuTrack uncorrected = CounterTrack([](GpuReadings& p, double s) { p.counters.ecc_uncorrected = s > 500 ? 1 : 0; });
  auto findings = DetectCounterRates(uncorrected, {}, End(uncorrected));
  ASSERT_EQ(Ids(findings), std::vector<std::string>{"ecc_rate"});
  EXPECT_EQ(findings[0].severity, Severity::kCritical);

  GpuTrack corrected = CounterTrack([](GpuReadings& p, double s) { p.counters.ecc_corrected = s; });  // 60/min
  findings = DetectCounterRates(corrected, {}, End(corrected));
  ASSERT_EQ(Ids(findings), std::vector<std::string>{"ecc_rate"});
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
}

TEST(CounterRates, NvlinkErrors) {
  GpuTrack track = CounterTrack([](GpuReadings& p, double s) { p.counters.nvlink_errors = s / 6; });  // 10/min
  EXPECT_EQ(Ids(DetectCounterRates(track, {}, End(track))), std::vector<std::string>{"nvlink_error_rate"});
}

TEST(CounterRates, MissingOrTooFewReadingsGiveNoRate) {
  GpuTrack missing = CounterTrack([](GpuReadings& p, double) {
    p.counters.pcie_replays.reset();
    p.counters.ecc_corrected.reset();
  });
  EXPECT_TRUE(DetectCounterRates(missing, {}, End(missing)).empty());
  GpuTrack track = CounterTrack([](GpuReadings& p, double s) { p.counters.pcie_replays = s * 10; });
  EXPECT_FALSE(CounterRatePerMinute(track.points, &ErrorCounters::pcie_replays, End(track) - 30s, 1min));
}

}  // namespace
}  // namespace gpudoctor
