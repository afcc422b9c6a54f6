// `gpudoctor diag memtest`: prove a GPU's memory good or bad. Each GPU's test
// runs in a worker process (diag/diag_run.h) through the CUDA driver, with the
// kernels this build compiled to PTX; the command only watches, draws the
// progress and judges. Exit: 0 every GPU passed, 2 a GPU is faulty or hung,
// 3 a GPU could not be tested (docs/exit-codes.md).
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
#include "cli/sources.h"
#include "common/text.h"
#include "diag/diag_run.h"

namespace gpudoctor {

namespace {

inline constexpr int kDiagFaulty = 2;       // a GPU is faulty or hung
inline constexpr int kDiagCouldNotRun = 3;  // a GPU could not be tested

struct DiagOptions {
  std::string gpus;          // "0,2"; empty: every GPU
  std::string duration = "0s";
  std::string size = "90%";
  std::vector<std::string> patterns;
  std::string stall_timeout = "60s";
  std::string cuda_library;
  bool force = false;
};

std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) { g_interrupted.store(true); }

Result<std::string> FindFakeCudaLibrary(const std::string& executable_path) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(executable_path).parent_path();
  for (const fs::path& candidate : {dir / "libgpudoctor_fake_cuda.so", dir / ".." / "lib" / "gpudoctor" / "libgpudoctor_fake_cuda.so"}) {
    std::error_code ec;
    if (fs::exists(candidate, ec)) return fs::absolute(candidate, ec).lexically_normal().string();
  }
  return Error{"the fake CUDA driver libgpudoctor_fake_cuda.so is not installed beside " + executable_path};
}

std::string Bytes(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1ull << 30));
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1ull << 20));
}

std::string Bar(double fraction, int width) {
  const int filled = static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * width));
  return std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(width - filled), '.');
}

// One line per GPU, redrawn in place on a terminal.
class ProgressBoard {
 public:
  ProgressBoard(std::vector<int> devices, bool enabled) : devices_(std::move(devices)), enabled_(enabled) {
    start_ = std::chrono::steady_clock::now();
  }

  void Update(int device, const MemtestProgress& progress) {
    lines_[device] = progress;
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_draw_ < std::chrono::milliseconds(100) && progress.pass_fraction < 1.0) return;
    last_draw_ = now;
    Draw();
  }

  void Finish() {
    if (enabled_ && drawn_) Draw();
  }

 private:
  void Draw() {
    if (drawn_) std::fprintf(stderr, "\x1b[%zuA", devices_.size());
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    for (int device : devices_) {
      auto found = lines_.find(device);
      std::string line = fmt::format("GPU {:<2} ", device);
      if (found == lines_.end()) {
        line += "starting...";
      } else {
        const MemtestProgress& p = found->second;
        const double fraction = p.pass_fraction;
        const double eta = fraction > 0.01 ? elapsed / fraction - elapsed : 0;
        line += fmt::format("[{}] {:3.0f}%  pass {}  {:<24} {:8.1f} GB/s  ETA {}", Bar(fraction, 24), fraction * 100,
                            p.pass, p.pattern, p.gb_per_s,
                            fraction > 0.01 ? FormatDuration(std::chrono::seconds(static_cast<int64_t>(eta))) : "-");
      }
      std::fprintf(stderr, "\r\x1b[2K%s\n", line.c_str());
    }
    drawn_ = true;
  }

  std::vector<int> devices_;
  bool enabled_;
  bool drawn_ = false;
  std::map<int, MemtestProgress> lines_;
  std::chrono::steady_clock::time_point start_, last_draw_{};
};

