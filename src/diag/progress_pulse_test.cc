// The worker's count of work done and the parent's deadline, on times the
// test chooses: slow progress is never a hang, no progress is.
#include "diag/progress_pulse.h"

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

using namespace std::chrono_literals;
using TimePoint = std::chrono::steady_clock::time_point;

TEST(WorkPulse, CountsUnitsAndTheSlowestGapButNotTheStartUp) {
  WorkPulse pulse;
  const TimePoint t0{1000s};
  EXPECT_EQ(pulse.Read().units, 0u);
  pulse.Beat(t0);  // the first unit after start-up
  EXPECT_EQ(pulse.Read().units, 1u);
  EXPECT_EQ(pulse.Read().slowest_unit, Duration::zero());
  pulse.Beat(t0 + 300ms);
  pulse.Beat(t0 + 2300ms);
  pulse.Beat(t0 + 2400ms);
  EXPECT_EQ(pulse.Read().units, 4u);
  EXPECT_EQ(pulse.Read().slowest_unit, 2s);
}

TEST(StallWatch, AWorkerWhoseUnitsKeepComingIsNeverHungHoweverSlow) {
  const TimePoint t0{5000s};
  StallWatch watch(60s, t0);
  TimePoint now = t0;
  // Each unit takes 45 s, then 5 min (a host under more and more load): the
  // heartbeat says so every second, and the deadline grows with the units.
  uint64_t units = 0;
  Duration slowest{};
  for (Duration unit : {Duration(1s), Duration(45s), Duration(45s), Duration(5min), Duration(5min)}) {
    for (TimePoint end = now + unit; now < end; now += 1s) {
      EXPECT_FALSE(watch.Hung(now)) << "killed " << (now - t0).count() << " ns in";
      watch.Pulse(units, slowest, now);
    }
    ++units;
    slowest = std::max(slowest, unit);
    watch.Pulse(units, slowest, now);
  }
  EXPECT_EQ(watch.deadline(), kSlowUnitFactor * Duration(5min));
}

TEST(StallWatch, AWorkerWhoseCountStopsIsHungAtTheDeadlineThoughItsHeartbeatGoesOn) {
  const TimePoint t0{5000s};
  StallWatch watch(10s, t0);
  watch.Pulse(5, 100ms, t0 + 1s);  // quick units, then a launch that never returns
  EXPECT_EQ(watch.deadline(), 10s);  // 20 x 100 ms is less than the stall timeout
  for (TimePoint now = t0 + 2s; now <= t0 + 11s; now += 1s) {
    watch.Pulse(5, 100ms, now);  // the heartbeat, with the same count
    EXPECT_FALSE(watch.Hung(now));
  }
  EXPECT_TRUE(watch.Hung(t0 + 11s + 1ms));
}

TEST(StallWatch, AWorkerThatNeverStartsIsHungAtTheStallTimeout) {
  const TimePoint t0{5000s};
  StallWatch watch(5s, t0);
  EXPECT_FALSE(watch.Hung(t0 + 5s));
  EXPECT_TRUE(watch.Hung(t0 + 5s + 1ms));
  // A step done counts as progress even without counters (an older worker's line).
  watch.Progressed(t0 + 5s);
  EXPECT_FALSE(watch.Hung(t0 + 9s));
}

}  // namespace
}  // namespace gpudoctor
