#include "diag/diag_run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/json_text.h"
#include "common/text.h"
#include "diag/progress_pulse.h"

extern char** environ;

namespace gpudoctor {

extern const char kMemtestPtx[];  // memtest_kernels.cu as PTX; empty when built without clang
extern const char kBurnPtx[];     // burn_kernels.cu as PTX

namespace {

using json = nlohmann::json;  // what the NLOHMANN_DEFINE macros of this version convert
using SteadyClock = std::chrono::steady_clock;

std::atomic<bool> g_worker_stop{false};

void OnStopSignal(int) { g_worker_stop.store(true); }

void WriteLine(int fd, const json& line) {
  std::string text = ToJsonText(line) + "\n";
  for (size_t written = 0; written < text.size();) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent went away: nothing more to tell
    written += static_cast<size_t>(n);
  }
}

double Seconds(Duration duration) { return std::chrono::duration<double>(duration).count(); }

// The worker's output: whole lines from the test's thread and the heartbeat's.
class WorkerOutput {
 public:
  explicit WorkerOutput(int fd) : fd_(fd) {}
  void Write(const json& line) {
    std::lock_guard lock(mutex_);
    WriteLine(fd_, line);
  }

 private:
  int fd_;
  std::mutex mutex_;
};

// Sends the pulse's count every kHeartbeatInterval from its own thread, so the
// parent hears how far the work got while a long kernel runs, or never returns.
class Heartbeat {
 public:
  explicit Heartbeat(WorkerOutput& out) : out_(out), thread_([this] { Loop(); }) {}
  ~Heartbeat() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  void Loop() {
    std::unique_lock lock(mutex_);
    while (!wake_.wait_for(lock, kHeartbeatInterval, [this] { return done_; })) {
      const PulseReading pulse = ProcessWorkPulse().Read();
      out_.Write({{"event", "heartbeat"}, {"units", pulse.units}, {"slowest_unit_s", Seconds(pulse.slowest_unit)}});
    }
  }

  WorkerOutput& out_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

// How results cross the pipe from the worker: every field by name, a missing
// one left at its default.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(MemtestError, address, expected, actual, pattern)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(MemtestPatternResult, name, errors, gb_per_s)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(MemtestResult, device_name, pci_bus_id, bytes_tested, passes,
                                                error_count, errors, patterns, copy_gb_per_s, interrupted)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(BurnError, precision, iteration, rows, cols, bad_rows, not_integer)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(BurnPrecisionResult, precision, engine, matrix, iterations,
                                                wrong_iterations, tflops, baseline_tflops)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(BurnResult, device_name, pci_bus_id, engine_note, precisions, errors,
                                                interrupted)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PcieLinkResult, device, device_name, pci_bus_id,
                                                host_to_device_gb_per_s, device_to_host_gb_per_s, data_intact, error)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PciePeerResult, from, to, peer_access, gb_per_s, data_intact, error)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PcieResult, links, peers, interrupted)

namespace {

struct Worker {
  std::vector<int> devices;
  pid_t pid = -1;
  int fd = -1;
  std::string pending;  // bytes of a line not yet ended
  StallWatch watch{Duration::zero(), SteadyClock::time_point{}};
  DiagOutcome outcome;
  bool done = false;  // a result or a failure arrived
};

DiagWorkerOptions ForDevices(DiagWorkerOptions options, const std::vector<int>& devices) {
  options.memtest.device = devices.front();
  options.burn.device = devices.front();
  options.pcie.devices = devices;
  return options;
}

Result<Worker> Spawn(const DiagRunOptions& options, const std::vector<int>& devices) {
  std::vector<std::string> arguments = {options.worker, "__diag-worker"};
  for (std::string& argument : DiagWorkerArguments(ForDevices(options.worker_options, devices)))
    arguments.push_back(std::move(argument));
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  std::vector<std::string> environment;
  // CUDA numbers the GPUs as the parent says (CUDA_DEVICE_ORDER in extra_env),
  // never through a CUDA_VISIBLE_DEVICES the user's shell happens to carry.
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view variable(*entry);
    if (variable.starts_with("CUDA_VISIBLE_DEVICES=") || variable.starts_with("CUDA_DEVICE_ORDER=")) continue;
    environment.emplace_back(variable);
  }
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
  worker.devices = devices;
  worker.pid = pid;
  worker.fd = pipe_fds[0];
  worker.watch = StallWatch(options.stall_timeout, SteadyClock::now());
  worker.outcome.test = options.worker_options.test;
  worker.outcome.devices = devices;
  return worker;
}

