// `gpudoctor diag memtest|burn|pcie|all` and `gpudoctor diag --level 1|2|3`:
// prove a GPU good or bad under stress. The GPU work runs in worker processes
// (diag/diag_run.h) through the CUDA driver, with the kernels this build
// compiled to PTX; this command watches them, reads NVML before, during and
// after, follows the kernel log, draws the progress, judges
// (assess/diag_judge.h), and ends with a table of every GPU and test
// (diag/diag_summary.h). A level (diag/diag_levels.h) sets the run's length.
// Exit: 0 every GPU passed, 2 a GPU is faulty or hung, 3 a GPU could not be
// tested, 130 interrupted (docs/exit-codes.md).
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <map>

#include "cli/commands.h"
#include "cli/diag_history.h"
#include "assess/diag_judge.h"
#include "cli/diag_report.h"
#include "cli/diag_watch.h"
#include "cli/sources.h"
#include "cli/terminal_guard.h"
#include "common/json_text.h"
#include "common/suggest.h"
#include "common/text.h"
#include "diag/diag_levels.h"
#include "diag/diag_lock.h"
#include "diag/diag_run.h"

namespace gpudoctor {

namespace {

using json = nlohmann::ordered_json;

inline constexpr int kDiagFaulty = 2;        // a GPU is faulty or hung
inline constexpr int kDiagCouldNotRun = 3;   // a GPU could not be tested
inline constexpr int kDiagInterrupted = 130;  // stopped by SIGINT or SIGTERM

// What the command line says; an option left out takes the level's value
// (diag/diag_levels.h), or the plan without a level.
struct DiagOptions {
  int level = 0;     // --level; 0: none
  std::string gpus;  // "0,2"; empty: every GPU
  std::string duration;  // empty: the level's
  std::string size;      // empty: the level's share for the memtest, 90% for the burn
  std::vector<std::string> patterns;
  std::vector<std::string> precisions;
  uint64_t matrix = 0;
  std::string cublas_library;
  int64_t transfer_mib = -1;  // -1: the level's
  bool no_peers = false;
  bool quiet = false;  // only the summary
  std::string stall_timeout = "60s";
  std::string cuda_library;
  std::string log_file;
  bool no_logs = false;
  std::string database;  // --db; empty: the agent's default on a live run, none simulated
  bool force = false;
};

std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) { g_interrupted.store(true); }

std::string Bar(double fraction, int width) {
  const int filled = static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * width));
  return std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(width - filled), '.');
}

const char* RateUnit(DiagTest test) { return test == DiagTest::kBurn ? "TFLOP/s" : "GB/s"; }

// One line per worker, redrawn in place on a terminal.
class ProgressBoard {
 public:
  ProgressBoard(DiagTest test, std::vector<int> rows, bool enabled)
      : test_(test), rows_(std::move(rows)), enabled_(enabled), start_(std::chrono::steady_clock::now()) {}

  void Update(int device, const DiagProgress& progress) {
    lines_[device] = progress;
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_draw_ < std::chrono::milliseconds(100) && progress.fraction < 1.0) return;
    last_draw_ = now;
    Draw();
  }

  void Finish() {
    if (enabled_ && drawn_) Draw();
  }

 private:
  void Draw() {
    // gpudoctor's own drawing: the one stream whose cursor movements pass (cli/terminal_guard.h).
    std::FILE* out = RawStderr();
    if (drawn_) std::fprintf(out, "\x1b[%zuA", rows_.size());
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    for (int device : rows_) {
      auto found = lines_.find(device);
      std::string line = test_ == DiagTest::kPcie ? std::string("links  ") : fmt::format("GPU {:<2} ", device);
      if (found == lines_.end()) {
        line += DiagTestName(test_) + std::string(" starting...");
      } else {
        const DiagProgress& p = found->second;
        const double eta = p.fraction > 0.01 ? elapsed / p.fraction - elapsed : 0;
        line += fmt::format("{} [{}] {:3.0f}%  {:<6} {:<24} {:9.2f} {}  ETA {}", DiagTestName(test_), Bar(p.fraction, 24),
                            p.fraction * 100, test_ == DiagTest::kPcie ? "" : fmt::format("#{}", p.pass), p.step,
                            p.rate, RateUnit(test_),
                            p.fraction > 0.01 ? FormatDuration(std::chrono::seconds(static_cast<int64_t>(eta))) : "-");
      }
      std::fprintf(out, "\r\x1b[2K%s\n", line.c_str());
    }
    drawn_ = true;
  }

  DiagTest test_;
  std::vector<int> rows_;
  bool enabled_;
  bool drawn_ = false;
  std::map<int, DiagProgress> lines_;
  std::chrono::steady_clock::time_point start_, last_draw_{};
};

