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
#include <optional>
#include <set>


#include "common/text.h"
#include "nvml/probe.h"

extern char** environ;

namespace gpudoctor {
namespace {

using std::chrono::steady_clock;

// The probe gets its descriptors as 0-4. Every descriptor handed to it is
// first moved to 5 or above: in a parent started with some of 0-4 closed, a
// pipe could otherwise land on a number that an earlier dup2 of the spawn
// overwrites.
constexpr int kFirstFreeFd = 5;
int ClearOfProbeFds(int fd) {
  if (fd < 0 || fd >= kFirstFreeFd) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, kFirstFreeFd);
  const int saved = errno;
  close(fd);
  errno = saved;
  return moved;
}

// The tracker lives in an anonymous shared mapping the probe inherits as fd 3.
class SharedTracker {
 public:
  static std::unique_ptr<SharedTracker> Create() {
    int fd = ClearOfProbeFds(memfd_create("gpudoctor-probe-tracker", MFD_CLOEXEC));
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
    read = ClearOfProbeFds(fds[0]);
    write = ClearOfProbeFds(fds[1]);
    if (read >= 0 && write >= 0) return true;
    CloseRead();
    CloseWrite();
    return false;
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

// A running probe process and the pipes to it.
struct ProbeProcess {
  pid_t pid = -1;
  int input = -1;   // its stdin: requests
  int output = -1;  // its stdout: frames (nvml/probe_wire.h)
  int errors = -1;  // its stderr: diagnostics from the NVML library
  int rescue = -1;  // its fd 4: "rescue request N" (nvml/probe.h)
  uint32_t requests_sent = 0;
  std::unique_ptr<SharedTracker> tracker;
  ProbeFrameBuffer frames;  // kept between requests for its memory
  std::string stderr_text;

  void ClosePipes() {
    for (int* fd : {&input, &output, &errors, &rescue}) {
      if (*fd >= 0) close(*fd);
      *fd = -1;
    }
  }
};

// A probe that missed its deadline and has not exited yet. What it holds is read
// afresh from its tracker at every look, never kept from the deadline: a probe
// that was only slow (a loaded machine starting it) moves on, and then holds
// only the GPUs it is stuck in now, or nothing.
struct StuckProbe {
  pid_t pid = -1;
  std::unique_ptr<SharedTracker> tracker;
  std::string host_call;  // the call it was inside at the deadline, when that was before any GPU
  uint32_t progress = 0;  // the tracker's GPUs started at the last look
  steady_clock::time_point since;
};

// True once the process has exited and been reaped (or is not ours).
bool Reap(pid_t pid) {
  int status = 0;
  pid_t r = waitpid(pid, &status, WNOHANG);
  return r == pid || (r < 0 && errno == ECHILD);
}

// What an exiting probe wrote to stderr, waiting at most briefly for the end of it.
std::string DrainStderr(ProbeProcess& probe) {
  std::string text;
  const auto until = steady_clock::now() + std::chrono::milliseconds(200);
  while (probe.errors >= 0 && text.size() < 16384) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - steady_clock::now()).count();
    pollfd fd{probe.errors, POLLIN, 0};
    if (left <= 0 || poll(&fd, 1, static_cast<int>(left)) <= 0) break;
    char chunk[4096];
    ssize_t n = read(probe.errors, chunk, sizeof chunk);
    if (n <= 0) break;
    text.append(chunk, static_cast<size_t>(n));
  }
  return std::string(Trim(text));
}

void Discard(ProbeProcess& probe) {
  probe.ClosePipes();
  kill(probe.pid, SIGKILL);
  Reap(probe.pid);
}

}  // namespace

struct NvmlCollector::State {
  CollectorOptions options;
  std::optional<ProbeProcess> worker;  // answers requests while it stays healthy
  std::vector<StuckProbe> stuck;
  std::vector<pid_t> exiting;          // killed, waiting to be reaped
  Duration kill_stuck_after = std::chrono::minutes(5);

  Result<ProbeProcess> Spawn() const;
};

