#include "host/command_runner.h"

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(SubprocessRunner, CapturesOutputErrorsAndExitCode) {
  SubprocessRunner runner;
  CommandResult result = runner.Run({"sh", "-c", "echo out; echo err >&2; exit 3"}, seconds(10));
  EXPECT_EQ(result.status, CommandStatus::kExited);
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.output, "out\n");
  EXPECT_EQ(result.errors, "err\n");
}

TEST(SubprocessRunner, ReportsMissingProgram) {
  SubprocessRunner runner;
  CommandResult result = runner.Run({"gpudoctor-no-such-program-xyz"}, seconds(10));
  EXPECT_EQ(result.status, CommandStatus::kNotInstalled);
}

TEST(SubprocessRunner, KillsProgramAtDeadline) {
  SubprocessRunner runner;
  CommandResult result = runner.Run({"sh", "-c", "echo started; exec sleep 30"}, milliseconds(200));
  EXPECT_EQ(result.status, CommandStatus::kTimedOut);
  EXPECT_EQ(result.output, "started\n");
}

TEST(SubprocessRunner, RejectsEmptyCommand) {
  SubprocessRunner runner;
  EXPECT_EQ(runner.Run({}, seconds(1)).status, CommandStatus::kFailedToStart);
}

}  // namespace
}  // namespace gpudoctor
