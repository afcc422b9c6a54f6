#include "trace_alloc/traced_program.h"

#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace gpudoctor {
namespace {

TEST(ResolveCommand, SearchesPathLikeAShell) {
  ResolvedCommand sh = ResolveCommand("sh", "/nonexistent:/bin:/usr/bin");
  ASSERT_FALSE(sh.error) << sh.error->message;
  EXPECT_EQ(sh.path, "/bin/sh");
  ResolvedCommand missing = ResolveCommand("no-such-program-gpudoctor", "/bin:/usr/bin");
  ASSERT_TRUE(missing.error);
  EXPECT_EQ(missing.error->exit_code, 127);
  EXPECT_EQ(missing.error->message, "no-such-program-gpudoctor: command not found");
  ResolvedCommand directory = ResolveCommand("/tmp", "");
  ASSERT_TRUE(directory.error);
  EXPECT_EQ(directory.error->exit_code, 126);
  ResolvedCommand absent = ResolveCommand("/no/such/program", "");
  ASSERT_TRUE(absent.error);
  EXPECT_EQ(absent.error->exit_code, 127);
  // A file that is not executable: 126.
  const std::string plain = ::testing::TempDir() + "/not-executable";
  std::ofstream(plain) << "data";
  ResolvedCommand refused = ResolveCommand(plain, "");
  if (getuid() != 0) {
    ASSERT_TRUE(refused.error);
    EXPECT_EQ(refused.error->exit_code, 126);
  }
}

TEST(TracedProgram, PassesTheStatusAndSignalsThrough) {
  StartedProgram exits = TracedProgram::Start("/bin/sh", {"sh", "-c", "exit 7"}, {});
  ASSERT_TRUE(exits.program);
  ProgramStatus status = exits.program->Wait();
  EXPECT_EQ(status.ShellCode(), 7);
  EXPECT_EQ(status.Describe(), "exited with status 7");
  StartedProgram killed = TracedProgram::Start("/bin/sh", {"sh", "-c", "kill -TERM $$"}, {});
  ASSERT_TRUE(killed.program);
  status = killed.program->Wait();
  EXPECT_EQ(status.signal, SIGTERM);
  EXPECT_EQ(status.ShellCode(), 128 + SIGTERM);
  EXPECT_EQ(status.Describe().rfind("killed by signal 15", 0), 0u) << status.Describe();
}

TEST(TracedProgram, IgnoredSignalsAreDefaultAgainInTheProgram) {
  signal(SIGINT, SIG_IGN);
  StartedProgram program = TracedProgram::Start("/bin/sh", {"sh", "-c", "kill -INT $$; exit 0"}, {});
  signal(SIGINT, SIG_DFL);
  ASSERT_TRUE(program.program);
  EXPECT_EQ(program.program->Wait().signal, SIGINT);
}

TEST(TracedEnvironment, PutsTheLibraryFirstAndReplacesNames) {
  const char* base_entries[] = {"PATH=/bin", "LD_PRELOAD=/other.so", "GPUDOCTOR_TRACE_FD=9", nullptr};
  std::vector<std::string> env =
      TracedEnvironment(const_cast<char**>(base_entries), "/lib/trace.so", {"GPUDOCTOR_TRACE_FD=3"});
  EXPECT_NE(std::find(env.begin(), env.end(), "PATH=/bin"), env.end());
  EXPECT_NE(std::find(env.begin(), env.end(), "LD_PRELOAD=/lib/trace.so:/other.so"), env.end());
  EXPECT_NE(std::find(env.begin(), env.end(), "GPUDOCTOR_TRACE_FD=3"), env.end());
  EXPECT_EQ(std::find(env.begin(), env.end(), "GPUDOCTOR_TRACE_FD=9"), env.end());
  std::vector<std::string> untraced = TracedEnvironment(const_cast<char**>(base_entries), "", {});
  EXPECT_NE(std::find(untraced.begin(), untraced.end(), "LD_PRELOAD=/other.so"), untraced.end());
}

TEST(WhyPreloadIsIgnored, NamesStaticAndScriptInterpreters) {
  EXPECT_EQ(WhyPreloadIsIgnored("/bin/sh"), "") << "a dynamic program takes the library";
  const std::string script = ::testing::TempDir() + "/script.sh";
  std::ofstream(script) << "#!/bin/sh\necho hi\n";
  EXPECT_EQ(WhyPreloadIsIgnored(script), "");
  // ldconfig is statically linked on Debian.
  if (access("/sbin/ldconfig", R_OK) == 0 && WhyPreloadIsIgnored("/sbin/ldconfig") != "") {
    EXPECT_NE(WhyPreloadIsIgnored("/sbin/ldconfig").find("statically linked"), std::string::npos);
  }
}

}  // namespace
}  // namespace gpudoctor
