#include "health/blocked_task_watch.h"

namespace gpudoctor {

void BlockedTaskWatch::Observe(const HostSignals& host, WallTime now) {
  std::map<TaskKey, Blocked> blocked;
  if (host.blocked_tasks.has_value()) {
    for (const BlockedTask& task : host.blocked_tasks.value()) {
      Blocked seen{now, task.context_switches};
      auto earlier = blocked_.find(KeyOf(task));
      if (earlier != blocked_.end() && earlier->second.context_switches == task.context_switches)
        seen.since = earlier->second.since;
      blocked.emplace(KeyOf(task), seen);
    }
  }
  blocked_ = std::move(blocked);
}

std::optional<WallTime> BlockedTaskWatch::BlockedSince(const BlockedTask& task) const {
  auto seen = blocked_.find(KeyOf(task));
  if (seen == blocked_.end()) return std::nullopt;
  return seen->second.since;
}

}  // namespace gpudoctor