Result<ProbeProcess> NvmlCollector::State::Spawn() const {
  ProbeProcess probe;
  probe.tracker = SharedTracker::Create();
  Pipe in, out, err, rescue;
  if (!probe.tracker || !in.Open() || !out.Open() || !err.Open() || !rescue.Open()) {
    std::string why = std::strerror(errno);
    for (Pipe* pipe : {&in, &out, &err, &rescue}) pipe->CloseRead(), pipe->CloseWrite();
    return Error{"cannot start the NVML probe: " + why};
  }
  // Everything is prepared before spawning: the parent may be multi-threaded.
  std::vector<std::string> args = {options.probe_executable, "__probe", "--tracker-fd", "3", "--rescue-fd", "4",
                                   "--parent-pid", std::to_string(getpid())};
  if (!options.library_path.empty()) args.insert(args.end(), {"--nvml-lib", options.library_path});
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
  posix_spawn_file_actions_adddup2(&actions, in.read, STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out.write, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err.write, STDERR_FILENO);
  posix_spawn_file_actions_adddup2(&actions, probe.tracker->fd(), 3);
  posix_spawn_file_actions_adddup2(&actions, rescue.read, 4);
  posix_spawn_file_actions_addclosefrom_np(&actions, kFirstFreeFd);
  int spawn_error = posix_spawn(&probe.pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  in.CloseRead();
  out.CloseWrite();
  err.CloseWrite();
  rescue.CloseRead();
  probe.input = in.write;
  probe.output = out.read;
  probe.errors = err.read;
  probe.rescue = rescue.write;
  if (spawn_error != 0) {
    probe.ClosePipes();
    return Error{"cannot start the NVML probe " + args[0] + ": " + std::strerror(spawn_error)};
  }
  return probe;
}

NvmlCollector::NvmlCollector(CollectorOptions options) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
  // Writing a request to a probe that just died must be an error, not a signal that ends us.
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
}

NvmlCollector::~NvmlCollector() {
  // Never wait: a probe stuck in the driver may not die until the driver lets it.
  if (state_->worker) Discard(*state_->worker);
  for (const auto& probe : state_->stuck) {
    kill(probe.pid, SIGKILL);
    Reap(probe.pid);
  }
  for (pid_t pid : state_->exiting) Reap(pid);
}

Snapshot NvmlCollector::Collect() {
  Snapshot snapshot;
  CollectInto(snapshot);
  return snapshot;
}

