// RunProcess: runs a program directly (fork + execve, no shell) with a given
// argv and environment, writes `stdin_data` to it, collects its output, and
// kills its whole process group when it overruns its deadline.
//
// Used by the exec alert hook; safe to call from any thread of a
// multi-threaded program (the child only makes async-signal-safe calls).
//
//   Result<ProcessOutcome> r = RunProcess({.argv = {"/usr/local/bin/page", "--team", "gpu"},
//                                          .env = {"GPUDOCTOR_EVENT=opened"},
//                                          .stdin_data = json_text,
//                                          .timeout = std::chrono::seconds(10)});
//   if (r && r->Succeeded()) ...
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace gpudoctor {

struct ProcessSpec {
  std::vector<std::string> argv;  // argv[0]: absolute path of the program
  std::vector<std::string> env;   // "NAME=value"; the child gets exactly these
  std::string stdin_data;         // then stdin is closed
  Duration timeout = std::chrono::seconds(10);
  size_t max_output_bytes = 4096;  // stdout and stderr together; the rest is discarded
  // Set from another thread: the child's group gets SIGTERM, and SIGKILL
  // kCancelGrace later if it has not ended (the agent stopping).
  const std::atomic<bool>* cancel = nullptr;
};

inline constexpr auto kCancelGrace = std::chrono::seconds(10);

struct ProcessOutcome {
  bool timed_out = false;  // killed (SIGKILL to its process group) at the deadline
  int exit_code = -1;      // when it exited by itself
  int signal = 0;          // when a signal ended it
  std::string output;      // stdout and stderr, interleaved, truncated
  bool Succeeded() const { return !timed_out && signal == 0 && exit_code == 0; }
  // "exit status 3", "killed by signal 9", "timed out after 10s".
  std::string Describe(Duration timeout) const;
};

// Fails only when the program could not be started (bad argv, not found,
// not executable, out of resources).
Result<ProcessOutcome> RunProcess(const ProcessSpec& spec);

}  // namespace gpudoctor