// Reads NVML every couple of seconds while a test runs.
// ---- running ----

Result<double> ParseShare(const std::string& text) {
  std::string size = text;
  if (!size.empty() && size.back() == '%') size.pop_back();
  char* end = nullptr;
  const double percent = std::strtod(size.c_str(), &end);
  if (size.empty() || *end != '\0' || !(percent > 0 && percent <= 100))
    return Error{"--size: a share of free memory, like 90%, was " + text};
  return percent / 100.0;
}

// The command that runs `test` on `gpu` again, as the history shows it: at the same level.
std::string CommandFor(DiagTest test, int gpu, int level) {
  return fmt::format("gpudoctor diag {} --gpu {}{}", DiagTestName(test), gpu,
                     level != 0 ? fmt::format(" --level {}", level) : "");
}

// Conclusive results (passed, faulty, hung) go to the agent's history when it
// has one, so status, check and the dashboard show them.
void KeepInHistory(const std::vector<std::pair<const DiagVerdict*, const DiagOutcome*>>& results,
                   const Snapshot& before, const DiagOptions& options, const CommandContext& context,
                   std::vector<std::string>& notes) {
  const std::string database =
      !options.database.empty() ? options.database : context.options.simulate.empty() ? kDefaultHistoryDatabase : "";
  if (database.empty()) return;
  std::vector<DiagnosticRecord> records;
  const WallTime now = SystemClock::Instance().Now();
  for (const auto& [verdict, outcome] : results) {
    if (verdict->state != DiagState::kPassed && verdict->state != DiagState::kFaulty &&
        verdict->state != DiagState::kHung)
      continue;
    DiagnosticRecord record{.finished_at = now,
                            .gpu_index = static_cast<uint32_t>(verdict->gpu),
                            .test = DiagTestName(verdict->test),
                            .state = DiagStateName(verdict->state),
                            .summary = verdict->problems.empty() ? verdict->summary : verdict->problems.front(),
                            .command = CommandFor(verdict->test, verdict->gpu, options.level)};
    if (const GpuSnapshot* gpu = before.FindGpu(static_cast<uint32_t>(verdict->gpu))) {
      record.uuid = gpu->uuid.value_or("");
      record.pci_bus_id = gpu->pci_bus_id.value_or("");
    }
    records.push_back(std::move(record));
  }
  if (records.empty()) return;
  auto written = RecordDiagnostics(database, records);
  if (!written) notes.push_back("the results were not kept in the agent's history: " + written.error().message);
  else if (*written) notes.push_back("results kept in the agent's history (" + database + ")");
  else if (!options.database.empty()) notes.push_back("no agent history at " + database + ": the results were not kept");
}

