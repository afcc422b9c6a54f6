#include "health/blocked_task_watch.h"

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

using std::chrono::seconds;

const WallTime kStart{std::chrono::seconds{1'700'000'000}};

HostSignals Blocked(std::vector<BlockedTask> tasks) {
  HostSignals host;
  host.blocked_tasks = Field<std::vector<BlockedTask>>::Value(std::move(tasks));
  return host;
}

BlockedTask Task(uint32_t pid, uint64_t start, std::optional<uint64_t> switches) {
  return {.pid = pid, .start_time_ticks = start, .context_switches = switches, .name = "rsync"};
}

TEST(BlockedTaskWatch, ATaskBlockedInEverySampleIsBlockedSinceTheFirst) {
  BlockedTaskWatch watch;
  for (int i = 0; i < 4; ++i) watch.Observe(Blocked({Task(10, 500, 42)}), kStart + seconds(30 * i));
  EXPECT_EQ(watch.BlockedSince(Task(10, 500, 42)), kStart);
}

TEST(BlockedTaskWatch, ATaskThatRanBetweenSamplesStartsOver) {
  BlockedTaskWatch watch;
  watch.Observe(Blocked({Task(10, 500, 42)}), kStart);
  watch.Observe(Blocked({Task(10, 500, 43)}), kStart + seconds(30));  // scheduled once in between
  EXPECT_EQ(watch.BlockedSince(Task(10, 500, 43)), kStart + seconds(30));

  watch.Observe(Blocked({}), kStart + seconds(60));  // not blocked in this sample
  watch.Observe(Blocked({Task(10, 500, 43)}), kStart + seconds(90));
  EXPECT_EQ(watch.BlockedSince(Task(10, 500, 43)), kStart + seconds(90));
}

TEST(BlockedTaskWatch, AReusedPidIsAnotherTask) {
  BlockedTaskWatch watch;
  watch.Observe(Blocked({Task(10, 500, 42)}), kStart);
  watch.Observe(Blocked({Task(10, 900, 42)}), kStart + seconds(30));
  EXPECT_EQ(watch.BlockedSince(Task(10, 900, 42)), kStart + seconds(30));
  EXPECT_EQ(watch.BlockedSince(Task(10, 500, 42)), std::nullopt);
}

TEST(BlockedTaskWatch, AnUnreadableSampleForgetsEveryTask) {
  BlockedTaskWatch watch;
  watch.Observe(Blocked({Task(10, 500, 42)}), kStart);
  HostSignals unreadable;
  unreadable.blocked_tasks = Field<std::vector<BlockedTask>>::Failed("cannot list /proc");
  watch.Observe(unreadable, kStart + seconds(30));
  watch.Observe(Blocked({Task(10, 500, 42)}), kStart + seconds(60));
  EXPECT_EQ(watch.BlockedSince(Task(10, 500, 42)), kStart + seconds(60));
}

}  // namespace
}  // namespace gpudoctor
