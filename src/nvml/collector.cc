#include "nvml/collector.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <new>
#include <set>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "model/snapshot_json.h"
#include "nvml/probe.h"

extern char** environ;

namespace gpudoctor {
namespace {

using std::chrono::steady_clock;

// The tracker lives in an anonymous shared mapping the probe inherits as fd 3.
class SharedTracker {
 public:
  static std::unique_ptr<SharedTracker> Create() {
    int fd = memfd_create("gpudoctor-probe-tracker", MFD_CLOEXEC);
    if (fd < 0) return nullptr;
    if (ftruncate(fd, sizeof(CallTracker)) != 0) {
      close(fd);
      return nullptr;
    }
    void* memory = mmap(nullptr, sizeof(CallTracker), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (memory == MAP_FAILED) {
      close(fd);
      return nullptr;
    }
    auto tracker = std::unique_ptr<SharedTracker>(new SharedTracker());
    tracker->fd_ = fd;
    tracker->calls_ = new (memory) CallTracker();  // zero-filled by ftruncate
    return tracker;
  }
  ~SharedTracker() {
    if (calls_) munmap(calls_, sizeof(CallTracker));
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }
  const CallTracker& calls() const { return *calls_; }

 private:
  SharedTracker() = default;
  int fd_ = -1;
  CallTracker* calls_ = nullptr;
};

struct Pipe {
  int read = -1;
  int write = -1;
  bool Open() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    read = fds[0];
    write = fds[1];
    return true;
  }
  void CloseRead() {
    if (read >= 0) close(read);
    read = -1;
  }
  void CloseWrite() {
    if (write >= 0) close(write);
    write = -1;
  }
};

// A probe process that has not been reaped yet.
struct LiveProbe {
  pid_t pid = -1;
  std::set<uint32_t> stuck_gpus;        // GPUs whose reading it still owes
  bool stuck_in_host = false;           // stuck before any GPU (init, count)
  std::map<uint32_t, std::string> calls;  // the call each stuck GPU was inside
  std::map<uint32_t, std::string> pci;    // their PCI ids, when known
  std::string host_call;
  steady_clock::time_point started;
};

// True once the process has exited and been reaped (or is not ours).
bool Reap(pid_t pid) {
  int status = 0;
  pid_t r = waitpid(pid, &status, WNOHANG);
  return r == pid || (r < 0 && errno == ECHILD);
}

}  // namespace

struct NvmlCollector::State {
  CollectorOptions options;
  std::vector<LiveProbe> lingering;  // stuck probes, and finished ones not yet reaped
  Duration kill_stuck_after = std::chrono::minutes(5);
};

NvmlCollector::NvmlCollector(CollectorOptions options) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
}

NvmlCollector::~NvmlCollector() {
  // Never wait: a probe stuck in the driver may not die until the driver lets it.
  for (const auto& probe : state_->lingering) {
    kill(probe.pid, SIGKILL);
    Reap(probe.pid);
  }
}

