// `gpudoctor trace-alloc [--json] [--report FILE] [--interval 10s] -- COMMAND ARGS...`:
// runs a program with libgpudoctor_trace_alloc.so preloaded, which records
// every CUDA device, managed and pinned host allocation and free with its call
// stack (trace_alloc/preload/trace_hooks.cc); prints every interval what is
// outstanding and which call sites keep growing, and at the end what was never
// freed, by site, with a verdict in the words of the agent's memory_leak.
// Nothing is written to standard output, which stays the program's.
// Exit: the program's own status (128 + N when signal N ended it); 127 the
// command is not found, 126 it cannot be run, 64 bad command line, 73 the
// report cannot be written (docs/exit-codes.md).
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <cstdio>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "cli/sources.h"
#include "common/json_text.h"
#include "common/loadable_module.h"
#include "common/text.h"
#include "health/detectors/trend_config.h"
#include "trace_alloc/allocation_ledger.h"
#include "trace_alloc/trace_report.h"
#include "trace_alloc/trace_ring.h"
#include "trace_alloc/traced_program.h"

extern char** environ;

namespace gpudoctor {
namespace {

constexpr const char* kLibraryName = "libgpudoctor_trace_alloc.so";
constexpr uint64_t kRingSlots = 1 << 18;  // 16 MiB: a quarter of a million records in flight

struct TraceAllocOptions {
  std::string report_path;
  std::string interval = "10s";
  uint32_t depth = trace_wire::kDefaultFrames;
  std::vector<std::string> command;
};

// Signals gpudoctor takes while the program runs, to pass on.
std::atomic<int> g_pending_signal{0};
std::atomic<int> g_stop_requests{0};  // SIGINT, SIGTERM, SIGHUP and SIGQUIT received
void RememberSignal(int signal) {
  g_pending_signal.store(signal);
  if (signal == SIGINT || signal == SIGTERM || signal == SIGHUP || signal == SIGQUIT) g_stop_requests.fetch_add(1);
}

class SignalRelay {
 public:
  SignalRelay() {
    g_pending_signal.store(0);
    g_stop_requests.store(0);
    struct sigaction action {};
    action.sa_handler = RememberSignal;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &action, &previous_[i]);
  }
  ~SignalRelay() {
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &previous_[i], nullptr);
  }
  // Passes a signal gpudoctor received on to the program. A terminal sends
  // SIGINT and SIGQUIT to its whole foreground group, the program included,
  // so those are passed on only when gpudoctor is not in that group. A second
  // request to stop while the program still runs ends it with SIGKILL: the
  // run always ends when asked twice, whatever the program does with signals.
  void Forward(const TracedProgram& program) {
    const int signal = g_pending_signal.exchange(0);
    if (signal == 0) return;
    if (g_stop_requests.load() >= 2) {
      if (!killed_) std::fprintf(stderr, "gpudoctor trace-alloc: asked again to stop: ending the program (SIGKILL)\n");
      killed_ = true;
      program.Signal(SIGKILL);
      return;
    }
    if ((signal == SIGINT || signal == SIGQUIT) && tcgetpgrp(STDERR_FILENO) == getpgrp()) return;
    program.Signal(signal);
  }
  // True once asked to stop: reading what is left is cut short.
  static bool StopRequested() { return g_stop_requests.load() > 0; }