void RunDiag(const std::vector<DiagTest>& tests, const DiagOptions& options, CommandContext& context) {
  auto fail = [&](int code, const std::string& message) {
    std::fprintf(stderr, "gpudoctor diag: %s\n", message.c_str());
    context.exit_code = code;
  };
  const DiagPlan& plan = options.level != 0 ? *FindDiagLevel(options.level) : DefaultDiagPlan();
  std::optional<Duration> duration;
  if (!options.duration.empty()) {
    duration = ParseDuration(options.duration);
    if (!duration || duration->count() < 0)
      return fail(exit_code::kUsage, "--duration: not a duration: " + options.duration);
  }
  auto stall = ParseDuration(options.stall_timeout);
  if (!stall || stall->count() <= 0)
    return fail(exit_code::kUsage, "--stall-timeout: not a duration: " + options.stall_timeout);
  auto share = options.size.empty() ? Result<double>(plan.memtest_share) : ParseShare(options.size);
  if (!share) return fail(exit_code::kUsage, share.error().message);
  for (const std::string& pattern : options.patterns) {
    const auto& names = MemtestPatternNames();
    if (std::find(names.begin(), names.end(), pattern) == names.end()) {
      const std::vector<std::string> known(names.begin(), names.end());
      return fail(exit_code::kUsage, fmt::format("--pattern: unknown pattern '{}'.{} The patterns: {}", pattern,
                                                 DidYouMean(NearestNames(pattern, known)), QuotedList(known, "and")));
    }
  }
  std::vector<Precision> precisions;
  for (const std::string& name : options.precisions) {
    auto precision = ParsePrecision(name);
    if (!precision) return fail(exit_code::kUsage, fmt::format("--precision: '{}' is not fp64, fp32, tf32 or bf16", name));
    precisions.push_back(*precision);
  }
  if (options.matrix != 0 && (options.matrix < 16 || options.matrix > 32768))
    return fail(exit_code::kUsage, fmt::format("--matrix: {} is outside 16 to 32768", options.matrix));
  const uint64_t transfer_mib =
      options.transfer_mib < 0 ? plan.transfer_mib : static_cast<uint64_t>(options.transfer_mib);
  if (transfer_mib == 0 || transfer_mib > 16384)
    return fail(exit_code::kUsage, "--transfer-size: between 1 and 16384 MiB");

  // The GPUs, their processes, links and PCI order come from NVML through the hang-proof probe.
  auto made = MakeSnapshotSource(context);
  if (made.error) return fail(made.error->exit_code, made.error->message);
  const Snapshot before = made.source->Collect();
  if (before.driver_error != AccessError::kNone)
    return fail(exit_code::kUnavailable, "NVML cannot list the GPUs: " + before.driver_message);
  if (before.gpus.empty()) return fail(kDiagCouldNotRun, "no GPU to test (" + made.description + ")");
  std::vector<int> devices;
  if (options.gpus.empty()) {
    for (const GpuSnapshot& gpu : before.gpus) devices.push_back(static_cast<int>(gpu.index));
  } else {
    for (std::string_view part : Split(options.gpus, ',')) {
      auto index = ParseInt<int>(Trim(part));
      if (!index || *index < 0 || static_cast<size_t>(*index) >= before.gpus.size())
        return fail(exit_code::kUsage, fmt::format("--gpu: no GPU '{}' ({} found)", part, before.gpus.size()));
      if (std::find(devices.begin(), devices.end(), *index) == devices.end()) devices.push_back(*index);
    }
  }
  // Safety: a GPU running compute work is not ours to fill with patterns.
  std::vector<DiagVerdict> refused;
  std::vector<int> tested;
  for (int device : devices) {
    const GpuSnapshot* gpu = before.FindGpu(static_cast<uint32_t>(device));
    const size_t busy = gpu && gpu->processes.has_value() ? gpu->processes.value().size() : 0;
    if (busy > 0 && !options.force) {
      for (DiagTest test : tests) {
        refused.push_back({.gpu = device, .test = test, .state = DiagState::kCouldNotRun,
                           .problems = {fmt::format("{} process{} running on it; stop them or pass --force", busy,
                                                    busy == 1 ? " is" : "es are")}});
      }
    } else {
      tested.push_back(device);
    }
  }

  // One run per GPU at a time: a second would read the first's load as a
  // fault. Simulated GPUs are shared by nobody, so they are locked only where
  // GPUDOCTOR_RUN_DIR asks (the tests of the lock).
  std::vector<std::string> notes;
  std::vector<DiagLock> locks;
  if (context.options.simulate.empty() || std::getenv("GPUDOCTOR_RUN_DIR") != nullptr) {
    Result<std::string> directory = DiagLockDirectory();
    if (!directory) notes.push_back("the GPUs are not locked against another run: " + directory.error().message);
    std::vector<int> locked;
    for (int device : directory ? tested : std::vector<int>{}) {
      const GpuSnapshot* gpu = before.FindGpu(static_cast<uint32_t>(device));
      const std::string key = gpu && gpu->pci_bus_id.has_value() ? gpu->pci_bus_id.value() : fmt::format("gpu{}", device);
      DiagLockAttempt attempt = AcquireDiagLock(*directory, key);
      if (attempt.held_by) {
        const std::string holder = *attempt.held_by > 0 ? fmt::format(" (pid {})", *attempt.held_by) : "";
        for (DiagTest test : tests) {
          refused.push_back({.gpu = device, .test = test, .state = DiagState::kCouldNotRun,
                             .problems = {fmt::format("another gpudoctor diag{} is testing this GPU: wait for it to "
                                                      "finish, or stop it",
                                                      holder)}});
        }
        continue;
      }
      if (attempt.lock) locks.push_back(std::move(*attempt.lock));
      else notes.push_back(fmt::format("GPU {} is not locked against another run: {}", device, attempt.error));
      locked.push_back(device);
    }
    if (directory) tested = std::move(locked);
  }

  DiagRunOptions run;
  run.worker = context.executable_path;
  run.devices = tested;
  run.stall_timeout = *stall;
  run.worker_options.cuda_library = options.cuda_library;
  run.worker_options.cublas_library = options.cublas_library;
  run.worker_options.memtest.free_share = *share;
  run.worker_options.memtest.patterns = options.patterns.empty() ? plan.memtest_patterns : options.patterns;
  if (!options.size.empty()) run.worker_options.burn.free_share = *share;
  run.worker_options.burn.precisions = precisions;
  run.worker_options.burn.matrix = options.matrix;
  run.worker_options.pcie.transfer_bytes = transfer_mib << 20;
  run.worker_options.pcie.peers = !options.no_peers;
  run.extra_env.push_back("CUDA_DEVICE_ORDER=PCI_BUS_ID");  // CUDA's ordinals in NVML's order
  std::string log_file = options.log_file;
  bool follow_log = !options.no_logs;
  if (!context.options.simulate.empty()) {
    if (options.cuda_library.empty()) {  // a --cuda-lib given still wins
      auto fake = FindShippedLibrary("libgpudoctor_fake_cuda.so");
      if (!fake) return fail(kDiagCouldNotRun, fake.error().message);
      run.worker_options.cuda_library = *fake;
    }
    if (options.cublas_library.empty()) run.worker_options.cublas_library = "none";  // not this machine's cuBLAS
    std::error_code ec;
    run.extra_env.push_back("GPUDOCTOR_SCENARIO=" + std::filesystem::absolute(context.options.simulate, ec).string());
    if (log_file.empty()) follow_log = false;  // a simulated server's log is not this machine's
  }

  struct sigaction action {};
  action.sa_handler = OnInterrupt;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  const bool json_lines = context.options.json;
  const bool quiet = options.quiet;

  struct Done {
    DiagTest test;
    std::vector<DiagOutcome> outcomes;
    std::vector<DiagVerdict> verdicts;
    std::map<int, GpuReadings> readings;
    std::vector<LogEvent> events;
  };
  std::vector<Done> done;
  for (DiagTest test : tests) {
    if (g_interrupted.load() || tested.empty()) break;
    run.worker_options.test = test;
    run.worker_options.memtest.duration = duration.value_or(plan.memtest_duration);
    run.worker_options.burn.duration = duration.value_or(plan.burn_duration);
    Done& current = done.emplace_back(Done{.test = test});
    std::optional<DiagLogWatch> log_watch;
    if (follow_log) log_watch.emplace(log_file, notes);
    ProgressBoard board(test, test == DiagTest::kPcie ? std::vector<int>{tested.front()} : tested,
                        !json_lines && !quiet && isatty(STDERR_FILENO));
    {
      DiagSampler sampler(*made.source, current.readings);
      current.outcomes = RunDiagWorkers(
          run,
          [&](int device, const DiagProgress& progress) {
            if (json_lines && !quiet) {
              json line{{"event", "progress"}, {"gpu", device},        {"test", DiagTestName(test)},
                        {"step", progress.step}, {"pass", progress.pass}, {"fraction", progress.fraction},
                        {"rate", progress.rate}, {"unit", RateUnit(test)}};
              std::printf("%s\n", ToJsonText(line).c_str());
              std::fflush(stdout);
            }
            board.Update(device, progress);
          },
          [] { return g_interrupted.load(); });
    }
    board.Finish();
    if (log_watch) {
      current.events = log_watch->Stop();
      if (std::string error = log_watch->error(); !error.empty()) notes.push_back("kernel log: " + error);
    }
    current.verdicts = VerdictsOf(current.outcomes);
    JudgeIdentity(current.outcomes, before, current.verdicts);
    if (test == DiagTest::kBurn) JudgeBurnPeers(current.outcomes, current.verdicts);
    if (test == DiagTest::kPcie) JudgeLinks(current.outcomes, before, current.verdicts);
    JudgeReadings(current.readings, current.verdicts);
    JudgeXids(current.events, before, current.verdicts);
  }
  const Snapshot after = made.source->Collect();

  std::vector<std::pair<const DiagVerdict*, const DiagOutcome*>> results;
  for (Done& d : done) {
    if (d.test != DiagTest::kPcie) JudgeCounters(before, after, d.verdicts);
    for (const DiagVerdict& verdict : d.verdicts) {
      const DiagOutcome* outcome = nullptr;
      for (const DiagOutcome& o : d.outcomes)
        if (std::find(o.devices.begin(), o.devices.end(), verdict.gpu) != o.devices.end()) outcome = &o;
      results.emplace_back(&verdict, outcome);
    }
  }
  for (const DiagVerdict& verdict : refused) results.emplace_back(&verdict, nullptr);
  std::stable_sort(results.begin(), results.end(),
                   [](const auto& a, const auto& b) { return a.first->gpu < b.first->gpu; });

  bool faulty = false, could_not_run = false, interrupted = g_interrupted.load();
  for (const auto& [verdict, outcome] : results) {
    faulty |= verdict->state == DiagState::kFaulty || verdict->state == DiagState::kHung;
    could_not_run |= verdict->state == DiagState::kCouldNotRun;
    interrupted |= verdict->state == DiagState::kInterrupted;
    if (quiet) continue;
    if (json_lines) std::printf("%s\n", ToJsonText(DiagVerdictJson(*verdict, outcome, before, after)).c_str());
    else PrintDiagVerdict(*verdict, outcome, before, after);
  }
  KeepInHistory(results, before, options, context, notes);
  for (const std::string& note : quiet ? std::vector<std::string>{} : notes) {
    if (json_lines) std::printf("%s\n", ToJsonText(json{{"event", "note"}, {"message", note}}).c_str());
    else std::printf("note: %s\n", note.c_str());
  }
  context.exit_code = faulty           ? kDiagFaulty
                      : interrupted    ? kDiagInterrupted
                      : could_not_run  ? kDiagCouldNotRun
                                       : exit_code::kOk;
  const DiagSummary summary = SummarizeDiag(
      results, context.exit_code, options.level != 0 ? std::optional<int>(options.level) : std::nullopt);
  if (json_lines) std::printf("%s\n", DiagSummaryJsonText(summary).c_str());
  else {
    if (!quiet) std::printf("\n");
    PrintDiagSummary(stdout, summary);
  }
}