// The worker's own verdict on what it measured.
void Judge(DiagOutcome& outcome) {
  bool interrupted = false;
  if (outcome.memtest) {
    interrupted = outcome.memtest->interrupted;
    if (outcome.memtest->error_count > 0) {
      outcome.state = DiagState::kFaulty;
      outcome.message = fmt::format("{} memory errors", outcome.memtest->error_count);
      return;
    }
  } else if (outcome.burn) {
    interrupted = outcome.burn->interrupted;
    int wrong = 0;
    for (const BurnPrecisionResult& precision : outcome.burn->precisions) wrong += precision.wrong_iterations;
    if (wrong > 0) {
      outcome.state = DiagState::kFaulty;
      outcome.message = fmt::format("{} wrong matrix product{}", wrong, wrong == 1 ? "" : "s");
      return;
    }
  } else if (outcome.pcie) {
    interrupted = outcome.pcie->interrupted;
    std::string broken;
    for (const PcieLinkResult& link : outcome.pcie->links) {
      if (!link.error.empty()) broken += fmt::format("; GPU {}: {}", link.device, link.error);
      else if (!link.data_intact) broken += fmt::format("; GPU {}: data changed on the way", link.device);
    }
    for (const PciePeerResult& peer : outcome.pcie->peers) {
      if (!peer.error.empty()) broken += fmt::format("; GPU {}->{}: {}", peer.from, peer.to, peer.error);
      else if (!peer.data_intact) broken += fmt::format("; GPU {}->{}: data changed on the way", peer.from, peer.to);
    }
    if (!broken.empty()) {
      outcome.state = DiagState::kFaulty;
      outcome.message = broken.substr(2);
      return;
    }
  }
  outcome.state = interrupted ? DiagState::kInterrupted : DiagState::kPassed;
}

void Take(Worker& worker, std::string_view line, SteadyClock::time_point now,
          const std::function<void(int, const DiagProgress&)>& progress) {
  DiagProgress step;
  switch (ReadWorkerLine(line, worker.outcome, step)) {
    case WorkerLine::kProgress:
      worker.watch.Progressed(now);
      worker.watch.Pulse(step.units, step.slowest_unit, now);
      if (progress) progress(worker.devices.front(), step);
      break;
    case WorkerLine::kHeartbeat: worker.watch.Pulse(step.units, step.slowest_unit, now); break;
    case WorkerLine::kFinal: worker.done = true; break;
    case WorkerLine::kIgnored: break;
  }
}

template <typename T>
Result<T> Number(const std::string& name, const std::string& value) {
  auto number = ParseInt<T>(value);
  if (!number) return Error{fmt::format("__diag-worker: bad {} '{}'", name, value)};
  return *number;
}

}  // namespace

namespace {

// Whether every fractional number in `value` is one the fields it may land in can hold: nlohmann converts a
// JSON float to an integer field with a plain cast, undefined beyond the integer's range. The worker's own
// fractional values (rates, fractions, TFLOPS) are far smaller.
bool FloatsInRange(const json& value) {
  if (value.is_number_float()) {
    const double number = value.get<double>();
    return std::isfinite(number) && std::fabs(number) < 2147483647.0;
  }
  if (value.is_structured())
    for (const json& item : value)
      if (!FloatsInRange(item)) return false;
  return true;
}

}  // namespace

