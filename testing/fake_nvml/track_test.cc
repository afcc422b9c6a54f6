#include "track.h"

#include <gtest/gtest.h>

#include "xid_mailbox.h"

namespace gpudoctor::fake_nvml {
namespace {

TEST(Track, HoldsItsBaseWithoutEffects) {
  Track track(42);
  EXPECT_EQ(track.At(-5), 42);
  EXPECT_EQ(track.At(0), 42);
  EXPECT_EQ(track.At(1e9), 42);
}

TEST(Track, SetTakesEffectAtItsTime) {
  Track track(1);
  track.Set(10, 0);
  EXPECT_EQ(track.At(9.999), 1);
  EXPECT_EQ(track.At(10), 0);
  EXPECT_EQ(track.At(100), 0);
}

TEST(Track, RampMovesLinearlyFromTheValueAtItsStartThenHolds) {
  Track track(40);
  track.Ramp(60, 90, 600);
  EXPECT_EQ(track.At(60), 40);
  EXPECT_DOUBLE_EQ(track.At(360), 65);
  EXPECT_EQ(track.At(660), 90);
  EXPECT_EQ(track.At(5000), 90);
}

TEST(Track, RiseCountsUpAndStopsAfterItsDuration) {
  Track track(3);
  track.Rise(10, 2);
  EXPECT_EQ(track.At(10), 3);
  EXPECT_EQ(track.At(20), 23);
  Track burst(0);
  burst.Rise(0, 5, 4);
  EXPECT_EQ(burst.At(2), 10);
  EXPECT_EQ(burst.At(100), 20);
}

TEST(Track, LaterEffectsStartFromWhereEarlierOnesLeftTheValue) {
  Track memory(1000);
  memory.Ramp(0, 5000, 100);    // grows
  memory.Ramp(100, 3000, 10);   // partly released
  memory.Ramp(200, 8000, 100);  // grows again from 3000
  EXPECT_EQ(memory.At(100), 5000);
  EXPECT_EQ(memory.At(110), 3000);
  EXPECT_EQ(memory.At(250), 5500);
  // Added out of order: still applied by time.
  Track counter(0);
  counter.Set(50, 100);
  counter.Rise(0, 1);
  EXPECT_EQ(counter.At(40), 40);
  EXPECT_EQ(counter.At(60), 100);
}

TEST(Track, ZeroLengthRampJumps) {
  Track track(5);
  track.Ramp(1, 9, 0);
  EXPECT_EQ(track.At(0.5), 5);
  EXPECT_EQ(track.At(1), 9);
}

TEST(Track, JitterIsBoundedReproducibleAndAlive) {
  Track track(50);
  track.set_jitter(3, 7);
  Track twin(50);
  twin.set_jitter(3, 7);
  double lowest = 100, highest = 0;
  for (double t = 0; t < 600; t += 0.25) {
    double value = track.At(t);
    EXPECT_EQ(value, twin.At(t));
    lowest = std::min(lowest, value);
    highest = std::max(highest, value);
  }
  EXPECT_GE(lowest, 47);
  EXPECT_LE(highest, 53);
  EXPECT_GT(highest - lowest, 3);  // it does move
  Track other(50);
  other.set_jitter(3, 8);
  EXPECT_NE(other.At(10), track.At(10));
}

Scenario TwoGpusWithXids(double lookback) {
  Scenario scenario;
  scenario.gpus.resize(2);
  scenario.xid_lookback = lookback;
  scenario.xids = {{0, 10, 48}, {1, 20, 79}, {0, 30, 63}};
  return scenario;
}

TEST(XidMailbox, DeliversEventsAfterRegistrationOncePerSet) {
  Scenario scenario = TwoGpusWithXids(0);
  XidMailbox mailbox(scenario);
  mailbox.Register(0, 15);
  EXPECT_FALSE(mailbox.Take(25).has_value());  // 48 came before registration; GPU 1 not registered
  EXPECT_EQ(mailbox.NextTime(25), 30);
  auto xid = mailbox.Take(30);
  ASSERT_TRUE(xid.has_value());
  EXPECT_EQ(xid->xid, 63u);
  EXPECT_FALSE(mailbox.Take(100).has_value());
  EXPECT_FALSE(mailbox.NextTime(100).has_value());
}

TEST(XidMailbox, LookbackReachesEarlierEventsOldestFirst) {
  Scenario scenario = TwoGpusWithXids(60);
  XidMailbox mailbox(scenario);
  mailbox.Register(0, 40);
  mailbox.Register(1, 40);
  mailbox.Register(0, 1000);  // the first registration stands
  std::vector<uint64_t> seen;
  while (auto xid = mailbox.Take(40)) seen.push_back(xid->xid);
  EXPECT_EQ(seen, (std::vector<uint64_t>{48, 79, 63}));
  XidMailbox other(scenario);  // another set sees them again
  other.Register(1, 40);
  EXPECT_EQ(other.Take(40)->xid, 79u);
}

}  // namespace
}  // namespace gpudoctor::fake_nvml