 private:
  static constexpr std::array<int, 6> kSignals = {SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
  std::array<struct sigaction, 6> previous_{};
  bool killed_ = false;
};

// The library, by a path LD_PRELOAD can carry (it splits at spaces and colons).
std::string FindLibrary(std::string& problem) {
  std::string looked_in;
  for (const std::string& path : ModuleSearchPaths(kLibraryName)) {
    looked_in += (looked_in.empty() ? "" : ", ") + path;
    char resolved[PATH_MAX];
    if (access(path.c_str(), R_OK) != 0 || realpath(path.c_str(), resolved) == nullptr) continue;
    if (std::string(resolved).find_first_of(" :") == std::string::npos) return resolved;
    problem = fmt::format("{} is in a folder whose path holds a space or a colon, which LD_PRELOAD cannot carry: "
                          "the program ran untraced", resolved);
    return "";
  }
  problem = fmt::format("{} was not found (looked in {}): the program ran untraced", kLibraryName, looked_in);
  return "";
}

// Why no process of the program announced the library.
std::string WhyNotAttached(const std::string& program_path, const std::string& library) {
  std::string reason = WhyPreloadIsIgnored(program_path);
  if (!reason.empty()) return "the tracing library could not load: " + reason;
  if (void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    dlclose(handle);
    return "the tracing library never started in the program (the dynamic loader's message, if any, is above)";
  }
  const char* error = dlerror();
  return "the tracing library could not load: " + std::string(error ? error : library);
}

int RunTraceAlloc(const TraceAllocOptions& options, const CommandContext& context) {
  auto fail = [](int code, const std::string& message) {
    std::fprintf(stderr, "gpudoctor trace-alloc: %s\n", message.c_str());
    return code;
  };
  std::optional<Duration> interval = ParseDuration(options.interval);
  if (!interval || interval->count() < 0)
    return fail(exit_code::kUsage, "--interval: not a duration: " + options.interval + " (try 10s, 1m, or 0 for none)");

  MemoryLeakConfig leak_config;
  if (!context.options.config_path.empty()) {
    InputText config = ReadOptionInput(context.options.config_label, context.options.config_path, kMaxConfigFileBytes);
    if (config.error) return fail(config.error->exit_code, config.error->message);
    Result<TrendConfig> trends = ParseTrendConfig(config.text);
    if (!trends) return fail(exit_code::kDataError, context.options.config_path + ": " + trends.error().message);
    leak_config = trends->memory_leak;
  }

  // The report file is opened first, so a path that cannot be written stops
  // us before the program runs rather than after.
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> report_file(nullptr, std::fclose);
  if (!options.report_path.empty()) {
    report_file.reset(std::fopen(options.report_path.c_str(), "w"));
    if (!report_file)
      return fail(exit_code::kCannotCreate, fmt::format("--report {}: {}", options.report_path, std::strerror(errno)));
  }

  const char* path_variable = std::getenv("PATH");
  ResolvedCommand resolved = ResolveCommand(options.command.front(), path_variable ? path_variable : "");
  if (resolved.error) return fail(resolved.error->exit_code, resolved.error->message);

  TraceRunFacts facts;
  facts.command = options.command;
  facts.program_path = resolved.path;
  const std::string library = FindLibrary(facts.library_problem);
  std::unique_ptr<TraceRing> ring;
  if (library.empty()) {
    // FindLibrary said why.
  } else if (Result<std::unique_ptr<TraceRing>> created = TraceRing::Create(kRingSlots); !created) {
    facts.library_problem = "cannot set up the shared ring: " + created.error().message + ": the program ran untraced";
  } else {
    ring = std::move(*created);
  }
  if (!facts.library_problem.empty()) std::fprintf(stderr, "gpudoctor trace-alloc: %s\n", facts.library_problem.c_str());

  std::vector<std::string> environment =
      ring ? TracedEnvironment(environ, library,
                               {fmt::format("{}={}", trace_wire::kFdVariable, ring->fd()),
                                fmt::format("{}={}", trace_wire::kDepthVariable, options.depth)})
           : TracedEnvironment(environ, "", {});

  SignalRelay relay;
  const uint64_t start_ns = MonotonicNowNs();
  StartedProgram started = TracedProgram::Start(resolved.path, options.command, environment);
  if (started.error) return fail(started.error->exit_code, started.error->message);
  TracedProgram& program = *started.program;

  AllocationLedger ledger;
  Symbolizer symbolizer;
  auto add = [&ledger](const TraceRecord& record) { ledger.Add(record); };
  const uint64_t interval_ns = static_cast<uint64_t>(interval->count());
  uint64_t next_interval = start_ns + interval_ns;
  std::optional<ProgramStatus> status;
  bool told_corrupt = false;
  auto tell_corruption = [&] {
    if (told_corrupt || !ring || !ring->corrupt()) return;
    told_corrupt = true;
    std::fprintf(stderr, "gpudoctor trace-alloc: the program overwrote the ring it shares with gpudoctor (%s): "
                 "tracing stopped; the program runs on\n", ring->corruption().c_str());
  };
  while (!status) {
    size_t taken = 0;
    if (ring) {
      ring->Heartbeat();
      taken = ring->Drain(add, 1 << 16);
      tell_corruption();
    }
    relay.Forward(program);
    status = program.Poll();
    const uint64_t now = MonotonicNowNs();
    if (!status && interval_ns > 0 && now >= next_interval) {
      IntervalSummary summary = ledger.CloseInterval(now);
      ++facts.intervals;
      const std::string line = context.options.json
                                   ? ToJsonText(IntervalJson(summary, ledger, symbolizer, now - start_ns)) + "\n"
                                   : RenderInterval(summary, ledger, symbolizer, now - start_ns);
      std::fputs(line.c_str(), stderr);
      while (next_interval <= now) next_interval += interval_ns;
    }
    if (!status && taken == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const uint64_t end_ns = MonotonicNowNs();
  if (ring) {
    // What the program's last moments wrote: bounded by the ring, and cut short by an interrupt.
    ring->DrainRemaining(add, 100'000'000, &SignalRelay::StopRequested);
    tell_corruption();
    if (std::optional<RingCounters> counters = ring->counters()) facts.counters = *counters;
    else facts.counters_known = false;
    facts.ring_corruption = ring->corruption();
    facts.malformed_slots = ring->malformed();
    facts.skipped_slots = ring->skipped();
    if (facts.counters_known && facts.counters.processes_attached == 0)
      facts.library_problem = WhyNotAttached(resolved.path, library);
  }
  if (facts.intervals > 0) {
    ledger.CloseInterval(end_ns);
    ++facts.intervals;
  }
  ledger.Finish(end_ns);
  facts.status = status;
  facts.duration_ns = end_ns - start_ns;

  const TraceReport report = BuildTraceReport(ledger, symbolizer, std::move(facts), leak_config);
  const std::string text =
      context.options.json ? ToJsonText(TraceReportJson(report), 2) + "\n" : RenderTraceReport(report);
  std::FILE* out = report_file ? report_file.get() : stderr;
  if (std::fputs(text.c_str(), out) < 0 || std::fflush(out) != 0)
    std::fprintf(stderr, "gpudoctor trace-alloc: --report %s: %s\n", options.report_path.c_str(), std::strerror(errno));
  if (report_file)
    std::fprintf(stderr, "gpudoctor trace-alloc: %s; report in %s\n", report.verdict_text.c_str(),
                 options.report_path.c_str());
  return status->ShellCode();
}

}  // namespace

void RegisterTraceAllocCommand(CLI::App& app, CommandContext& context) {
  auto options = std::make_shared<TraceAllocOptions>();
  CLI::App* command = app.add_subcommand(
      "trace-alloc",
      "Run a program and find the GPU memory it leaks, down to the call stack that allocated it.\n"
      "A small preloaded library records every CUDA device, managed and pinned host allocation and\n"
      "free (runtime and driver API, including what the runtime reaches through cuGetProcAddress),\n"
      "at well under a microsecond per call. Every --interval, gpudoctor prints the bytes outstanding\n"
      "by kind, their growth and peak, and the call sites whose bytes keep growing; when the program\n"
      "ends, what it never freed, by call site, and a verdict judged like the agent's memory_leak\n"
      "finding (growth rate, memory not released between phases, peak). Everything goes to standard\n"
      "error or --report: standard output stays the program's, and gpudoctor exits with its status.");
  command->add_option("--report", options->report_path,
                      "Write the final report to FILE instead of standard error (text, or JSON with --json)");
  command->add_option("--interval", options->interval,
                      "How often to print what is outstanding and what keeps growing (0: only at the end)")
      ->capture_default_str();
  command->add_option("--depth", options->depth, "Frames kept per call stack")
      ->check(CLI::Range(1u, trace_wire::kMaxFrames))
      ->capture_default_str();
  command->add_option("command", options->command, "The program to run and its arguments, after --")->required();
  command->prefix_command();
  command->footer(
      "Examples:\n"
      "  gpudoctor trace-alloc -- python train.py --epochs 3\n"
      "  gpudoctor trace-alloc --interval 1m --report leak.txt -- ./inference-server --port 8000\n"
      "  gpudoctor trace-alloc --json --report leak.json -- python serve.py   the report as JSON\n"
      "\n"
      "Put -- before the command when it has options of its own. The agent's memory_leak finding\n"
      "names the command to run for the process it saw growing. A program that is statically\n"
      "linked or set-user-ID cannot be traced: it still runs, and the report says why.\n"
      "Exit: the program's status (128+N when signal N ended it); 127 command not found, 126 not\n"
      "executable, 64 bad command line, 73 --report cannot be written. See docs/trace-alloc.md.");
  command->callback([options, &context] { context.exit_code = RunTraceAlloc(*options, context); });
}

}  // namespace gpudoctor
