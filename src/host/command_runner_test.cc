#include "host/command_runner.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

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

// A wrapper script's children go at the deadline too: Slurm's commands are
// often scripts, and a child left running would outlive every deadline.
TEST(SubprocessRunner, KillsWhatTheProgramStartedAtDeadline) {
  SubprocessRunner runner;
  CommandResult result = runner.Run({"sh", "-c", "sleep 30 & echo $!; wait"}, milliseconds(300));
  EXPECT_EQ(result.status, CommandStatus::kTimedOut);
  const pid_t child = std::atoi(result.output.c_str());
  ASSERT_GT(child, 0) << result.output;
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    // A killed child is a zombie until init reaps it: gone once /proc says so or it is no more.
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string text;
    std::getline(stat, text);
    gone = text.empty() || text.find(") Z") != std::string::npos;
    if (!gone) std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(gone) << "the sleep the script started is still running";
}

TEST(SubprocessRunner, RejectsEmptyCommand) {
  SubprocessRunner runner;
  EXPECT_EQ(runner.Run({}, seconds(1)).status, CommandStatus::kFailedToStart);
}

}  // namespace
}  // namespace gpudoctor