nlohmann::ordered_json OutcomeJson(const DiagOutcome& outcome) {
  nlohmann::ordered_json out{{"event", "result"}, {"gpu", outcome.device}, {"test", "memtest"},
                             {"state", DiagStateName(outcome.state)}, {"message", outcome.message}};
  if (outcome.memtest) {
    const MemtestResult& r = *outcome.memtest;
    nlohmann::ordered_json errors = nlohmann::ordered_json::array();
    for (const MemtestError& e : r.errors) {
      errors.push_back({{"address", fmt::format("0x{:x}", e.address)},
                        {"expected", fmt::format("0x{:08x}", e.expected)},
                        {"actual", fmt::format("0x{:08x}", e.actual)},
                        {"xor", fmt::format("0x{:08x}", e.expected ^ e.actual)},
                        {"pattern", e.pattern}});
    }
    nlohmann::ordered_json patterns = nlohmann::ordered_json::array();
    for (const MemtestPatternResult& p : r.patterns) {
      patterns.push_back({{"name", p.name},
                          {"errors", p.errors},
                          {"gb_per_s", p.gb_per_s},
                          {"share_of_copy", r.copy_gb_per_s > 0 ? p.gb_per_s / r.copy_gb_per_s : 0.0}});
    }
    out["name"] = r.device_name;
    out["pci_bus_id"] = r.pci_bus_id;
    out["bytes_tested"] = r.bytes_tested;
    out["passes"] = r.passes;
    out["error_count"] = r.error_count;
    out["copy_gb_per_s"] = r.copy_gb_per_s;
    out["patterns"] = patterns;
    out["errors"] = errors;
  }
  return out;
}

void PrintOutcome(const DiagOutcome& outcome) {
  static const char* kLabels[] = {"PASSED", "FAULTY", "HUNG", "COULD NOT RUN", "INTERRUPTED"};
  const char* label = kLabels[static_cast<int>(outcome.state)];
  std::string who = fmt::format("GPU {}", outcome.device);
  if (outcome.memtest && !outcome.memtest->device_name.empty())
    who += fmt::format(" ({}, {})", outcome.memtest->device_name, outcome.memtest->pci_bus_id);
  std::printf("%s: memtest %s%s\n", who.c_str(), label, outcome.message.empty() ? "" : (": " + outcome.message).c_str());
  if (!outcome.memtest) return;
  const MemtestResult& r = *outcome.memtest;
  const MemtestPatternResult* slowest = nullptr;
  for (const MemtestPatternResult& p : r.patterns)
    if (!slowest || p.gb_per_s < slowest->gb_per_s) slowest = &p;
  std::printf("  %s tested, %zu patterns, %d pass%s; same-run device copy %.1f GB/s", Bytes(r.bytes_tested).c_str(),
              r.patterns.size(), r.passes, r.passes == 1 ? "" : "es", r.copy_gb_per_s);
  if (slowest && r.copy_gb_per_s > 0) {
    std::printf(", slowest pattern %s %.1f GB/s (%.0f%% of the copy)", slowest->name.c_str(), slowest->gb_per_s,
                100.0 * slowest->gb_per_s / r.copy_gb_per_s);
  }
  std::printf("\n");
  if (r.error_count == 0) return;
  std::printf("  %-20s %-10s %-10s %-10s %s\n", "address", "expected", "actual", "xor", "pattern");
  for (size_t i = 0; i < r.errors.size() && i < 20; ++i) {
    const MemtestError& e = r.errors[i];
    std::printf("  0x%-18llx 0x%08x 0x%08x 0x%08x %s\n", static_cast<unsigned long long>(e.address), e.expected,
                e.actual, e.expected ^ e.actual, e.pattern.c_str());
  }
  if (r.errors.size() > 20) std::printf("  ... %zu more recorded (--json lists them all)\n", r.errors.size() - 20);
  std::printf("  What to do: drain the node; check `gpudoctor status` for ECC counts, retired pages and row remaps;\n"
              "  reseat or move the card to another server to tell a bad card from a bad slot; RMA the card if the\n"
              "  errors follow it.\n");
}