// Options every diag subcommand takes.
void AddCommonOptions(CLI::App* command, DiagOptions& options) {
  std::string lengths;
  for (int level = 1; level <= kDiagLevelCount; ++level)
    lengths += fmt::format("{}{} {}", level == 1 ? "" : ", ", level, FindDiagLevel(level)->about);
  command->add_option("--level", options.level,
                      "Run length, as dcgmi diag -r: " + lengths +
                          " (what each runs: gpudoctor diag --help); an option given beside it wins")
      ->check(CLI::Range(1, kDiagLevelCount));
  command->add_flag("--quiet", options.quiet,
                    "Print only the summary: the table and its line (with --json, the summary line alone)");
  command->add_option("--gpu", options.gpus, "GPUs to test, by NVML index: 0,2 (default: all)");
  command->add_option("--stall-timeout", options.stall_timeout,
                      "A GPU whose work stops advancing this long (or 20 times its slowest step, when longer) is "
                      "reported hung and its worker ended")
      ->capture_default_str();
  command->add_option("--cuda-lib", options.cuda_library, "CUDA driver library to load instead of libcuda.so.1");
  command->add_option("--logs", options.log_file,
                      "Follow this file for Xids during the test instead of the machine's kernel log");
  command->add_flag("--no-logs", options.no_logs, "Do not follow the kernel log");
  command->add_flag("--force", options.force, "Test GPUs that run compute processes too (they may fail)");
  command->add_option("--db", options.database,
                      std::string("The agent's history, to keep the results in when it exists (default: ") +
                          kDefaultHistoryDatabase + " on a live run, none with --simulate)");
}

