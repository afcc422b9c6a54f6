#include "agent/subprocess.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "common/text.h"

namespace gpudoctor {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(RunProcess, FeedsStdinAndCollectsOutput) {
  Result<ProcessOutcome> r = RunProcess({.argv = {"/bin/cat"}, .stdin_data = "hello\nworld\n"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->Succeeded());
  EXPECT_EQ(r->output, "hello\nworld\n");
}

TEST(RunProcess, ReportsExitStatusAndSignals) {
  Result<ProcessOutcome> r = RunProcess({.argv = {"/bin/sh", "-c", "echo out; echo err >&2; exit 7"}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->Succeeded());
  EXPECT_EQ(r->exit_code, 7);
  EXPECT_EQ(r->output, "out\nerr\n");
  EXPECT_EQ(r->Describe(seconds(1)), "exit status 7");

  r = RunProcess({.argv = {"/bin/sh", "-c", "kill -TERM $$"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->signal, SIGTERM);
  EXPECT_EQ(r->Describe(seconds(1)), "killed by signal 15");
}

TEST(RunProcess, GivesExactlyTheEnvironmentItIsTold) {
  ::setenv("GPUDOCTOR_TEST_SECRET", "leak", 1);
  Result<ProcessOutcome> r = RunProcess({.argv = {"/usr/bin/env"}, .env = {"A=1", "B=two words"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->output, "A=1\nB=two words\n");
}

bool ProcessIsGone(pid_t pid) {
  // A zombie nobody reaps still answers kill(pid, 0); read its state instead.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z';
}

TEST(RunProcess, TimeoutKillsTheWholeProcessGroup) {
  const auto started = std::chrono::steady_clock::now();
  Result<ProcessOutcome> r =
      RunProcess({.argv = {"/bin/sh", "-c", "sleep 60 & echo $!; wait"}, .timeout = milliseconds(500)});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_FALSE(r->Succeeded());
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(5));
  EXPECT_EQ(r->Describe(milliseconds(500)), "timed out after 500ms");
  std::optional<pid_t> grandchild = ParseInt<pid_t>(Trim(r->output));
  ASSERT_TRUE(grandchild.has_value()) << r->output;
  for (int i = 0; i < 100 && !ProcessIsGone(*grandchild); ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(ProcessIsGone(*grandchild));
}

TEST(RunProcess, ChildThatIgnoresStdinDoesNotHurtUs) {
  // More than a pipe holds, to a program that never reads it: EPIPE, not SIGPIPE.
  Result<ProcessOutcome> r = RunProcess({.argv = {"/bin/true"}, .stdin_data = std::string(1 << 20, 'x')});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->Succeeded());
}

TEST(RunProcess, OutputIsTruncated) {
  Result<ProcessOutcome> r = RunProcess(
      {.argv = {"/bin/sh", "-c", "head -c 100000 /dev/zero | tr '\\0' y"}, .max_output_bytes = 1000});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->Succeeded());
  EXPECT_EQ(r->output, std::string(1000, 'y'));
}

TEST(RunProcess, DoesNotLeakOurFileDescriptors) {
  const int fd = ::open("/dev/null", O_RDONLY);  // deliberately not close-on-exec
  ASSERT_GE(fd, 3);
  Result<ProcessOutcome> r = RunProcess(
      {.argv = {"/bin/sh", "-c",
                fmt::format("if [ -e /proc/self/fd/{} ]; then echo leaked; else echo clean; fi", fd)}});
  ::close(fd);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->output, "clean\n");
}

TEST(RunProcess, RefusesWhatItCannotRun) {
  EXPECT_FALSE(RunProcess({.argv = {}}).ok());
  EXPECT_FALSE(RunProcess({.argv = {"cat"}}).ok());
  Result<ProcessOutcome> missing = RunProcess({.argv = {"/nonexistent/program"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("No such file or directory"), std::string::npos);
  const std::string plain_file = ::testing::TempDir() + "/not_executable_" + std::to_string(::getpid());
  std::ofstream(plain_file) << "#!/bin/sh\n";
  Result<ProcessOutcome> not_executable = RunProcess({.argv = {plain_file}});
  std::filesystem::remove(plain_file);
  ASSERT_FALSE(not_executable.ok());
  EXPECT_NE(not_executable.error().message.find("Permission denied"), std::string::npos);
}

}  // namespace
}  // namespace gpudoctor