void RunDiag(const DiagOptions& options, CommandContext& context) {
  auto fail = [&](int code, const std::string& message) {
    std::fprintf(stderr, "gpudoctor diag: %s\n", message.c_str());
    context.exit_code = code;
  };
  auto duration = ParseDuration(options.duration);
  if (!duration || duration->count() < 0) return fail(exit_code::kUsage, "--duration: not a duration: " + options.duration);
  auto stall = ParseDuration(options.stall_timeout);
  if (!stall || stall->count() <= 0) return fail(exit_code::kUsage, "--stall-timeout: not a duration: " + options.stall_timeout);
  std::string size = options.size;
  if (!size.empty() && size.back() == '%') size.pop_back();
  char* end = nullptr;
  const double percent = std::strtod(size.c_str(), &end);
  if (size.empty() || *end != '\0' || !(percent > 0 && percent <= 100))
    return fail(exit_code::kUsage, "--size: a share of free memory, like 90%, was " + options.size);
  for (const std::string& pattern : options.patterns) {
    const auto& names = MemtestPatternNames();
    if (std::find(names.begin(), names.end(), pattern) == names.end()) {
      std::string known;
      for (std::string_view name : names) known += (known.empty() ? "" : ", ") + std::string(name);
      return fail(exit_code::kUsage, fmt::format("--pattern: unknown pattern '{}' (known: {})", pattern, known));
    }
  }

  // The GPUs, their processes and PCI order come from NVML through the hang-proof probe.
  auto made = MakeSnapshotSource(context, "");
  if (made.error) return fail(made.error->exit_code, made.error->message);
  const Snapshot snapshot = made.source->Collect();
  if (snapshot.gpus.empty()) return fail(kDiagCouldNotRun, "no GPU to test (" + made.description + ")");
  std::vector<int> devices;
  if (options.gpus.empty()) {
    for (const GpuSnapshot& gpu : snapshot.gpus) devices.push_back(static_cast<int>(gpu.index));
  } else {
    for (std::string_view part : Split(options.gpus, ',')) {
      auto index = ParseInt<int>(Trim(part));
      if (!index || *index < 0 || static_cast<size_t>(*index) >= snapshot.gpus.size())
        return fail(exit_code::kUsage, fmt::format("--gpu: no GPU '{}' ({} found)", part, snapshot.gpus.size()));
      devices.push_back(*index);
    }
  }
  // Safety: a GPU running compute work is not ours to fill with patterns.
  std::vector<DiagOutcome> refused;
  std::vector<int> tested;
  for (int device : devices) {
    const GpuSnapshot* gpu = snapshot.FindGpu(static_cast<uint32_t>(device));
    const size_t busy = gpu && gpu->processes.has_value() ? gpu->processes.value().size() : 0;
    if (busy > 0 && !options.force) {
      refused.push_back({.device = device, .state = DiagState::kCouldNotRun,
                         .message = fmt::format("{} process{} running on it; stop them or pass --force", busy,
                                                busy == 1 ? " is" : "es are")});
    } else {
      tested.push_back(device);
    }
  }

  DiagRunOptions run;
  run.worker = context.executable_path;
  run.devices = tested;
  run.stall_timeout = *stall;
  run.worker_options.cuda_library = options.cuda_library;
  run.worker_options.memtest.duration = *duration;
  run.worker_options.memtest.free_share = percent / 100.0;
  run.worker_options.memtest.patterns = options.patterns;
  run.extra_env.push_back("CUDA_DEVICE_ORDER=PCI_BUS_ID");  // CUDA's ordinals in NVML's order
  if (!context.options.simulate.empty()) {
    auto fake = FindFakeCudaLibrary(context.executable_path);
    if (!fake) return fail(kDiagCouldNotRun, fake.error().message);
    run.worker_options.cuda_library = *fake;
    std::error_code ec;
    run.extra_env.push_back("GPUDOCTOR_SCENARIO=" + std::filesystem::absolute(context.options.simulate, ec).string());
  }

  struct sigaction action {};
  action.sa_handler = OnInterrupt;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  const bool json = context.options.json;
  ProgressBoard board(tested, !json && isatty(STDERR_FILENO));
  std::vector<DiagOutcome> outcomes = RunDiagWorkers(
      run,
      [&](int device, const MemtestProgress& progress) {
        if (json) {
          nlohmann::ordered_json line{{"event", "progress"}, {"gpu", device}, {"test", "memtest"},
                                      {"pattern", progress.pattern}, {"pass", progress.pass},
                                      {"fraction", progress.pass_fraction}, {"gb_per_s", progress.gb_per_s}};
          std::printf("%s\n", line.dump().c_str());
          std::fflush(stdout);
        }
        board.Update(device, progress);
      },
      [] { return g_interrupted.load(); });
  board.Finish();
  outcomes.insert(outcomes.end(), refused.begin(), refused.end());
  std::sort(outcomes.begin(), outcomes.end(), [](const DiagOutcome& a, const DiagOutcome& b) { return a.device < b.device; });

  bool faulty = false, could_not_run = false;
  for (const DiagOutcome& outcome : outcomes) {
    faulty |= outcome.state == DiagState::kFaulty || outcome.state == DiagState::kHung;
    could_not_run |= outcome.state == DiagState::kCouldNotRun || outcome.state == DiagState::kInterrupted;
    if (json) std::printf("%s\n", OutcomeJson(outcome).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    else PrintOutcome(outcome);
  }
  context.exit_code = faulty ? kDiagFaulty : could_not_run ? kDiagCouldNotRun : exit_code::kOk;
}

}  // namespace