void AddMemtestOptions(CLI::App* command, DiagOptions& options) {
  command->add_option("--size", options.size,
                      "Share of each GPU's free memory to test (default: the level's; 90% without one)");
  command->add_option("--pattern", options.patterns, "Run only these patterns (repeat the option): " + [] {
    std::string names;
    for (std::string_view name : MemtestPatternNames()) names += (names.empty() ? "" : ", ") + std::string(name);
    return names;
  }());
}

void AddBurnOptions(CLI::App* command, DiagOptions& options) {
  command->add_option("--precision", options.precisions, "Run only these (repeat): fp64, fp32, tf32, bf16");
  command->add_option("--matrix", options.matrix, "Order of the matrices (default: the largest up to 16384 that fits)");
  command->add_option("--cublas-lib", options.cublas_library,
                      "cuBLAS library to use; 'none' for gpudoctor's own kernels (default: search)");
}

void AddPcieOptions(CLI::App* command, DiagOptions& options) {
  command->add_option("--transfer-size", options.transfer_mib,
                      "MiB per copy (default: the level's; 256 without one)");
  command->add_flag("--no-peers", options.no_peers, "Skip the GPU-to-GPU copies");
}

// memtest, burn and pcie's options together: `diag all` and `diag --level N`.
void AddAllOptions(CLI::App* command, DiagOptions& options) {
  AddCommonOptions(command, options);
  AddMemtestOptions(command, options);
  AddBurnOptions(command, options);
  AddPcieOptions(command, options);
  command->add_option("--duration", options.duration,
                      "How long the memtest repeats and the burn runs (default: the level's; one memtest pass and a "
                      "1m burn without one)");
}

