#include "diag/diag_run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>

#include "common/text.h"

extern char** environ;

namespace gpudoctor {

extern const char kMemtestPtx[];  // memtest_kernels.cu as PTX; empty when built without clang

namespace {

using json = nlohmann::ordered_json;
using SteadyClock = std::chrono::steady_clock;

std::atomic<bool> g_worker_stop{false};

void OnStopSignal(int) { g_worker_stop.store(true); }

void WriteLine(int fd, const json& line) {
  std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  for (size_t written = 0; written < text.size();) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent went away: nothing more to tell
    written += static_cast<size_t>(n);
  }
}

json ResultToJson(const MemtestResult& result) {
  json patterns = json::array();
  for (const MemtestPatternResult& pattern : result.patterns)
    patterns.push_back({{"name", pattern.name}, {"errors", pattern.errors}, {"gb_per_s", pattern.gb_per_s}});
  json errors = json::array();
  for (const MemtestError& error : result.errors) {
    errors.push_back({{"address", error.address},
                      {"expected", error.expected},
                      {"actual", error.actual},
                      {"pattern", error.pattern}});
  }
  return {{"device_name", result.device_name}, {"pci_bus_id", result.pci_bus_id},
          {"bytes_tested", result.bytes_tested}, {"passes", result.passes},
          {"error_count", result.error_count},   {"errors", errors},
          {"patterns", patterns},                {"copy_gb_per_s", result.copy_gb_per_s},
          {"interrupted", result.interrupted}};
}

MemtestResult ResultFromJson(const json& value) {
  MemtestResult result;
  result.device_name = value.value("device_name", "");
  result.pci_bus_id = value.value("pci_bus_id", "");
  result.bytes_tested = value.value("bytes_tested", uint64_t{0});
  result.passes = value.value("passes", 0);
  result.error_count = value.value("error_count", uint64_t{0});
  result.copy_gb_per_s = value.value("copy_gb_per_s", 0.0);
  result.interrupted = value.value("interrupted", false);
  for (const json& pattern : value.value("patterns", json::array())) {
    result.patterns.push_back({pattern.value("name", ""), pattern.value("errors", uint64_t{0}),
                               pattern.value("gb_per_s", 0.0)});
  }
  for (const json& error : value.value("errors", json::array())) {
    result.errors.push_back({error.value("address", uint64_t{0}), error.value("expected", 0u),
                             error.value("actual", 0u), error.value("pattern", "")});
  }
  return result;
}

struct Worker {
  int device = 0;
  pid_t pid = -1;
  int fd = -1;
  std::string pending;  // bytes of a line not yet ended
  SteadyClock::time_point last_heard;
  DiagOutcome outcome;
  bool done = false;  // a result or a failure arrived
};

Result<Worker> Spawn(const DiagRunOptions& options, int device) {
  DiagWorkerOptions worker_options = options.worker_options;
  worker_options.memtest.device = device;
  std::vector<std::string> arguments = {options.worker, "__diag-worker"};
  for (std::string& argument : DiagWorkerArguments(worker_options)) arguments.push_back(std::move(argument));
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) environment.emplace_back(*entry);
  for (const std::string& extra : options.extra_env) environment.push_back(extra);
  std::vector<char*> envp;
  for (std::string& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Error{fmt::format("pipe: {}", std::strerror(errno))};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  pid_t pid = -1;
  const int status = posix_spawn(&pid, options.worker.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (status != 0) {
    close(pipe_fds[0]);
    return Error{fmt::format("cannot start {}: {}", options.worker, std::strerror(status))};
  }
  Worker worker;
  worker.device = device;
  worker.pid = pid;
  worker.fd = pipe_fds[0];
  worker.last_heard = SteadyClock::now();
  worker.outcome.device = device;
  return worker;
}

void Take(Worker& worker, const std::string& line,
          const std::function<void(int, const MemtestProgress&)>& progress) {
  json value = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!value.is_object()) return;
  const std::string event = value.value("event", "");
  if (event == "progress") {
    if (progress) {
      progress(worker.device, {.pattern = value.value("pattern", ""),
                               .pass_fraction = value.value("fraction", 0.0),
                               .pass = value.value("pass", 1),
                               .gb_per_s = value.value("gb_per_s", 0.0)});
    }
  } else if (event == "result") {
    worker.done = true;
    worker.outcome.memtest = ResultFromJson(value.value("memtest", json::object()));
    const MemtestResult& result = *worker.outcome.memtest;
    if (result.error_count > 0) {
      worker.outcome.state = DiagState::kFaulty;
      worker.outcome.message = fmt::format("{} memory errors", result.error_count);
    } else {
      worker.outcome.state = result.interrupted ? DiagState::kInterrupted : DiagState::kPassed;
    }
  } else if (event == "failed") {
    worker.done = true;
    // A GPU that fails once its test has begun is the GPU's fault; one that
    // cannot start it (no driver, no memory) is not.
    worker.outcome.state = value.value("started", false) ? DiagState::kFaulty : DiagState::kCouldNotRun;
    worker.outcome.message = value.value("message", "");
  }
}

}  // namespace

const char* DiagStateName(DiagState state) {
  switch (state) {
    case DiagState::kPassed: return "passed";
    case DiagState::kFaulty: return "faulty";
    case DiagState::kHung: return "hung";
    case DiagState::kCouldNotRun: return "could_not_run";
    case DiagState::kInterrupted: return "interrupted";
  }
  return "could_not_run";
}