int RunDiagWorkerCommandLine(int argc, char** argv) {
  std::vector<std::string> arguments(argv + 2, argv + argc);
  auto options = ParseDiagWorkerArguments(arguments);
  if (!options) {
    std::fprintf(stderr, "%s\n", options.error().message.c_str());
    return exit_code::kUsage;
  }
  return RunMemtestWorker(*options, STDOUT_FILENO);
}

void RegisterDiagCommand(CLI::App& app, CommandContext& context) {
  auto* diag = app.add_subcommand("diag", "Stress a GPU to prove it good or bad: memory test (more to come)");
  diag->require_subcommand(1);
  auto options = std::make_shared<DiagOptions>();
  auto* memtest = diag->add_subcommand(
      "memtest", "Write and check patterns over most of each GPU's free memory; report every bad word");
  memtest->add_option("--gpu", options->gpus, "GPUs to test, by NVML index: 0,2 (default: all)");
  memtest->add_option("--duration", options->duration,
                      "Repeat the patterns for this long (30m, 2h); 0s: one pass of every pattern")
      ->capture_default_str();
  memtest->add_option("--size", options->size, "Share of each GPU's free memory to test")->capture_default_str();
  memtest->add_option("--pattern", options->patterns, "Run only these patterns (repeat the option): " + [] {
    std::string names;
    for (std::string_view name : MemtestPatternNames()) names += (names.empty() ? "" : ", ") + std::string(name);
    return names;
  }());
  memtest->add_option("--stall-timeout", options->stall_timeout,
                      "A GPU silent this long is reported hung and its worker ended")
      ->capture_default_str();
  memtest->add_option("--cuda-lib", options->cuda_library, "CUDA driver library to load instead of libcuda.so.1");
  memtest->add_flag("--force", options->force, "Test GPUs that run compute processes too (they may fail)");
  memtest->footer(
      "Each GPU is tested by its own worker process, all at once. Patterns: walking ones and zeros, own\n"
      "address, moving inversions (ones, zeros, 8-bit, random, 32-bit shifting), a random sequence,\n"
      "modulo 20 and a stress phase, every access coalesced. Each bad word is reported with its device\n"
      "address, the expected and actual values, their XOR and the pattern. Bandwidth is compared with a\n"
      "device-to-device copy in the same run.\n\n"
      "Examples:\n"
      "  gpudoctor diag memtest                      every GPU, one pass of every pattern\n"
      "  gpudoctor diag memtest --gpu 3 --duration 30m\n"
      "  gpudoctor diag memtest --json               JSON lines: progress, then one result per GPU\n\n"
      "Exit codes: 0 every GPU passed, 2 a GPU is faulty (memory errors, failed or hung during the test),\n"
      "3 a GPU could not be tested (no driver, busy, too little memory, built without kernels), 64 usage.");
  memtest->callback([options, &context] { RunDiag(*options, context); });
}

}  // namespace gpudoctor
