// BlockedTaskWatch: how long each task in uninterruptible sleep has stayed
// blocked, across the samples of a process that keeps running (the agent).
//
// One sample cannot tell a task stuck for minutes from one that waits a
// millisecond for a disk. The kernel's hung-task detector calls a task hung
// when it stays in D state without being scheduled once (its context switch
// count unchanged) for hung_task_timeout_secs. The watch judges the same way
// across samples: a task (pid and start time) seen blocked in every sample
// with an unchanged switch count has been blocked since the first of them.
//
//   BlockedTaskWatch watch;
//   watch.Observe(host_signals, clock.Now());   // every sample
//   input.blocked_task_watch = &watch;          // HealthInput: the hung-task rules ask it
//   std::optional<WallTime> since = watch.BlockedSince(task);
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include "common/clock.h"
#include "host/host_signals.h"

namespace gpudoctor {

class BlockedTaskWatch {
 public:
  // Records the blocked tasks of one sample taken at `now`. A task missing
  // from it, or scheduled since (switch count changed), starts over; a sample
  // whose task list could not be read forgets every task.
  void Observe(const HostSignals& host, WallTime now);

  // The first sample of the run in which `task` has been blocked ever since;
  // nullopt when the last sample did not see it blocked.
  std::optional<WallTime> BlockedSince(const BlockedTask& task) const;

 private:
  struct Blocked {
    WallTime since;
    std::optional<uint64_t> context_switches;
  };
  using TaskKey = std::pair<uint32_t, uint64_t>;  // pid, start time
  static TaskKey KeyOf(const BlockedTask& task) { return {task.pid, task.start_time_ticks}; }

  std::map<TaskKey, Blocked> blocked_;
};

}  // namespace gpudoctor