WorkerLine ReadWorkerLine(std::string_view line, DiagOutcome& outcome, DiagProgress& progress) {
  json value = json::parse(line, nullptr, /*allow_exceptions=*/false);
  auto event = value.is_object() ? value.find("event") : value.end();
  if (event == value.end() || !event->is_string()) return WorkerLine::kIgnored;
  // Fields are read with their types checked: a progress line of the wrong
  // shape is ignored, and a result of the wrong shape is unreadable; no
  // exception leaves here.
  if (*event == "progress" || *event == "heartbeat") {
    try {
      const double slowest = value.value("slowest_unit_s", 0.0);
      const auto units = value.find("units");
      if (units != value.end() && !units->is_number_unsigned()) return WorkerLine::kIgnored;
      progress.units = units != value.end() ? units->get<uint64_t>() : 0;
      progress.slowest_unit = std::chrono::duration_cast<Duration>(
          std::chrono::duration<double>(std::isfinite(slowest) ? std::clamp(slowest, 0.0, 1e9) : 0.0));
      if (*event == "heartbeat") return WorkerLine::kHeartbeat;
      progress.step = value.value("step", "");
      progress.fraction = value.value("fraction", 0.0);
      const auto pass = value.find("pass");
      if (pass != value.end() && !FloatsInRange(*pass)) return WorkerLine::kIgnored;  // its cast to int: undefined
      progress.pass = value.value("pass", 1);
      progress.rate = value.value("rate", 0.0);
      return WorkerLine::kProgress;
    } catch (const json::exception&) {
      return WorkerLine::kIgnored;
    }
  }
  if (*event != "result" && *event != "failed") return WorkerLine::kIgnored;
  try {
    if (*event == "failed") {
      // A GPU that fails once its test has begun is the GPU's fault; one that
      // cannot start it (no driver, no memory) is not.
      const bool started = value.value("started", false);
      outcome.message = value.value("message", "");
      outcome.state = started ? DiagState::kFaulty : DiagState::kCouldNotRun;
      return WorkerLine::kFinal;
    }
    const json& result = value.at("result");
    if (!FloatsInRange(result)) {
      outcome.state = DiagState::kCouldNotRun;
      outcome.message = "the diagnostic worker's result could not be read: a number out of its field's range";
      return WorkerLine::kFinal;
    }
    switch (outcome.test) {
      case DiagTest::kMemtest: outcome.memtest = result.get<MemtestResult>(); break;
      case DiagTest::kBurn: outcome.burn = result.get<BurnResult>(); break;
      case DiagTest::kPcie: outcome.pcie = result.get<PcieResult>(); break;
    }
    Judge(outcome);
  } catch (const json::exception& e) {
    outcome.memtest.reset();
    outcome.burn.reset();
    outcome.pcie.reset();
    outcome.state = DiagState::kCouldNotRun;
    outcome.message = fmt::format("the diagnostic worker's {} could not be read: {}", event->get<std::string>(), e.what());
  }
  return WorkerLine::kFinal;
}

const char* DiagTestName(DiagTest test) {
  switch (test) {
    case DiagTest::kMemtest: return "memtest";
    case DiagTest::kBurn: return "burn";
    case DiagTest::kPcie: return "pcie";
  }
  return "memtest";
}

std::optional<DiagTest> ParseDiagTest(std::string_view name) {
  for (DiagTest test : {DiagTest::kMemtest, DiagTest::kBurn, DiagTest::kPcie})
    if (name == DiagTestName(test)) return test;
  return std::nullopt;
}

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
  auto ms = [](Duration duration) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(duration).count());
  };
  std::vector<std::string> arguments = {DiagTestName(options.test)};
  auto add = [&](const char* name, std::string value) {
    arguments.emplace_back(name);
    arguments.push_back(std::move(value));
  };
  if (!options.cuda_library.empty()) add("--cuda", options.cuda_library);
  switch (options.test) {
    case DiagTest::kMemtest:
      add("--device", std::to_string(options.memtest.device));
      add("--share", fmt::format("{}", options.memtest.free_share));
      add("--chunk-bytes", std::to_string(options.memtest.chunk_bytes));
      add("--duration-ms", ms(options.memtest.duration));
      for (const std::string& pattern : options.memtest.patterns) add("--pattern", pattern);
      break;
    case DiagTest::kBurn:
      add("--device", std::to_string(options.burn.device));
      add("--share", fmt::format("{}", options.burn.free_share));
      add("--duration-ms", ms(options.burn.duration));
      add("--matrix", std::to_string(options.burn.matrix));
      if (!options.cublas_library.empty()) add("--cublas", options.cublas_library);
      for (Precision precision : options.burn.precisions) add("--precision", PrecisionName(precision));
      break;
    case DiagTest::kPcie:
      for (int device : options.pcie.devices) add("--device", std::to_string(device));
      add("--transfer-bytes", std::to_string(options.pcie.transfer_bytes));
      add("--repeats", std::to_string(options.pcie.repeats));
      add("--peers", options.pcie.peers ? "1" : "0");
      break;
  }
  return arguments;
}

