// Running diagnostics without ever hanging the command: the GPU work runs in
// worker processes (`gpudoctor __diag-worker`), which report progress, a
// heartbeat with their count of work done, and their result as JSON lines on
// their standard output. The parent runs them in parallel and ends a worker
// whose work has not advanced for its deadline (diag/progress_pulse.h): a
// launch that never returns is the GPU's fault (`hung`), never a hung command,
// and a worker slowed by a loaded host is slow, not hung.
//
// memtest and burn run one worker per GPU; pcie runs one worker for all the
// GPUs, which copies between them and times each link alone.
//
//   std::vector<DiagOutcome> outcomes = RunDiagWorkers(options, on_progress, stop);
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "diag/burn.h"
#include "diag/memtest.h"
#include "diag/pcie.h"

namespace gpudoctor {

enum class DiagTest { kMemtest, kBurn, kPcie };
const char* DiagTestName(DiagTest test);  // "memtest", "burn", "pcie"
std::optional<DiagTest> ParseDiagTest(std::string_view name);

// ---- the worker ----

struct DiagWorkerOptions {
  DiagTest test = DiagTest::kMemtest;
  std::string cuda_library;    // empty: libcuda.so.1
  std::string cublas_library;  // burn: empty searches (diag/cublas.h); "none" uses gpudoctor's kernels
  MemtestOptions memtest;
  BurnOptions burn;
  PcieOptions pcie;
};

// Runs one test and writes JSON lines to `out_fd`: {"event":"progress",...}
// after each step, {"event":"heartbeat","units":N,"slowest_unit_s":S} every
// kHeartbeatInterval (diag/progress_pulse.h), then {"event":"result",...} or
// {"event":"failed","started":bool,"message":...}. Returns the exit status.
// SIGINT and SIGTERM stop it between kernels, with everything freed.
int RunDiagWorker(const DiagWorkerOptions& options, int out_fd);

// The worker's command line (after the executable), and its parser.
std::vector<std::string> DiagWorkerArguments(const DiagWorkerOptions& options);
Result<DiagWorkerOptions> ParseDiagWorkerArguments(const std::vector<std::string>& arguments);

// ---- the parent ----

enum class DiagState {
  kPassed,       // ran to the end, nothing wrong
  kFaulty,       // errors found, or the GPU failed during the test
  kHung,         // silent past the deadline: a kernel or a driver call never returned
  kCouldNotRun,  // no driver, no such GPU, too little memory, built without kernels...
  kInterrupted,  // stopped by the user
};
const char* DiagStateName(DiagState state);  // "passed", "faulty", "hung", "could_not_run", "interrupted"

// Progress of any test: the step (a pattern, a precision, a link), how far
// the whole test is, and the last rate (GB/s, or TFLOP/s for the burn); and
// the worker's count of units of work done (diag/progress_pulse.h), which
// heartbeats carry alone.
struct DiagProgress {
  std::string step;
  double fraction = 0;
  int pass = 1;
  double rate = 0;
  uint64_t units = 0;
  Duration slowest_unit{};
};

// What one worker came back with. The state is the worker's own: the burn's
// peers and the pcie test's link limits are judged by the caller, who knows
// the other GPUs and the links.
struct DiagOutcome {
  DiagTest test = DiagTest::kMemtest;
  std::vector<int> devices;
  DiagState state = DiagState::kCouldNotRun;
  std::string message;  // why, when not passed
  std::optional<MemtestResult> memtest;
  std::optional<BurnResult> burn;
  std::optional<PcieResult> pcie;
};

// How the parent reads one line of a worker's output: a progress line fills
// `progress`; a heartbeat fills its units and slowest_unit; a result or a
// failure settles `outcome` (a result of the wrong shape makes it
// could_not_run); anything else, garbage included, is ignored.
enum class WorkerLine { kIgnored, kProgress, kHeartbeat, kFinal };
WorkerLine ReadWorkerLine(std::string_view line, DiagOutcome& outcome, DiagProgress& progress);

struct DiagRunOptions {
  std::string worker;                  // the gpudoctor executable
  std::vector<std::string> extra_env;  // NAME=value for the workers (the simulated scenario)
  DiagWorkerOptions worker_options;    // the device fields are set per worker
  std::vector<int> devices;
  // The least time without progress before a worker is hung (StallWatch).
  Duration stall_timeout = std::chrono::seconds(60);
};

// Runs the workers at once; `progress` is called on this thread with the
// worker's first device.
std::vector<DiagOutcome> RunDiagWorkers(const DiagRunOptions& options,
                                        const std::function<void(int device, const DiagProgress&)>& progress,
                                        const std::function<bool()>& stop);

}  // namespace gpudoctor
