// Rules about the host around the GPUs: storage, processes, backups, memory
// and pressure (hung tasks: rules_hung_tasks.cc).
#include <algorithm>

#include "common/text.h"
#include "health/rule_context.h"

namespace gpudoctor::rules_internal {
namespace {

double Percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? 100.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

void DiskSpace(RuleContext& context) {
  const HostSignals* host = context.input.host;
  if (host == nullptr || host->disks.empty()) return;
  const auto& config = context.thresholds.disk_space;
  bool reported = false;
  std::vector<std::string> lines;
  for (const DiskUsage& disk : host->disks) {
    if (disk.space.failed()) {
      context.Report("disk_space", Severity::kWarning, std::nullopt,
                     fmt::format("Cannot check free space on {}", disk.path), {disk.space.error()});
      reported = true;
      continue;
    }
    if (!disk.space.has_value() || disk.space.value().total_bytes == 0) continue;
    const FileSystemSpace& space = disk.space.value();
    const double free_bytes = Percent(space.available_bytes, space.total_bytes);
    const double free_inodes = space.total_inodes > 0 ? Percent(space.available_inodes, space.total_inodes) : 100.0;
    const bool inodes_worse = free_inodes < free_bytes;
    const double free = std::min(free_bytes, free_inodes);
    std::string line = fmt::format("{}: {} free of {} ({}%)", disk.path, FormatBytes(space.available_bytes),
                                   FormatBytes(space.total_bytes), FormatNumber(free_bytes));
    if (space.total_inodes > 0) line += fmt::format(", {}% of inodes free", FormatNumber(free_inodes));
    lines.push_back(line);
    Severity severity = free < config.critical_free_percent  ? Severity::kCritical
                        : free < config.warning_free_percent ? Severity::kWarning
                                                             : Severity::kOk;
    if (severity == Severity::kOk) continue;
    context.Report(
        "disk_space", severity, std::nullopt,
        fmt::format("{} has only {}% of its {} free", disk.path, FormatNumber(free), inodes_worse ? "inodes" : "space"),
        {line, fmt::format("warning below {}%, critical below {}%", FormatNumber(config.warning_free_percent),
                           FormatNumber(config.critical_free_percent))});
    reported = true;
  }
  if (!reported && !lines.empty()) {
    std::string summary = fmt::format("Enough free space on {}", Plural(lines.size(), "file system", "file systems"));
    context.Pass("disk_space", std::move(summary), std::move(lines));
  }
}

void ProcessMissing(RuleContext& context) {
  const HostSignals* host = context.input.host;
  if (host == nullptr || host->processes.empty()) return;
  std::vector<std::string> running;
  bool reported = false;
  for (const ProcessPresence& process : host->processes) {
    if (process.pids.failed()) {
      context.Report("process_missing", Severity::kUnknown, std::nullopt,
                     fmt::format("Cannot tell whether {} is running", process.pattern), {process.pids.error()});
      reported = true;
      continue;
    }
    if (!process.pids.has_value()) continue;
    const std::vector<uint32_t>& pids = process.pids.value();
    if (!pids.empty()) {
      std::vector<std::string> ids;
      for (uint32_t pid : pids) ids.push_back(std::to_string(pid));
      running.push_back(fmt::format("{}: pid {}", process.pattern, JoinWithAnd(ids)));
      continue;
    }
    context.Report("process_missing", context.thresholds.process_missing.severity, std::nullopt,
                   fmt::format("{} is not running", process.pattern),
                   {fmt::format("no process matches '{}' in /proc", process.pattern)});
    reported = true;
  }
  if (!reported && !running.empty()) {
    std::string summary = AllOf(running.size(), "key process", "key processes") + " running";
    context.Pass("process_missing", std::move(summary), std::move(running));
  }
}

void BackupStale(RuleContext& context) {
  const HostSignals* host = context.input.host;
  if (host == nullptr || host->backups.empty()) return;
  const Duration max_age = context.thresholds.backup_stale.max_age;
  std::vector<std::string> fresh;
  bool reported = false;
  for (const BackupDirectory& backup : host->backups) {
    if (backup.scan.failed()) {
      context.Report("backup_stale", Severity::kWarning, std::nullopt,
                     fmt::format("Cannot read backup directory {}", backup.path), {backup.scan.error()});
      reported = true;
      continue;
    }
    if (!backup.scan.has_value()) continue;
    const BackupScan& scan = backup.scan.value();
    std::vector<std::string> evidence;
    if (scan.truncated) {
      evidence.push_back(fmt::format("scan stopped after {} files; newer files may lie beyond", scan.files_examined));
    }
    if (!scan.newest) {
      evidence.push_back(fmt::format("{} holds no files", backup.path));
      context.Report("backup_stale", Severity::kWarning, std::nullopt,
                     fmt::format("Backup directory {} is empty", backup.path), std::move(evidence));
      reported = true;
      continue;
    }
    const Duration age = std::max<Duration>(Duration::zero(), context.input.now - scan.newest->modified);
    evidence.insert(evidence.begin(), fmt::format("newest file: {}, modified {}", scan.newest->path,
                                                  FormatIsoUtc(scan.newest->modified)));
    if (age <= max_age) {
      fresh.push_back(fmt::format("{}: newest file {} old", backup.path, FormatSpan(age)));
      continue;
    }
    evidence.push_back(fmt::format("{} old, limit {}", FormatSpan(age), FormatSpan(max_age)));
    context.Report("backup_stale", Severity::kWarning, std::nullopt,
                   fmt::format("No new file in {} for {}", backup.path, FormatSpan(age)), std::move(evidence));
    reported = true;
  }
  if (!reported && !fresh.empty()) {
    context.Pass("backup_stale", fmt::format("Backups recent (newest file younger than {})", FormatSpan(max_age)),
                 std::move(fresh));
  }
}

void HostMemory(RuleContext& context) {
  const HostSignals* host = context.input.host;
  if (host == nullptr || !host->memory.has_value() || host->memory.value().total_bytes == 0) return;
  const MemoryInfo& memory = host->memory.value();
  const double available = Percent(memory.available_bytes, memory.total_bytes);
  std::vector<std::string> evidence{fmt::format("available: {} of {} ({}%)", FormatBytes(memory.available_bytes),
                                                FormatBytes(memory.total_bytes), FormatNumber(available))};
  if (memory.swap_total_bytes > 0) {
    evidence.push_back(
        fmt::format("swap used: {} of {}",
                    FormatBytes(memory.swap_total_bytes - std::min(memory.swap_free_bytes, memory.swap_total_bytes)),
                    FormatBytes(memory.swap_total_bytes)));
  }
  if (available < context.thresholds.host_memory.warning_available_percent) {
    context.Report("host_memory", Severity::kWarning, std::nullopt,
                   fmt::format("Only {}% of RAM available", FormatNumber(available)), std::move(evidence));
  } else {
    context.Pass("host_memory", fmt::format("{}% of RAM available", FormatNumber(available)), std::move(evidence));
  }
}

void HostPressure(RuleContext& context) {
  const HostSignals* host = context.input.host;
  if (host == nullptr) return;
  const auto& config = context.thresholds.host_pressure;
  struct Check {
    const Field<Pressure>& pressure;
    std::string_view resource;
    bool full;  // judge the "full" line (all tasks stalled) rather than "some"
    double limit;
  };
  const Check checks[] = {
      {host->memory_pressure, "memory", true, config.memory_full_avg60},
      {host->io_pressure, "I/O", true, config.io_full_avg60},
      {host->cpu_pressure, "CPU", false, config.cpu_some_avg60},
  };
  std::vector<std::string> evidence, stalled;
  size_t judged = 0;
  for (const Check& check : checks) {
    if (!check.pressure.has_value()) continue;
    const Pressure& pressure = check.pressure.value();
    const std::optional<PressureAverages> line = check.full ? pressure.full : std::optional(pressure.some);
    if (!line) continue;
    ++judged;
    evidence.push_back(fmt::format("{} pressure ({}): {}% of the last minute", check.resource,
                                   check.full ? "all tasks stalled" : "some task waiting", FormatNumber(line->avg60)));
    if (line->avg60 >= check.limit) stalled.push_back(std::string(check.resource));
  }
  if (judged == 0) return;
  if (host->load.has_value()) {
    const LoadAverage& load = host->load.value();
    evidence.push_back(fmt::format(
        "load average: {} {} {}{}", FormatNumber(load.one_minute), FormatNumber(load.five_minutes),
        FormatNumber(load.fifteen_minutes),
        host->online_cpus.has_value() ? fmt::format(" on {} CPUs", host->online_cpus.value()) : std::string()));
  }
  if (stalled.empty()) {
    context.Pass("host_pressure", "No memory, I/O or CPU pressure", std::move(evidence));
  } else {
    context.Report("host_pressure", Severity::kWarning, std::nullopt,
                   fmt::format("Host stalled on {}", JoinWithAnd(stalled)), std::move(evidence));
  }
}

}  // namespace gpudoctor::rules_internal
