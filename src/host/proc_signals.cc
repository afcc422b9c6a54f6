#include <algorithm>

#include "common/text.h"
#include "host/host_parsers.h"
#include "host/readers.h"

namespace gpudoctor::host_internal {
namespace {

constexpr std::string_view kCmdlinePrefix = "cmdline:";
constexpr size_t kCommNameLength = 15;  // the kernel truncates comm to 15 characters

struct ProcessEntry {
  uint32_t pid = 0;
  std::string name;  // comm
  char state = '?';
  std::vector<std::string> argv;  // read only when some pattern needs it
};

std::vector<std::string> SplitCmdline(std::string_view text) {
  std::vector<std::string> argv;
  for (std::string_view arg : Split(text, '\0'))
    if (!arg.empty()) argv.emplace_back(arg);
  return argv;
}

// Every process in /proc, or an error when /proc cannot be listed.
Result<std::vector<ProcessEntry>> ScanProcesses(const HostEnv& env, bool with_cmdlines) {
  Result<std::vector<DirEntry>> entries = env.ListDir("/proc");
  if (!entries) return entries.error();
  std::vector<ProcessEntry> processes;
  for (const DirEntry& entry : *entries) {
    auto pid = ParseInt<uint32_t>(entry.name);
    if (!pid) continue;
    const std::string dir = "/proc/" + entry.name;
    // A process may exit between the listing and the read: skip it quietly.
    Result<std::string> stat_text = env.ReadFile(dir + "/stat");
    if (!stat_text) continue;
    Result<ProcStat> stat = ParseProcStat(*stat_text);
    if (!stat) continue;
    ProcessEntry process{*pid, stat->name, stat->state, {}};
    if (with_cmdlines) {
      Result<std::string> cmdline = env.ReadFile(dir + "/cmdline");
      if (cmdline) process.argv = SplitCmdline(*cmdline);
    }
    processes.push_back(std::move(process));
  }
  std::sort(processes.begin(), processes.end(),
            [](const ProcessEntry& a, const ProcessEntry& b) { return a.pid < b.pid; });
  return processes;
}

bool Matches(const ProcessEntry& process, std::string_view pattern) {
  if (StartsWith(pattern, kCmdlinePrefix)) {
    std::string_view needle = pattern.substr(kCmdlinePrefix.size());
    std::string joined;
    for (const std::string& arg : process.argv) {
      if (!joined.empty()) joined += ' ';
      joined += arg;
    }
    return !needle.empty() && joined.find(needle) != std::string::npos;
  }
  if (process.name == pattern.substr(0, kCommNameLength)) return true;
  if (process.argv.empty()) return false;
  std::string_view program = process.argv.front();
  size_t slash = program.rfind('/');
  if (slash != std::string_view::npos) program.remove_prefix(slash + 1);
  return program == pattern;
}

void ReadProcesses(const HostConfig& config, const HostEnv& env, HostSignals& signals) {
  if (!env.Exists("/proc")) {
    for (const std::string& pattern : config.processes) signals.processes.push_back({pattern, {}});
    return;  // every field stays NotSupported
  }
  Result<std::vector<ProcessEntry>> processes = ScanProcesses(env, !config.processes.empty());
  for (const std::string& pattern : config.processes) {
    ProcessPresence presence{pattern, {}};
    if (!processes) {
      presence.pids = Field<std::vector<uint32_t>>::Failed(processes.error().message);
    } else {
      std::vector<uint32_t> pids;
      for (const ProcessEntry& process : *processes)
        if (Matches(process, pattern)) pids.push_back(process.pid);
      presence.pids = Field<std::vector<uint32_t>>::Value(std::move(pids));
    }
    signals.processes.push_back(std::move(presence));
  }

  if (!processes) {
    signals.blocked_tasks = Field<std::vector<BlockedTask>>::Failed(processes.error().message);
    return;
  }
  std::vector<BlockedTask> blocked;
  for (const ProcessEntry& process : *processes) {
    if (process.state != 'D') continue;
    BlockedTask task{process.pid, process.name, {}};
    Result<std::string> wchan = env.ReadFile("/proc/" + std::to_string(process.pid) + "/wchan", 256);
    if (wchan && Trim(*wchan) != "0") task.wait_channel = std::string(Trim(*wchan));
    blocked.push_back(std::move(task));
  }
  signals.blocked_tasks = Field<std::vector<BlockedTask>>::Value(std::move(blocked));
}

}  // namespace

void ReadProcSignals(const HostConfig& config, const HostEnv& env, HostSignals& signals) {
  signals.load = ReadParsed<LoadAverage>(env, "/proc/loadavg", ParseLoadAverage);
  signals.cpu_pressure = ReadParsed<Pressure>(env, "/proc/pressure/cpu", ParsePressure);
  signals.memory_pressure = ReadParsed<Pressure>(env, "/proc/pressure/memory", ParsePressure);
  signals.io_pressure = ReadParsed<Pressure>(env, "/proc/pressure/io", ParsePressure);
  signals.memory = ReadParsed<MemoryInfo>(env, "/proc/meminfo", ParseMemInfo);
  signals.hung_task_reports = ReadParsed<uint64_t>(env, "/proc/sys/kernel/hung_task_detect_count",
                                                   [](std::string_view text) -> Result<uint64_t> {
                                                     auto count = ParseInt<uint64_t>(text);
                                                     if (!count) return Error{"not a number"};
                                                     return *count;
                                                   });
  ReadProcesses(config, env, signals);
}

}  // namespace gpudoctor::host_internal