constexpr const char* kExitCodes =
    "Exit codes: 0 every GPU passed, 2 a GPU is faulty (wrong data or results, failed, or hung during the test),\n"
    "3 a GPU could not be tested (no driver, busy, tested by another gpudoctor diag, too little memory,\n"
    "built without kernels), 130 interrupted,\n"
    "64 usage, 69 NVML unavailable.";

}  // namespace

int RunDiagWorkerCommandLine(int argc, char** argv) {
  std::vector<std::string> arguments(argv + 2, argv + argc);
  auto options = ParseDiagWorkerArguments(arguments);
  if (!options) {
    std::fprintf(stderr, "%s\n", options.error().message.c_str());
    return exit_code::kUsage;
  }
  return RunDiagWorker(*options, STDOUT_FILENO);
}

void RegisterDiagCommand(CLI::App& app, CommandContext& context) {
  auto* diag = app.add_subcommand(
      "diag", "Stress GPUs to prove them good or bad: memory test, compute burn, PCIe and peer bandwidth");
  diag->require_subcommand(0, 1);
  diag->footer(
      "Levels (memtest, burn and pcie in turn, like dcgmi diag -r 1|2|3; `diag all --level N` is the same):\n" +
      DescribeDiagLevels() +
      "An option given beside --level (--duration, --size, --pattern, --transfer-size...) overrides its value.\n\n"
      "Each GPU is tested by its own worker process, all at once. A worker reports how far its work got every\n"
      "second; one whose work stops advancing for --stall-timeout (or 20 times its slowest step, on a slow or\n"
      "loaded host) is ended and its GPU reported hung, so the command always returns. NVML is read before,\n"
      "during and after, and the kernel log is followed: new uncorrectable ECC errors, retired pages, row\n"
      "remaps or an Xid during a test make the GPU faulty. The run ends with a table of every GPU and test and\n"
      "a summary line. Results go to the agent's history when it has one (`status` and `check` show them).\n\n"
      "Examples:\n"
      "  gpudoctor diag --level 1                    seconds: is every GPU working?\n"
      "  gpudoctor diag --level 3 --gpu 3            an hour of stress on a suspect GPU\n"
      "  gpudoctor diag memtest                      every GPU, one pass of every pattern\n"
      "  gpudoctor diag burn --gpu 3 --duration 10m\n"
      "  gpudoctor diag pcie\n"
      "  gpudoctor diag all --json                   JSON lines: progress, one result per GPU and test, a summary\n\n" +
      std::string(kExitCodes));
  auto options = std::make_shared<DiagOptions>();
  AddAllOptions(diag, *options);
  diag->callback([diag, options, &context] {
    if (!diag->get_subcommands().empty()) return;  // a test ran
    if (options->level == 0) {
      std::fprintf(stderr, "gpudoctor diag: a command or a level is required: 'memtest', 'burn', 'pcie', 'all' or "
                           "--level 1|2|3 (gpudoctor diag --help describes them).\n");
      context.exit_code = exit_code::kUsage;
      return;
    }
    RunDiag({DiagTest::kMemtest, DiagTest::kBurn, DiagTest::kPcie}, *options, context);
  });

  auto* memtest = diag->add_subcommand(
      "memtest", "Write and check patterns over most of each GPU's free memory; report every bad word");
  AddCommonOptions(memtest, *options);
  AddMemtestOptions(memtest, *options);
  memtest->add_option("--duration", options->duration,
                      "Repeat the patterns for this long (30m, 2h); default: the level's, one pass without one");
  memtest->footer(
      "Patterns: walking ones and zeros, own address, moving inversions (ones, zeros, 8-bit, random, 32-bit\n"
      "shifting), a random sequence, modulo 20 and a stress phase, every access coalesced. Each bad word is\n"
      "reported with its device address, the expected and actual values, their XOR and the pattern.\n"
      "Bandwidth is compared with a device-to-device copy in the same run.\n\n" +
      std::string(kExitCodes));
  memtest->callback([options, &context] { RunDiag({DiagTest::kMemtest}, *options, context); });

  auto* burn = diag->add_subcommand(
      "burn", "Matrix products in FP64, FP32, TF32 and BF16 at full load, every result verified");
  AddCommonOptions(burn, *options);
  AddBurnOptions(burn, *options);
  burn->add_option("--size", options->size, "Share of each GPU's free memory the matrices may take (default 90%)");
  burn->add_option("--duration", options->duration,
                   "How long to burn, split over the precisions (default: the level's; 1m without one)");
  burn->footer(
      "Products run through cuBLAS when it is installed (libcublas.so.12 or .11, /usr/local/cuda, or a Python\n"
      "environment's nvidia-cublas wheel), else through gpudoctor's own kernels on the CUDA cores; the result\n"
      "says which. Every product is verified exactly by two checksums of each row. A GPU is faulty on a wrong\n"
      "product, an Xid or a hardware slowdown during the burn, or when it runs more than 10% slower than its\n"
      "peers. 'alone' is the same product without verification, in the same run.\n\n" +
      std::string(kExitCodes));
  burn->callback([options, &context] { RunDiag({DiagTest::kBurn}, *options, context); });

  auto* pcie = diag->add_subcommand(
      "pcie", "Host-to-device and device-to-host bandwidth per GPU, and a GPU-to-GPU copy matrix");
  AddCommonOptions(pcie, *options);
  AddPcieOptions(pcie, *options);
  pcie->footer(
      "Each GPU's link is timed alone with pinned memory, both ways, and judged against what its PCIe\n"
      "generation and width allow (gen5 x16: 63 GB/s; healthy links reach 85-90%, under 60% is a fault).\n"
      "Every copy is checked: data that arrives changed is a fault.\n\n" +
      std::string(kExitCodes));
  pcie->callback([options, &context] { RunDiag({DiagTest::kPcie}, *options, context); });

  auto* all = diag->add_subcommand("all", "memtest, then burn, then pcie");
  AddAllOptions(all, *options);
  all->footer("Levels:\n" + DescribeDiagLevels() + "\n" + std::string(kExitCodes));
  all->callback([options, &context] {
    RunDiag({DiagTest::kMemtest, DiagTest::kBurn, DiagTest::kPcie}, *options, context);
  });
}

}  // namespace gpudoctor