Result<DiagWorkerOptions> ParseDiagWorkerArguments(const std::vector<std::string>& arguments) {
  DiagWorkerOptions options;
  auto test = arguments.empty() ? std::nullopt : ParseDiagTest(arguments[0]);
  if (!test) return Error{"__diag-worker: the test must be memtest, burn or pcie"};
  options.test = *test;
  options.pcie.devices.clear();
  for (size_t i = 1; i < arguments.size(); ++i) {
    const std::string& name = arguments[i];
    if (i + 1 >= arguments.size()) return Error{fmt::format("__diag-worker: {} needs a value", name)};
    const std::string& value = arguments[++i];
    Status status;
    auto set = [&](auto& field, auto parsed) {
      if (parsed) field = *parsed;
      else status = parsed.error();
    };
    if (name == "--device") {
      auto device = Number<int>(name, value);
      set(options.memtest.device, device);
      set(options.burn.device, device);
      if (device) options.pcie.devices.push_back(*device);
    } else if (name == "--share") {
      options.memtest.free_share = options.burn.free_share = std::strtod(value.c_str(), nullptr);
    } else if (name == "--chunk-bytes") {
      set(options.memtest.chunk_bytes, Number<uint64_t>(name, value));
    } else if (name == "--duration-ms") {
      auto ms = Number<int64_t>(name, value);
      if (ms) options.memtest.duration = options.burn.duration = std::chrono::milliseconds(*ms);
      else status = ms.error();
    } else if (name == "--pattern") {
      options.memtest.patterns.push_back(value);
    } else if (name == "--matrix") {
      set(options.burn.matrix, Number<uint64_t>(name, value));
    } else if (name == "--precision") {
      auto precision = ParsePrecision(value);
      if (!precision) return Error{fmt::format("__diag-worker: unknown precision '{}'", value)};
      options.burn.precisions.push_back(*precision);
    } else if (name == "--transfer-bytes") {
      set(options.pcie.transfer_bytes, Number<uint64_t>(name, value));
    } else if (name == "--repeats") {
      set(options.pcie.repeats, Number<int>(name, value));
    } else if (name == "--peers") {
      options.pcie.peers = value == "1";
    } else if (name == "--cuda") {
      options.cuda_library = value;
    } else if (name == "--cublas") {
      options.cublas_library = value;
    } else {
      return Error{fmt::format("__diag-worker: unknown option {}", name)};
    }
    if (!status) return status.error();
  }
  return options;
}

int RunDiagWorker(const DiagWorkerOptions& options, int out_fd) {
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  WorkerOutput out(out_fd);
  auto cuda = CudaDriver::Load(options.cuda_library);
  if (!cuda) {
    out.Write({{"event", "failed"}, {"started", false}, {"message", cuda.error().message}});
    return 1;
  }
  bool started = false;
  auto report = [&](std::string step, double fraction, int pass, double rate) {
    started = true;
    const PulseReading pulse = ProcessWorkPulse().Read();
    out.Write({{"event", "progress"}, {"step", std::move(step)}, {"fraction", fraction}, {"pass", pass},
               {"rate", rate}, {"units", pulse.units}, {"slowest_unit_s", Seconds(pulse.slowest_unit)}});
  };
  std::optional<Heartbeat> heartbeat(std::in_place, out);
  auto stop = [] { return g_worker_stop.load(); };
  Result<json> result = Error{""};
  switch (options.test) {
    case DiagTest::kMemtest: {
      auto memtest = RunMemtest(
          **cuda, kMemtestPtx, options.memtest,
          [&](const MemtestProgress& p) { report(p.pattern, p.pass_fraction, p.pass, p.gb_per_s); }, stop);
      result = memtest ? Result<json>(json(*memtest)) : Result<json>(memtest.error());
      break;
    }
    case DiagTest::kBurn: {
      std::unique_ptr<Cublas> cublas;
      std::string note;
      if (options.cublas_library != "none") {
        auto found = Cublas::Find(options.cublas_library);
        if (found) cublas = std::move(*found);
        else note = found.error().message;
      }
      auto burn = RunBurn(
          **cuda, cublas.get(), kBurnPtx, options.burn,
          [&](const BurnProgress& p) {
            report(p.phase.empty() ? p.precision : p.precision + " " + p.phase, p.fraction, p.iteration, p.tflops);
          },
          stop);
      if (burn && burn->engine_note.empty()) burn->engine_note = note;
      result = burn ? Result<json>(json(*burn)) : Result<json>(burn.error());
      break;
    }
    case DiagTest::kPcie: {
      auto pcie = RunPcie(
          **cuda, options.pcie, [&](const PcieProgress& p) { report(p.step, p.fraction, 1, p.gb_per_s); }, stop);
      result = pcie ? Result<json>(json(*pcie)) : Result<json>(pcie.error());
      break;
    }
  }
  heartbeat.reset();  // the result is the last line
  if (!result) {
    out.Write({{"event", "failed"}, {"started", started}, {"message", result.error().message}});
    return 1;
  }
  out.Write({{"event", "result"}, {"result", std::move(*result)}});
  return 0;
}

