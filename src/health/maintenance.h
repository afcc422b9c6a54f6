// Maintenance and the other facts the agent's history keeps about the host.
//
// The routine work the operators' guides of GPU servers ask for (dust
// cleaning monthly, power and cabling quarterly, driver and firmware every
// six months) is a schedule in the configuration ([maintenance.<task>] in
// data/rules.toml or a config file); when each task was last done comes from
// the agent's history (`gpudoctor maintenance done TASK`), and for the driver
// also from its build date. The rule maintenance_due reports what is overdue.
// The agent also keeps the GPU count of its first healthy sample, which
// gpu_count_mismatch expects when no count is configured.
//
//   const MaintenanceTask* task = FindMaintenanceTask(config.maintenance, "dust_cleaning");
//   MaintenanceStatus status = StatusOf(*task, records, driver_built_at);
//   if (status.OverdueAt(now)) ...
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "host/host_signals.h"
#include "model/snapshot.h"

namespace gpudoctor {

// The task whose last time also follows from the loaded driver's build date.
inline constexpr std::string_view kDriverAndFirmwareTask = "driver_and_firmware";

struct MaintenanceTask {
  std::string name;   // "dust_cleaning": what `maintenance done` takes
  std::string title;  // "Clean dust from the air filters, fans and heatsinks"
  Duration every{};
  bool operator==(const MaintenanceTask&) const = default;
};

// One time a task was done.
struct MaintenanceDone {
  std::string task;
  WallTime done_at;
  std::string note;
  bool operator==(const MaintenanceDone&) const = default;
};

// What the agent's history keeps about the host, for the rules that need it.
struct HostHistory {
  // Every maintenance record, in any order. nullopt: the caller does not
  // judge maintenance (the agent: overdue upkeep is a checklist matter).
  std::optional<std::vector<MaintenanceDone>> maintenance;
  std::optional<uint32_t> learned_gpu_count;  // the GPUs of the agent's first healthy sample
  WallTime gpu_count_learned_at;
};

// How often, as the schedule is read: "30 days", "1 day"; a schedule shorter than a day as a span ("12h").
std::string DescribeEvery(Duration every);

const MaintenanceTask* FindMaintenanceTask(const std::vector<MaintenanceTask>& schedule, std::string_view name);

// When a task was last done, as far as anything tells.
struct MaintenanceStatus {
  const MaintenanceTask* task = nullptr;
  std::optional<WallTime> last_recorded;    // the newest `maintenance done` record
  std::optional<WallTime> driver_built_at;  // driver_and_firmware only: the loaded driver's build date
  // The later of the two: a driver cannot have been installed before it was
  // built, and a record newer than the build says it was reviewed since.
  std::optional<WallTime> last_done() const;
  std::optional<WallTime> due() const;  // last_done() + every; nullopt: nothing tells
  bool OverdueAt(WallTime now) const;
};

MaintenanceStatus StatusOf(const MaintenanceTask& task, const std::vector<MaintenanceDone>& records,
                           std::optional<WallTime> driver_built_at);

// The GPU count a sample shows when it is healthy enough to learn as the
// host's expected count: the driver up, every GPU readable, and, when the
// PCI bus lists NVIDIA GPUs, as many there. nullopt for anything else,
// simulated GPUs included.
std::optional<uint32_t> HealthyGpuCount(const Snapshot& snapshot, const HostSignals& host);

}  // namespace gpudoctor