Snapshot NvmlCollector::Collect() {
  const CollectorOptions& options = state_->options;
  const auto started = options.clock->Steady();
  Snapshot snapshot;
  snapshot.source = options.scenario_path.empty() ? "nvml" : "simulate:" + options.scenario_path;
  snapshot.taken_at = options.clock->Now();
  char hostname[256] = {};
  if (gethostname(hostname, sizeof hostname - 1) == 0) snapshot.hostname = hostname;
  auto finish = [&] {
    snapshot.collection_time = options.clock->Steady() - started;
    return snapshot;
  };

  // Forget probes that have exited; kill the ones stuck for too long.
  auto& lingering = state_->lingering;
  const auto now = steady_clock::now();
  lingering.erase(std::remove_if(lingering.begin(), lingering.end(),
                                 [&](const LiveProbe& probe) {
                                   if (Reap(probe.pid)) return true;
                                   if (now - probe.started > state_->kill_stuck_after) kill(probe.pid, SIGKILL);
                                   return false;
                                 }),
                  lingering.end());

  std::set<uint32_t> skip;
  for (const auto& probe : lingering) {
    if (probe.stuck_in_host) {
      // An older probe never got past NVML's start: another would only pile up behind it.
      snapshot.driver_error = AccessError::kHang;
      snapshot.driver_message = "an earlier probe is still stuck in " + probe.host_call;
      snapshot.hangs.push_back({std::nullopt, "", probe.host_call, options.deadline, true});
      return finish();
    }
    for (uint32_t gpu : probe.stuck_gpus) {
      skip.insert(gpu);
      auto pci = probe.pci.count(gpu) ? probe.pci.at(gpu) : "";
      snapshot.hangs.push_back({gpu, pci, probe.calls.at(gpu), options.deadline, true});
    }
  }

  auto tracker = SharedTracker::Create();
  Pipe out, err;
  if (!tracker || !out.Open() || !err.Open()) {
    snapshot.driver_error = AccessError::kOther;
    snapshot.driver_message = std::string("cannot start the NVML probe: ") + std::strerror(errno);
    out.CloseRead(), out.CloseWrite(), err.CloseRead(), err.CloseWrite();
    return finish();
  }

  // Prepare everything before spawning: the parent may be multi-threaded.
  std::vector<std::string> args = {options.probe_executable, "__probe"};
  if (!options.library_path.empty()) args.insert(args.end(), {"--nvml-lib", options.library_path});
  if (!skip.empty()) {
    std::string list;
    for (uint32_t gpu : skip) list += (list.empty() ? "" : ",") + std::to_string(gpu);
    args.insert(args.end(), {"--skip", list});
  }
  auto window_ms = std::chrono::duration_cast<std::chrono::milliseconds>(options.event_window).count();
  if (window_ms > 0) args.insert(args.end(), {"--event-window-ms", std::to_string(window_ms)});
  args.insert(args.end(), {"--tracker-fd", "3"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e; ++e)
    if (!StartsWith(*e, "GPUDOCTOR_SCENARIO=")) env_storage.emplace_back(*e);
  if (!options.scenario_path.empty()) env_storage.push_back("GPUDOCTOR_SCENARIO=" + options.scenario_path);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out.write, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err.write, STDERR_FILENO);
  posix_spawn_file_actions_adddup2(&actions, tracker->fd(), 3);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addclosefrom_np(&actions, 4);
  pid_t pid = -1;
  int spawn_error = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  out.CloseWrite();
  err.CloseWrite();
  if (spawn_error != 0) {
    snapshot.driver_error = AccessError::kOther;
    snapshot.driver_message = "cannot start the NVML probe " + args[0] + ": " + std::strerror(spawn_error);
    out.CloseRead(), err.CloseRead();
    return finish();
  }

  // Read JSON lines until "done", end of output, or the deadline.
  const auto deadline = steady_clock::now() + options.deadline;
  std::string buffer, stderr_text;
  bool host_seen = false, done = false;
  std::set<uint32_t> received;
  std::map<uint32_t, std::string> known_pci;
  auto handle_line = [&](std::string_view line) {
    auto message = nlohmann::json::parse(line, nullptr, false);
    if (message.is_discarded() || !message.is_object()) return;
    const std::string type = message.value("type", "");
    if (type == "host") {
      host_seen = true;
      auto host = SnapshotFromJson(message);
      if (host) {
        snapshot.driver_version = host->driver_version;
        snapshot.nvml_version = host->nvml_version;
        snapshot.cuda_driver_version = host->cuda_driver_version;
        snapshot.device_count = host->device_count;
      }
    } else if (type == "init_failed") {
      host_seen = true;
      done = true;
      snapshot.driver_error = AccessErrorFromName(message.value("access_error", "other")).value_or(AccessError::kOther);
      snapshot.driver_message = message.value("message", "NVML failed to initialise");
    } else if (type == "gpu_id") {
      known_pci[message.value("index", 0u)] = message.value("pci_bus_id", "");
    } else if (type == "gpu") {
      auto gpu = GpuFromJson(message["gpu"]);
      if (gpu) {
        received.insert(gpu->index);
        snapshot.gpus.push_back(std::move(*gpu));
      }
    } else if (type == "xid") {
      snapshot.xid_events.push_back({message.value("gpu_index", 0u), message.value("xid", uint64_t{0}),
                                     FromUnixMillis(message.value("time_ms", int64_t{0}))});
    } else if (type == "done") {
      done = true;
    }
  };
  bool out_open = true, err_open = true;
  while (!done && out_open) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady_clock::now()).count();
    if (left <= 0) break;
    pollfd fds[2] = {{out.read, POLLIN, 0}, {err_open ? err.read : -1, POLLIN, 0}};
    int ready = poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    char chunk[65536];
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = read(out.read, chunk, sizeof chunk);
      if (n > 0) {
        buffer.append(chunk, static_cast<size_t>(n));
        size_t start = 0, newline;
        while ((newline = buffer.find('\n', start)) != std::string::npos) {
          handle_line(std::string_view(buffer).substr(start, newline - start));
          start = newline + 1;
        }
        buffer.erase(0, start);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        out_open = false;
      }
    }
    if (err_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t n = read(err.read, chunk, sizeof chunk);
      if (n > 0 && stderr_text.size() < 16384) stderr_text.append(chunk, static_cast<size_t>(n));
      else if (n <= 0) err_open = false;
    }
  }
  out.CloseRead();
  err.CloseRead();

  LiveProbe probe;
  probe.pid = pid;
  probe.started = steady_clock::now();
  const std::string probe_stderr(Trim(stderr_text));
  if (!host_seen) {
    // Stuck (or died) before NVML answered anything.
    std::string call = NvmlCallName(tracker->calls().host_call.load());
    if (!out_open && call.empty()) {
      snapshot.driver_error = AccessError::kOther;
      snapshot.driver_message = "the NVML probe exited without an answer" +
                                (probe_stderr.empty() ? std::string() : ": " + probe_stderr);
    } else {
      if (call.empty()) call = "nvmlInit_v2";
      snapshot.driver_error = AccessError::kHang;
      snapshot.driver_message = "NVML did not answer within " + FormatDuration(options.deadline) + " (stuck in " + call + ")";
      snapshot.hangs.push_back({std::nullopt, "", call, options.deadline, false});
      probe.stuck_in_host = true;
      probe.host_call = call;
    }
  } else if (!done) {
    const uint32_t count = snapshot.device_count.value_or(0);
    for (uint32_t index = 0; index < count; ++index) {
      if (received.count(index) || skip.count(index)) continue;
      std::string call = index < CallTracker::kMaxGpus ? NvmlCallName(tracker->calls().gpu_call[index].load()) : "";
      if (call.empty()) call = "unknown call";
      std::string pci = known_pci.count(index) ? known_pci[index] : "";
      snapshot.hangs.push_back({index, pci, call, options.deadline, false});
      probe.stuck_gpus.insert(index);
      probe.calls[index] = call;
      probe.pci[index] = pci;
    }
    if (probe.stuck_gpus.empty() && !out_open) {
      // The probe died mid-way (a crash inside the driver library).
      snapshot.driver_message = "the NVML probe exited early" + (probe_stderr.empty() ? "" : ": " + probe_stderr);
    }
  }
  if (snapshot.driver_error != AccessError::kNone && snapshot.driver_error != AccessError::kHang &&
      !probe_stderr.empty() && snapshot.driver_message.find(probe_stderr) == std::string::npos) {
    snapshot.driver_message += " (" + probe_stderr + ")";
  }

  // GPUs that are stuck, now or from before, still appear, so no GPU vanishes from view.
  for (const auto& hang : snapshot.hangs) {
    if (!hang.gpu_index || snapshot.FindGpu(*hang.gpu_index)) continue;
    GpuSnapshot gpu;
    gpu.index = *hang.gpu_index;
    gpu.access_error = AccessError::kHang;
    gpu.access_message = "NVML did not answer within " + FormatDuration(hang.deadline) + " (stuck in " + hang.call + ")";
    if (!hang.pci_bus_id.empty()) gpu.pci_bus_id = Field<std::string>::Value(hang.pci_bus_id);
    snapshot.gpus.push_back(std::move(gpu));
  }
  std::sort(snapshot.gpus.begin(), snapshot.gpus.end(),
            [](const GpuSnapshot& a, const GpuSnapshot& b) { return a.index < b.index; });

  if (!Reap(pid)) {
    // A finished probe is still shutting NVML down, or a stuck one is inside the
    // driver. Either way it is reaped later; stuck GPUs are skipped until then.
    if (!probe.stuck_in_host && probe.stuck_gpus.empty()) kill(pid, SIGKILL);
    lingering.push_back(std::move(probe));
  }
  return finish();
}

}  // namespace gpudoctor
