// The upkeep schedule (health/maintenance.h): which tasks are overdue.
#include "common/text.h"
#include "health/rule_context.h"

namespace gpudoctor::rules_internal {
namespace {

std::string Day(WallTime time) { return FormatIsoUtc(time).substr(0, 10); }

// "45 days ago", "today"
std::string Ago(WallTime then, WallTime now) {
  const auto days = std::chrono::duration_cast<std::chrono::hours>(now - then).count() / 24;
  return days <= 0 ? "today" : Plural(static_cast<size_t>(days), "day", "days") + " ago";
}

// The loaded driver's build date, when known.
std::optional<WallTime> DriverBuiltAt(const RuleContext& context) {
  const HostSignals* host = context.GpuHost();
  if (host == nullptr || !host->nvidia_driver_built_at.has_value()) return std::nullopt;
  return host->nvidia_driver_built_at.value();
}

// What the status says, for the summary: "last done 45 days ago", "driver built 200 days ago".
std::string Said(const MaintenanceStatus& status, WallTime now) {
  std::optional<WallTime> last = status.last_done();
  if (!last) return "never recorded";
  return (last == status.last_recorded ? "last done " : "driver built ") + Ago(*last, now);
}

std::vector<std::string> Evidence(const MaintenanceStatus& status, WallTime now) {
  const MaintenanceTask& task = *status.task;
  std::vector<std::string> evidence{fmt::format("schedule: {} every {}", task.title, DescribeEvery(task.every))};
  if (status.last_recorded) {
    evidence.push_back(fmt::format("last recorded: {} ({})", Day(*status.last_recorded), Ago(*status.last_recorded, now)));
  } else {
    evidence.push_back(
        fmt::format("no record in the agent's history (gpudoctor maintenance done {} records it)", task.name));
  }
  if (status.driver_built_at) {
    evidence.push_back(fmt::format("the loaded driver was built {} ({})", Day(*status.driver_built_at),
                                   Ago(*status.driver_built_at, now)));
  }
  return evidence;
}

}  // namespace

void MaintenanceDue(RuleContext& context) {
  const HostHistory* history = context.input.host_history;
  const std::vector<MaintenanceTask>& schedule = context.config.maintenance;
  if (schedule.empty()) return;
  if (history == nullptr || !history->maintenance) {
    context.Unchecked("maintenance_due",
                      "upkeep is judged on a live run, from the agent's history (--db names one for other inputs)");
    return;
  }
  const WallTime now = context.input.now;
  const std::optional<WallTime> driver_built_at = DriverBuiltAt(context);
  std::vector<std::string> fine, never;
  bool overdue = false;
  for (const MaintenanceTask& task : schedule) {
    MaintenanceStatus status = StatusOf(task, *history->maintenance, driver_built_at);
    if (status.OverdueAt(now)) {
      Finding& finding = context.Report(
          "maintenance_due", Severity::kWarning, std::nullopt,
          fmt::format("{} overdue: {}, due every {}", task.title, Said(status, now), DescribeEvery(task.every)),
          Evidence(status, now));
      finding.subject = task.name;  // each task is its own incident
      overdue = true;
    } else {
      fine.push_back(task.name + ": " + Said(status, now));
      if (!status.last_done()) never.push_back(task.name);
    }
  }
  if (overdue) return;
  if (never.size() == schedule.size()) {
    context.Unchecked("maintenance_due",
                      "no maintenance recorded (gpudoctor maintenance done TASK) and the driver's build date unknown");
    return;
  }
  context.Pass("maintenance_due",
               never.empty() ? "Maintenance up to date"
                             : "No maintenance overdue; never recorded: " + JoinWithAnd(never),
               std::move(fine));
}

}  // namespace gpudoctor::rules_internal
