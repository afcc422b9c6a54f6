// CommandRunner: runs an external program (ipmitool) with a deadline and
// captures what it prints. Tests replace it with canned output.
//
//   SubprocessRunner runner;
//   CommandResult r = runner.Run({"ipmitool", "sdr", "elist"}, std::chrono::seconds(20));
//   if (r.status == CommandStatus::kExited && r.exit_code == 0) Parse(r.output);
#pragma once

#include <string>
#include <vector>

#include "common/clock.h"

namespace gpudoctor {

enum class CommandStatus {
  kExited,         // ran to the end; see exit_code
  kNotInstalled,   // the program is not on PATH
  kTimedOut,       // killed at the deadline
  kFailedToStart,  // any other reason it could not run; see message
};

struct CommandResult {
  CommandStatus status = CommandStatus::kFailedToStart;
  int exit_code = -1;   // meaningful for kExited; 128+signal when a signal ended it
  std::string output;   // standard output
  std::string errors;   // standard error
  std::string message;  // why it did not run, for kFailedToStart
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // argv[0] is looked up on PATH. Output beyond a few MiB is dropped.
  virtual CommandResult Run(const std::vector<std::string>& argv, Duration timeout) = 0;
};

// Runs real programs: stdin is /dev/null, stdout and stderr are captured, and
// the child is killed when the deadline passes.
class SubprocessRunner final : public CommandRunner {
 public:
  CommandResult Run(const std::vector<std::string>& argv, Duration timeout) override;
};

}  // namespace gpudoctor