std::vector<DiagOutcome> RunDiagWorkers(const DiagRunOptions& options,
                                        const std::function<void(int, const DiagProgress&)>& progress,
                                        const std::function<bool()>& stop) {
  std::vector<std::vector<int>> jobs;
  if (options.worker_options.test == DiagTest::kPcie) {
    if (!options.devices.empty()) jobs.push_back(options.devices);
  } else {
    for (int device : options.devices) jobs.push_back({device});
  }
  std::vector<Worker> workers;
  std::vector<DiagOutcome> outcomes;
  for (const std::vector<int>& devices : jobs) {
    Result<Worker> worker = Spawn(options, devices);
    if (!worker) {
      outcomes.push_back({.test = options.worker_options.test, .devices = devices, .state = DiagState::kCouldNotRun,
                          .message = worker.error().message});
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
          worker.pending.append(buffer, static_cast<size_t>(n));
          for (size_t end; (end = worker.pending.find('\n')) != std::string::npos;) {
            Take(worker, worker.pending.substr(0, end), now, progress);
            worker.pending.erase(0, end + 1);
          }
        } else if (n == 0 || errno != EINTR) {
          close(worker.fd);  // the worker ended
          worker.fd = -1;
          continue;
        }
      }
      // Heartbeats arrive while a kernel never returns: judged by progress, not by lines.
      if (worker.watch.Hung(now)) {
        kill(worker.pid, SIGKILL);
        close(worker.fd);
        worker.fd = -1;
        worker.done = true;
        worker.outcome.state = DiagState::kHung;
        const Duration slowest = worker.watch.slowest_unit();
        worker.outcome.message = fmt::format(
            "no progress from the GPU for {}{}: a kernel or driver call never returned (the worker was ended)",
            FormatDuration(worker.watch.deadline()),
            slowest > Duration::zero()
                ? fmt::format(" ({} times its slowest step so far, {:.2g} s, or --stall-timeout)", kSlowUnitFactor,
                              Seconds(slowest))
                : "");
      }
    }
  }
  for (Worker& worker : workers) {
    int status = 0;
    while (waitpid(worker.pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!worker.done && stopping && WIFSIGNALED(status) &&
        (WTERMSIG(status) == SIGTERM || WTERMSIG(status) == SIGINT)) {
      // Stopped before it could set up its own handler: interrupted, not broken.
      worker.outcome.state = DiagState::kInterrupted;
      worker.outcome.message = "stopped before its test began";
    } else if (!worker.done) {
      worker.outcome.state = DiagState::kCouldNotRun;
      worker.outcome.message =
          WIFSIGNALED(status) ? fmt::format("the diagnostic worker died of signal {}", WTERMSIG(status))
                              : fmt::format("the diagnostic worker exited {} without a result", WEXITSTATUS(status));
    }
    outcomes.push_back(std::move(worker.outcome));
  }
  std::sort(outcomes.begin(), outcomes.end(),
            [](const DiagOutcome& a, const DiagOutcome& b) { return a.devices.front() < b.devices.front(); });
  return outcomes;
}

}  // namespace gpudoctor
