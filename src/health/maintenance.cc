#include "health/maintenance.h"

#include <algorithm>

#include "common/text.h"

namespace gpudoctor {

std::string DescribeEvery(Duration every) {
  const auto days = std::chrono::duration_cast<std::chrono::hours>(every).count() / 24;
  if (days <= 0) return FormatDuration(every);
  return std::to_string(days) + (days == 1 ? " day" : " days");
}

const MaintenanceTask* FindMaintenanceTask(const std::vector<MaintenanceTask>& schedule, std::string_view name) {
  auto it = std::find_if(schedule.begin(), schedule.end(), [&](const MaintenanceTask& task) { return task.name == name; });
  return it == schedule.end() ? nullptr : &*it;
}

std::optional<WallTime> MaintenanceStatus::last_done() const {
  if (last_recorded && driver_built_at) return std::max(*last_recorded, *driver_built_at);
  return last_recorded ? last_recorded : driver_built_at;
}

std::optional<WallTime> MaintenanceStatus::due() const {
  std::optional<WallTime> last = last_done();
  if (!last) return std::nullopt;
  return *last + std::chrono::duration_cast<WallTime::duration>(task->every);
}

bool MaintenanceStatus::OverdueAt(WallTime now) const {
  std::optional<WallTime> when = due();
  return when && now > *when;
}

MaintenanceStatus StatusOf(const MaintenanceTask& task, const std::vector<MaintenanceDone>& records,
                           std::optional<WallTime> driver_built_at) {
  MaintenanceStatus status{.task = &task};
  for (const MaintenanceDone& record : records)
    if (record.task == task.name && (!status.last_recorded || record.done_at > *status.last_recorded))
      status.last_recorded = record.done_at;
  if (task.name == kDriverAndFirmwareTask) status.driver_built_at = driver_built_at;
  return status;
}

std::optional<uint32_t> HealthyGpuCount(const Snapshot& snapshot, const HostSignals& host) {
  if (snapshot.driver_error != AccessError::kNone || snapshot.gpus.empty()) return std::nullopt;
  if (snapshot.source.starts_with("simulate:")) return std::nullopt;
  const auto count = static_cast<uint32_t>(snapshot.gpus.size());
  if (snapshot.device_count.has_value() && snapshot.device_count.value() != count) return std::nullopt;
  for (const GpuSnapshot& gpu : snapshot.gpus)
    if (gpu.access_error != AccessError::kNone) return std::nullopt;
  if (host.pci_gpus.has_value() && !host.pci_gpus.value().empty() && host.pci_gpus.value().size() != count)
    return std::nullopt;
  return count;
}

}  // namespace gpudoctor
