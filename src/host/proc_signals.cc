#include <re2/re2.h>

#include <algorithm>
#include <optional>
#include <set>

#include "common/text.h"
#include "host/host_parsers.h"
#include "host/readers.h"

namespace gpudoctor::host_internal {
namespace {

constexpr std::string_view kCmdlinePrefix = "cmdline:";
constexpr size_t kCommNameLength = 15;  // the kernel truncates comm to 15 characters

struct ProcessEntry {
  ProcStat stat;
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
    ProcessEntry process{std::move(*stat), {}};
    if (with_cmdlines) {
      Result<std::string> cmdline = env.ReadFile(dir + "/cmdline");
      if (cmdline) process.argv = SplitCmdline(*cmdline);
    }
    processes.push_back(std::move(process));
  }
  std::sort(processes.begin(), processes.end(),
            [](const ProcessEntry& a, const ProcessEntry& b) { return a.stat.pid < b.stat.pid; });
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
  if (process.stat.name == pattern.substr(0, kCommNameLength)) return true;
  if (process.argv.empty()) return false;
  std::string_view program = process.argv.front();
  size_t slash = program.rfind('/');
  if (slash != std::string_view::npos) program.remove_prefix(slash + 1);
  return program == pattern;
}

// gpudoctor itself: this process, its children (the NVML probes) and any
// other process of the same name (another command's probe). They sleep in the
// kernel while they read what they judge, so they never count as blocked.
class OwnProcesses {
 public:
  explicit OwnProcesses(const HostEnv& env) {
    if (Result<std::string> text = env.ReadFile("/proc/self/stat", 4096))
      if (Result<ProcStat> self = ParseProcStat(*text)) self_ = std::move(*self);
  }
  bool Contains(const ProcStat& process) const {
    if (!self_) return false;
    return process.pid == self_->pid || process.parent_pid == self_->pid || process.name == self_->name;
  }

 private:
  std::optional<ProcStat> self_;
};

bool IsNvidiaDevice(std::string_view path) { return StartsWith(path, "/dev/nvidia"); }

// The NVIDIA device files `pid` holds open ("/dev/nvidia0 open"), read
// through /proc/PID/fd; nothing when that is not readable (another user's task).
void AddOpenNvidiaDevices(const HostEnv& env, const std::string& dir, std::vector<std::string>& ties) {
  constexpr size_t kMaxDescriptors = 65536;  // a bound on the work for one task
  Result<std::vector<DirEntry>> descriptors = env.ListDir(dir + "/fd");
  if (!descriptors) return;
  std::set<std::string> devices;
  for (size_t i = 0; i < descriptors->size() && i < kMaxDescriptors; ++i) {
    Result<std::string> target = env.ReadLink(dir + "/fd/" + (*descriptors)[i].name);
    if (target && IsNvidiaDevice(*target)) devices.insert(*target);
  }
  for (const std::string& device : devices) ties.push_back(device + " open");
}

// A wait channel that is a function of the NVIDIA modules (nvidia.ko's
// nv_* / _nv000123rm symbols, nvidia-uvm's uvm_*). wchan names no module, so
// this is by name; /proc/PID/stack names it for certain.
bool IsNvidiaFunction(std::string_view function) {
  static const RE2 kNvidiaSymbol(R"(^(?:nvidia|_?nv[_0-9]|uvm_))");
  return RE2::PartialMatch(function, kNvidiaSymbol);
}

// The first frame of /proc/PID/stack (root only) in an NVIDIA module:
// "[<0>] os_acquire_mutex+0x1c/0x40 [nvidia]" -> "os_acquire_mutex".
std::optional<std::string> NvidiaStackFrame(const HostEnv& env, const std::string& dir) {
  static const RE2 kFrame(R"((?m)^\[<[0-9a-f]+>\]\s+([A-Za-z0-9_.]+)\+\S*\s+\[nvidia[\w-]*\])");
  Result<std::string> stack = env.ReadFile(dir + "/stack", 64 * 1024);
  std::string function;
  if (stack && RE2::PartialMatch(*stack, kFrame, &function)) return function;
  return std::nullopt;
}

BlockedTask DescribeBlockedTask(const HostEnv& env, const ProcStat& stat) {
  const std::string dir = "/proc/" + std::to_string(stat.pid);
  BlockedTask task{.pid = stat.pid, .start_time_ticks = stat.start_time_ticks, .name = stat.name};
  if (Result<std::string> status = env.ReadFile(dir + "/status", 16 * 1024))
    if (Result<uint64_t> switches = ParseContextSwitches(*status)) task.context_switches = *switches;
  Result<std::string> wchan = env.ReadFile(dir + "/wchan", 256);
  if (wchan && Trim(*wchan) != "0") task.wait_channel = std::string(Trim(*wchan));
  AddOpenNvidiaDevices(env, dir, task.nvidia_ties);
  if (std::optional<std::string> frame = NvidiaStackFrame(env, dir)) {
    task.nvidia_ties.push_back("kernel stack in nvidia: " + *frame);
  } else if (IsNvidiaFunction(task.wait_channel)) {
    task.nvidia_ties.push_back("waits in nvidia function " + task.wait_channel);
  }
  return task;
}

std::vector<BlockedTask> BlockedTasks(const HostEnv& env, const std::vector<ProcessEntry>& processes) {
  const OwnProcesses own(env);
  std::vector<BlockedTask> blocked;
  for (const ProcessEntry& process : processes)
    if (process.stat.state == 'D' && !own.Contains(process.stat)) blocked.push_back(DescribeBlockedTask(env, process.stat));
  return blocked;
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
        if (Matches(process, pattern)) pids.push_back(process.stat.pid);
      presence.pids = Field<std::vector<uint32_t>>::Value(std::move(pids));
    }
    signals.processes.push_back(std::move(presence));
  }

  if (!processes) {
    signals.blocked_tasks = Field<std::vector<BlockedTask>>::Failed(processes.error().message);
    return;
  }
  signals.blocked_tasks = Field<std::vector<BlockedTask>>::Value(BlockedTasks(env, *processes));
}

Result<uint64_t> ParseCount(std::string_view text) {
  auto count = ParseInt<uint64_t>(text);
  if (!count) return Error{"not a number"};
  return *count;
}

}  // namespace

void ReadProcSignals(const HostConfig& config, const HostEnv& env, HostSignals& signals) {
  signals.load = ReadParsed<LoadAverage>(env, "/proc/loadavg", ParseLoadAverage);
  signals.cpu_pressure = ReadParsed<Pressure>(env, "/proc/pressure/cpu", ParsePressure);
  signals.memory_pressure = ReadParsed<Pressure>(env, "/proc/pressure/memory", ParsePressure);
  signals.io_pressure = ReadParsed<Pressure>(env, "/proc/pressure/io", ParsePressure);
  signals.memory = ReadParsed<MemoryInfo>(env, "/proc/meminfo", ParseMemInfo);
  signals.hung_task_reports = ReadParsed<uint64_t>(env, "/proc/sys/kernel/hung_task_detect_count", ParseCount);
  signals.hung_task_timeout_seconds =
      ReadParsed<uint64_t>(env, "/proc/sys/kernel/hung_task_timeout_secs", ParseCount);
  ReadProcesses(config, env, signals);
}

}  // namespace gpudoctor::host_internal
