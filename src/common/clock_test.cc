#include "common/clock.h"

#include <gtest/gtest.h>

#include <limits>

namespace gpudoctor {
namespace {

using namespace std::chrono_literals;

TEST(ScaledClock, RunsScaleTimesAsFastFromItsAnchor) {
  const WallTime anchor = FromUnixMillis(1'700'000'000'000);
  const ScaledClock clock(anchor, 60);
  EXPECT_EQ(clock.FromSystemTime(anchor), anchor);
  EXPECT_EQ(clock.FromSystemTime(anchor + 1s), anchor + 1min) << "a second of the system's is a minute of its";
  EXPECT_EQ(clock.FromSystemTime(anchor + 250ms), anchor + 15s);
  EXPECT_EQ(clock.FromSystemTime(anchor - 2s), anchor - 2min) << "before the anchor too";
  EXPECT_EQ(clock.scale(), 60);
}

TEST(ScaledClock, NowFollowsTheSystemClockAtItsPaceAndSteadyTimeStaysReal) {
  const ScaledClock clock(std::chrono::system_clock::now(), 3600);  // an hour a second
  const WallTime before = clock.Now();
  const auto steady_before = clock.Steady();
  while (clock.Steady() - steady_before < 10ms) {
  }
  EXPECT_GE(clock.Now() - before, 36s) << "10 ms at 3600x";
  EXPECT_LT(clock.Steady() - steady_before, 10s) << "deadlines stay in real time";
}

TEST(Clock, SecondsBeyondWhatTicksHoldAreNoDuration) {
  EXPECT_EQ(DurationFromSeconds(1.5), std::chrono::milliseconds(1500));
  EXPECT_EQ(DurationFromSeconds(-2), std::chrono::seconds(-2));
  EXPECT_TRUE(DurationFromSeconds(8.9e9));
  EXPECT_FALSE(DurationFromSeconds(1e20));  // 1e29 ns: converting would be undefined
  EXPECT_FALSE(DurationFromSeconds(-1e20));
  EXPECT_FALSE(DurationFromSeconds(std::numeric_limits<double>::infinity()));
  EXPECT_FALSE(DurationFromSeconds(std::numeric_limits<double>::quiet_NaN()));
}

TEST(Clock, TheSystemAndFakeClocksTakeSystemTimesAsTheyAre) {
  const WallTime t = FromUnixMillis(1'700'000'000'123);
  EXPECT_EQ(SystemClock::Instance().FromSystemTime(t), t);
  EXPECT_EQ(FakeClock().FromSystemTime(t), t);
}

}  // namespace
}  // namespace gpudoctor
