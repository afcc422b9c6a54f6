// Running diagnostics without ever hanging the command: each GPU's test runs
// in a worker process (`gpudoctor __diag-worker`), which reports progress and
// its result as JSON lines on its standard output. The parent runs the GPUs
// in parallel and ends a worker that has said nothing for `stall_timeout`: a
// launch that never returns is the GPU's fault (`hung`), never a hung command.
//
//   std::vector<DiagOutcome> outcomes = RunDiagWorkers(options, on_progress);
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "diag/memtest.h"

namespace gpudoctor {

// ---- the worker ----

struct DiagWorkerOptions {
  std::string cuda_library;  // empty: libcuda.so.1
  MemtestOptions memtest;
};

// Runs the memory test of one device and writes JSON lines to `out_fd`:
// {"event":"progress",...}, then {"event":"result",...} or
// {"event":"failed","started":bool,"message":...}. Returns the exit status.
// SIGINT and SIGTERM stop it between kernels, with everything freed.
int RunMemtestWorker(const DiagWorkerOptions& options, int out_fd);

// ---- the parent ----

enum class DiagState {
  kPassed,       // ran to the end, no error
  kFaulty,       // memory errors, or the GPU failed during the test
  kHung,         // silent past the deadline: a kernel or a driver call never returned
  kCouldNotRun,  // no driver, no such GPU, too little memory, built without kernels...
  kInterrupted,  // stopped by the user
};
const char* DiagStateName(DiagState state);  // "passed", "faulty", "hung", "could_not_run", "interrupted"

struct DiagOutcome {
  int device = 0;
  DiagState state = DiagState::kCouldNotRun;
  std::string message;                  // why, when not passed
  std::optional<MemtestResult> memtest;  // when the test ran
};

struct DiagRunOptions {
  std::string worker;                  // the gpudoctor executable
  std::vector<std::string> extra_env;  // NAME=value for the workers (the simulated scenario)
  DiagWorkerOptions worker_options;    // memtest.device is set per GPU
  std::vector<int> devices;
  Duration stall_timeout = std::chrono::seconds(60);
};

// Runs every device's worker at once; `progress` is called on this thread.
std::vector<DiagOutcome> RunDiagWorkers(const DiagRunOptions& options,
                                        const std::function<void(int device, const MemtestProgress&)>& progress,
                                        const std::function<bool()>& stop);

// The worker's command line (after the executable), and its parser.
std::vector<std::string> DiagWorkerArguments(const DiagWorkerOptions& options);
Result<DiagWorkerOptions> ParseDiagWorkerArguments(const std::vector<std::string>& arguments);

}  // namespace gpudoctor