void NvmlCollector::CollectInto(Snapshot& snapshot) {
  State& state = *state_;
  const CollectorOptions& options = state.options;
  const auto started = options.clock->Steady();
  // The GPUs already there are refilled in turn as frames arrive (their
  // memory reused); everything else starts afresh. `filled` counts the GPUs
  // of this snapshot, and the spare ones are dropped once all have arrived.
  std::vector<GpuSnapshot> spare = std::move(snapshot.gpus);
  snapshot = Snapshot{};
  snapshot.gpus = std::move(spare);
  size_t filled = 0;
  snapshot.source = options.scenario_path.empty() ? "nvml" : "simulate:" + options.scenario_path;
  snapshot.taken_at = options.clock->Now();
  char hostname[256] = {};
  if (gethostname(hostname, sizeof hostname - 1) == 0) snapshot.hostname = hostname;
  auto finish = [&] { snapshot.collection_time = options.clock->Steady() - started; };
  // For the ways out before the probe answers: no GPU of this snapshot was read.
  auto finish_unread = [&] {
    snapshot.gpus.clear();
    finish();
  };

  // Forget probes that have exited; kill the ones stuck for too long.
  const auto now = steady_clock::now();
  std::erase_if(state.exiting, [](pid_t pid) { return Reap(pid); });
  std::erase_if(state.stuck, [&](const StuckProbe& probe) {
    if (Reap(probe.pid)) return true;
    if (now - probe.since > state.kill_stuck_after) kill(probe.pid, SIGKILL);
    return false;
  });

  // What the stuck probes hold now. One that started a GPU since the last look
  // is moving, and holds nothing until it stops again.
  ProbeRequest request;
  request.event_window = options.event_window;
  for (StuckProbe& probe : state.stuck) {
    const CallTracker& calls = probe.tracker->calls();
    const uint32_t started = calls.gpus_started.load(std::memory_order_acquire);
    if (started != probe.progress) {
      probe.progress = started;
      continue;
    }
    if (started == 0) {
      // It never got past NVML's start: another probe would only pile up behind it.
      std::string call = NvmlCallName(calls.host_call.load());
      if (call.empty()) call = probe.host_call;
      snapshot.driver_error = AccessError::kHang;
      snapshot.driver_message = "an earlier probe is still stuck in " + call;
      snapshot.hangs.push_back({std::nullopt, "", call, options.deadline, true});
      finish_unread();
      return;
    }
    for (uint32_t gpu = 0; gpu < CallTracker::kMaxGpus; ++gpu) {
      std::string call = NvmlCallName(calls.gpu_call[gpu].load());
      if (call.empty() || !request.skip_gpus.insert(gpu).second) continue;
      snapshot.hangs.push_back({gpu, calls.gpu_pci[gpu].Load(), std::move(call), options.deadline, true});
    }
  }

  // Send the request, starting a probe when there is no healthy one. A probe
  // that died since the last request gets one replacement.
  const std::string request_frame = EncodeProbeMessage(request);
  std::string refused_stderr;  // what the last probe that refused the request said
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!state.worker) {
      auto spawned = state.Spawn();
      if (!spawned) {
        snapshot.driver_error = AccessError::kOther;
        snapshot.driver_message = spawned.error().message;
        finish_unread();
        return;
      }
      state.worker = std::move(*spawned);
    }
    if (write(state.worker->input, request_frame.data(), request_frame.size()) ==
        static_cast<ssize_t>(request_frame.size())) {
      ++state.worker->requests_sent;
      break;
    }
    // The probe closed its input, so it has exited or is exiting: keep what it said.
    refused_stderr = DrainStderr(*state.worker);
    Discard(*state.worker);
    state.worker.reset();
  }
  if (!state.worker) {
    snapshot.driver_error = AccessError::kOther;
    snapshot.driver_message = "the NVML probe exited before it accepted a request";
    if (!refused_stderr.empty()) snapshot.driver_message += " (" + refused_stderr + ")";
    finish_unread();
    return;
  }
  ProbeProcess& probe = *state.worker;

  // Read frames until ProbeDone, the end of output, or the deadline.
  const auto deadline = steady_clock::now() + options.deadline;
  ProbeFrameBuffer& frames = probe.frames;
  frames.Clear();
  bool host_seen = false, done = false, init_failed = false;
  auto handle = [&](ProbeMessage&& message) {
    if (auto* host = std::get_if<ProbeHost>(&message)) {
      host_seen = true;
      snapshot.driver_version = std::move(host->driver_version);
      snapshot.nvml_version = std::move(host->nvml_version);
      snapshot.cuda_driver_version = host->cuda_driver_version;
      snapshot.device_count = host->device_count;
      // The probe checks this too; the parent trusts no count it would loop over.
      if (snapshot.device_count.value_or(0) > kMaxGpuCount)
        snapshot.device_count.SetFailed(ImpossibleGpuCountMessage(snapshot.device_count.value()));
      const size_t expected = std::min<uint32_t>(snapshot.device_count.value_or(0), CallTracker::kMaxGpus);
      if (expected > snapshot.gpus.size()) snapshot.gpus.reserve(expected);
    } else if (auto* failed = std::get_if<ProbeInitFailed>(&message)) {
      host_seen = done = init_failed = true;
      snapshot.driver_error = failed->error == AccessError::kNone ? AccessError::kOther : failed->error;
      snapshot.driver_message = std::move(failed->message);
    } else if (auto* xid = std::get_if<XidEvent>(&message)) {
      snapshot.xid_events.push_back(*xid);
      snapshot.xid_events.back().time = options.clock->FromSystemTime(xid->time);  // the probe stamps system time
    } else if (std::holds_alternative<ProbeDone>(message)) {
      done = true;
    }
  };
  // The probe reads the GPUs one after another. When it starts no new GPU for
  // `patience`, it is asked to rescue the request: to read the GPUs left each
  // on a thread of its own and to send what it has at once. A rescue asked
  // for before the probe reached the GPUs does nothing, so any progress
  // since the last one allows another.
  const Duration patience = std::min<Duration>(std::chrono::milliseconds(100), options.deadline / 4);
  uint32_t progress = probe.tracker->calls().gpus_started.load(std::memory_order_acquire);
  auto progress_seen = steady_clock::now();
  bool rescued = false;  // since the last progress
  bool output_open = true;
  while (!done && output_open) {
    const auto now = steady_clock::now();
    if (uint32_t started = probe.tracker->calls().gpus_started.load(std::memory_order_acquire); started != progress) {
      progress = started;
      progress_seen = now;
      rescued = false;
    } else if (!rescued && now - progress_seen >= patience) {
      const uint32_t sequence = probe.requests_sent;
      rescued = write(probe.rescue, &sequence, sizeof sequence) == static_cast<ssize_t>(sizeof sequence);
      if (!rescued) progress_seen = now;  // the probe is going away; the output's end says so
    }
    auto until = rescued ? deadline : std::min(deadline, progress_seen + patience);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
    if (now >= deadline) break;
    pollfd fds[2] = {{probe.output, POLLIN, 0}, {probe.errors, POLLIN, 0}};
    int ready = poll(fds, 2, static_cast<int>(std::clamp<long long>(left + 1, 1, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = frames.ReadFrom(probe.output, 65536);
      if (n > 0) {
        ProbeMessage message;
        while (auto payload = frames.Next()) {
          // A frame that does not decode is skipped; the GPU it held shows up as missing.
          if (IsGpuSnapshotFrame(*payload)) {
            if (filled == snapshot.gpus.size()) snapshot.gpus.emplace_back();
            if (DecodeGpuSnapshot(*payload, snapshot.gpus[filled]).ok()) ++filled;
          } else if (DecodeProbeMessage(*payload, message).ok()) {
            handle(std::move(message));
          }
        }
        if (frames.corrupt()) output_open = false;
      } else if (n == 0 || errno != EINTR) {
        output_open = false;
      }
    }
    if (probe.errors >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      char chunk[4096];
      ssize_t n = read(probe.errors, chunk, sizeof chunk);
      if (n > 0 && probe.stderr_text.size() < 16384) probe.stderr_text.append(chunk, static_cast<size_t>(n));
      else if (n <= 0) {
        close(probe.errors);
        probe.errors = -1;
      }
    }
  }
  snapshot.gpus.resize(filled);  // the spare GPUs left over from the snapshot refilled
  const std::string probe_stderr(Trim(probe.stderr_text));

  if (done && !init_failed) {
    probe.stderr_text.clear();
  } else if (!host_seen && !output_open) {
    snapshot.driver_error = AccessError::kOther;
    snapshot.driver_message = "the NVML probe exited without an answer";
  } else if (!host_seen) {
    std::string call = NvmlCallName(probe.tracker->calls().host_call.load());
    if (call.empty()) call = "nvmlInit_v2";
    snapshot.driver_error = AccessError::kHang;
    snapshot.driver_message = "NVML did not answer within " + FormatDuration(options.deadline) + " (stuck in " + call + ")";
    snapshot.hangs.push_back({std::nullopt, "", call, options.deadline, false});
    state.stuck.push_back({probe.pid, std::move(probe.tracker), call, 0, steady_clock::now()});
  } else if (!done) {
    bool holds_gpus = false;
    const uint32_t count = snapshot.device_count.value_or(0);
    for (uint32_t index = 0; index < count; ++index) {
      if (snapshot.FindGpu(index) || request.skip_gpus.count(index)) continue;
      std::string call = index < CallTracker::kMaxGpus ? NvmlCallName(probe.tracker->calls().gpu_call[index].load()) : "";
      if (call.empty()) call = output_open ? "an NVML call" : "the probe process, which exited";
      std::string pci = index < CallTracker::kMaxGpus ? probe.tracker->calls().gpu_pci[index].Load() : "";
      snapshot.hangs.push_back({index, std::move(pci), std::move(call), options.deadline, false});
      holds_gpus = true;
    }
    if (holds_gpus && output_open) {
      const uint32_t started = probe.tracker->calls().gpus_started.load(std::memory_order_acquire);
      state.stuck.push_back({probe.pid, std::move(probe.tracker), "", started, steady_clock::now()});
    }
    if (!output_open) snapshot.driver_message = "the NVML probe exited early";
  }
  if (!snapshot.driver_message.empty() && !probe_stderr.empty() && snapshot.driver_error != AccessError::kHang)
    snapshot.driver_message += " (" + probe_stderr + ")";

  // The worker stays for the next request only while it answers completely.
  if (!(done && !init_failed)) {
    probe.ClosePipes();
    const bool is_stuck = !state.stuck.empty() && state.stuck.back().pid == probe.pid;
    if (!is_stuck) {
      kill(probe.pid, SIGKILL);
      if (!Reap(probe.pid)) state.exiting.push_back(probe.pid);
    }
    state.worker.reset();
  }

  // GPUs that are stuck, now or from before, still appear, so no GPU vanishes from view.
  for (const auto& hang : snapshot.hangs) {
    if (!hang.gpu_index || snapshot.FindGpu(*hang.gpu_index)) continue;
    GpuSnapshot gpu;
    gpu.index = *hang.gpu_index;
    gpu.MarkUnreadable(AccessError::kHang,
                       "NVML did not answer within " + FormatDuration(hang.deadline) + " (stuck in " + hang.call + ")");
    if (!hang.pci_bus_id.empty()) gpu.pci_bus_id = Field<std::string>::Value(hang.pci_bus_id);
    snapshot.gpus.push_back(std::move(gpu));
  }
  // GPUs usually arrive in order; sorting sorted GPUs would still move each one.
  auto by_index = [](const GpuSnapshot& a, const GpuSnapshot& b) { return a.index < b.index; };
  if (!std::is_sorted(snapshot.gpus.begin(), snapshot.gpus.end(), by_index))
    std::sort(snapshot.gpus.begin(), snapshot.gpus.end(), by_index);
  finish();
}

}  // namespace gpudoctor