std::vector<std::string> DiagWorkerArguments(const DiagWorkerOptions& options) {
  std::vector<std::string> arguments = {
      "memtest",
      "--device", std::to_string(options.memtest.device),
      "--share", fmt::format("{}", options.memtest.free_share),
      "--chunk-bytes", std::to_string(options.memtest.chunk_bytes),
      "--duration-ms",
      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(options.memtest.duration).count())};
  if (!options.cuda_library.empty()) {
    arguments.push_back("--cuda");
    arguments.push_back(options.cuda_library);
  }
  for (const std::string& pattern : options.memtest.patterns) {
    arguments.push_back("--pattern");
    arguments.push_back(pattern);
  }
  return arguments;
}

Result<DiagWorkerOptions> ParseDiagWorkerArguments(const std::vector<std::string>& arguments) {
  DiagWorkerOptions options;
  if (arguments.empty() || arguments[0] != "memtest") return Error{"__diag-worker: the test must be memtest"};
  for (size_t i = 1; i < arguments.size(); ++i) {
    const std::string& name = arguments[i];
    if (i + 1 >= arguments.size()) return Error{fmt::format("__diag-worker: {} needs a value", name)};
    const std::string& value = arguments[++i];
    if (name == "--device") {
      auto device = ParseInt<int>(value);
      if (!device) return Error{"__diag-worker: bad --device"};
      options.memtest.device = *device;
    } else if (name == "--share") {
      options.memtest.free_share = std::strtod(value.c_str(), nullptr);
    } else if (name == "--chunk-bytes") {
      auto bytes = ParseInt<uint64_t>(value);
      if (!bytes) return Error{"__diag-worker: bad --chunk-bytes"};
      options.memtest.chunk_bytes = *bytes;
    } else if (name == "--duration-ms") {
      auto ms = ParseInt<int64_t>(value);
      if (!ms) return Error{"__diag-worker: bad --duration-ms"};
      options.memtest.duration = std::chrono::milliseconds(*ms);
    } else if (name == "--cuda") {
      options.cuda_library = value;
    } else if (name == "--pattern") {
      options.memtest.patterns.push_back(value);
    } else {
      return Error{fmt::format("__diag-worker: unknown option {}", name)};
    }
  }
  return options;
}

int RunMemtestWorker(const DiagWorkerOptions& options, int out_fd) {
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  auto cuda = CudaDriver::Load(options.cuda_library);
  if (!cuda) {
    WriteLine(out_fd, {{"event", "failed"}, {"started", false}, {"message", cuda.error().message}});
    return 1;
  }
  bool started = false;
  auto result = RunMemtest(
      **cuda, kMemtestPtx, options.memtest,
      [&](const MemtestProgress& progress) {
        started = true;
        WriteLine(out_fd, {{"event", "progress"},
                           {"pattern", progress.pattern},
                           {"fraction", progress.pass_fraction},
                           {"pass", progress.pass},
                           {"gb_per_s", progress.gb_per_s}});
      },
      [] { return g_worker_stop.load(); });
  if (!result) {
    WriteLine(out_fd, {{"event", "failed"}, {"started", started}, {"message", result.error().message}});
    return 1;
  }
  WriteLine(out_fd, {{"event", "result"}, {"memtest", ResultToJson(*result)}});
  return 0;
}

std::vector<DiagOutcome> RunDiagWorkers(const DiagRunOptions& options,
                                        const std::function<void(int, const MemtestProgress&)>& progress,
                                        const std::function<bool()>& stop) {
  std::vector<Worker> workers;
  std::vector<DiagOutcome> outcomes;
  for (int device : options.devices) {
    Result<Worker> worker = Spawn(options, device);
    if (!worker) {
      outcomes.push_back({.device = device, .state = DiagState::kCouldNotRun, .message = worker.error().message});
      continue;
    }
    workers.push_back(std::move(*worker));
  }
  bool stopping = false;
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Worker*> polled;
    for (Worker& worker : workers) {
      if (worker.fd < 0) continue;
      fds.push_back({worker.fd, POLLIN, 0});
      polled.push_back(&worker);
    }
    if (fds.empty()) break;
    poll(fds.data(), fds.size(), 200);
    const auto now = SteadyClock::now();
    if (!stopping && stop && stop()) {
      stopping = true;  // the workers free their memory and report what they did
      for (Worker& worker : workers)
        if (worker.fd >= 0) kill(worker.pid, SIGTERM);
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      Worker& worker = *polled[i];
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buffer[65536];
        const ssize_t n = read(worker.fd, buffer, sizeof buffer);
        if (n > 0) {
          worker.last_heard = now;
          worker.pending.append(buffer, static_cast<size_t>(n));
          for (size_t end; (end = worker.pending.find('\n')) != std::string::npos;) {
            Take(worker, worker.pending.substr(0, end), progress);
            worker.pending.erase(0, end + 1);
          }
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        close(worker.fd);  // the worker ended
        worker.fd = -1;
        continue;
      }
      if (now - worker.last_heard > options.stall_timeout) {
        kill(worker.pid, SIGKILL);
        close(worker.fd);
        worker.fd = -1;
        worker.done = true;
        worker.outcome.state = DiagState::kHung;
        worker.outcome.message = fmt::format(
            "no answer from the GPU for {}: a kernel or driver call never returned (the worker was ended)",
            FormatDuration(options.stall_timeout));
      }
    }
  }
  for (Worker& worker : workers) {
    int status = 0;
    while (waitpid(worker.pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!worker.done) {
      worker.outcome.state = DiagState::kCouldNotRun;
      worker.outcome.message = WIFSIGNALED(status)
                                   ? fmt::format("the diagnostic worker died of signal {}", WTERMSIG(status))
                                   : fmt::format("the diagnostic worker exited {} without a result", WEXITSTATUS(status));
    }
    outcomes.push_back(std::move(worker.outcome));
  }
  std::sort(outcomes.begin(), outcomes.end(), [](const DiagOutcome& a, const DiagOutcome& b) { return a.device < b.device; });
  return outcomes;
}

}  // namespace gpudoctor
