// `gpudoctor trace-alloc` end to end: the built binary traces small programs
// (tests/trace_alloc/programs) that leak in known ways over the stub CUDA
// runtime and driver (testing/fake_cudart), and every number of the report is
// checked: bytes, counts, kinds, the functions that allocated, the verdict,
// the exit status passed through and standard output left to the program.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/run_binary.h"

namespace gpudoctor::testing {
namespace {

using json = nlohmann::json;
constexpr uint64_t kKiB = 1024, kMiB = 1024 * 1024;

std::string Program(const std::string& name) { return std::string(GPUDOCTOR_TRACE_TEST_DIR) + "/" + name; }

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

struct Traced {
  int exit_code = -1;
  std::string stdout_text;  // the program's alone
  std::string stderr_text;  // gpudoctor's live lines and messages, and the program's
  std::string report;       // --report's file
  json Json() const { return json::parse(report); }
};

// Runs `gpudoctor trace-alloc OPTIONS -- COMMAND` with `env` before it.
Traced Trace(const std::string& options, const std::string& command, const std::string& env = "",
             const std::string& binary = Binary()) {
  static int counter = 0;
  const std::string dir = ::testing::TempDir();
  const std::string report = dir + "/trace-report-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
  const std::string errors = report + ".stderr";
  std::filesystem::remove(report);
  RunResult run = RunShell(env + (env.empty() ? "" : " ") + binary + " trace-alloc --report " + report + " " +
                           options + " -- " + command + " 2>" + errors);
  return {run.exit_code, run.output, ReadFile(errors), ReadFile(report)};
}

const json* SiteNamed(const json& sites, const std::string& function) {
  for (const json& site : sites) {
    for (const json& frame : site["frames"]) {
      if (frame["function"].is_string() && frame["function"].get<std::string>().find(function) == 0) return &site;
      break;  // only the frame that called CUDA names the site
    }
  }
  return nullptr;
}

TEST(TraceAllocE2e, AGrowingListIsALeakAtItsFunction) {
  Traced run = Trace("--json", Program("leak_list") + " 100 5");
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_EQ(run.stdout_text, "leak_list: kept 100 buffers\n") << "standard output is the program's alone";
  json report = run.Json();
  EXPECT_EQ(report["verdict"]["state"], "leak") << report["verdict"].dump(2);
  EXPECT_TRUE(report["verdict"]["troughs_rising"]);
  EXPECT_GT(report["verdict"]["rate_bytes_per_min"].get<double>(), 2.0 * kMiB);
  // One record per cudaMalloc, though the runtime called the driver for each.
  EXPECT_EQ(report["kinds"]["device"]["allocations"], 200);
  EXPECT_EQ(report["kinds"]["device"]["frees"], 100);
  EXPECT_EQ(report["kinds"]["device"]["outstanding_bytes"], 100 * kMiB);
  EXPECT_EQ(report["kinds"]["device"]["peak_bytes"], 102 * kMiB);
  EXPECT_EQ(report["totals"]["outstanding_bytes"], 100 * kMiB);
  ASSERT_EQ(report["never_freed"].size(), 1u) << report["never_freed"].dump(2);
  const json& leak = report["never_freed"][0];
  EXPECT_EQ(leak["outstanding_bytes"], 100 * kMiB);
  EXPECT_EQ(leak["outstanding_allocations"], 100);
  EXPECT_EQ(leak["api"], "cudaMalloc");
  EXPECT_EQ(leak["kind"], "device");
  EXPECT_EQ(leak["frames"][0]["function"].get<std::string>().rfind("GrowList(", 0), 0u) << leak.dump(2);
  EXPECT_EQ(leak["frames"][1]["function"], "main");
  const json* scratch = SiteNamed(report["sites"], "UseScratch");
  ASSERT_NE(scratch, nullptr);
  EXPECT_EQ((*scratch)["allocations"], 100);
  EXPECT_EQ((*scratch)["frees"], 100);
  EXPECT_EQ((*scratch)["outstanding_bytes"], 0);
  EXPECT_EQ(report["processes"].size(), 1u);
  EXPECT_TRUE(report["library"]["loaded"]);
  EXPECT_GE(report["library"]["dlsym_wrapped"], 1) << "the runtime found cuGetProcAddress with dlsym";
  EXPECT_GE(report["library"]["proc_address_wrapped"], 8) << "and the driver's allocation calls through it";
  EXPECT_EQ(report["library"]["records_dropped"], 0);
}

TEST(TraceAllocE2e, APerRequestLeakAmongFreesIsFoundInTextToo) {
  Traced run = Trace("", Program("leak_per_request") + " 200 2");
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  EXPECT_EQ(run.stdout_text, "leak_per_request: served 200 requests\n");
  const std::string& text = run.report;
  EXPECT_NE(text.find("leak_per_request 200 2 exited with status 0"), std::string::npos) << text;
  EXPECT_NE(text.find("Never freed at exit: 50.0 MiB in 200 allocations from 1 site"), std::string::npos) << text;
  EXPECT_NE(text.find("50.0 MiB in 200 allocations by cudaMallocAsync (device); 200 made, 0 freed"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("at RememberRequest()  (leak_per_request)"), std::string::npos) << text;
  EXPECT_NE(text.find("HandleRequest("), std::string::npos) << text;
  EXPECT_NE(text.find("Verdict: memory leak: CUDA memory keeps growing: rate"), std::string::npos) << text;
  EXPECT_NE(text.find("unreleased between phases"), std::string::npos) << text;
  // The table: device 600 allocations (input, output, cache entry), 400 frees; pinned all freed.
  EXPECT_NE(text.find("device           50.0 MiB     58.0 MiB          600        400"), std::string::npos) << text;
  EXPECT_NE(text.find("host pinned           0 B     64.0 KiB          200        200"), std::string::npos) << text;
  EXPECT_NE(run.stderr_text.find("gpudoctor trace-alloc: memory leak"), std::string::npos) << run.stderr_text;
}

TEST(TraceAllocE2e, AManagedAllocationNeverFreedIsNotGrowth) {
  Traced run = Trace("--json", Program("leak_managed") + " 50 2");
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  json report = run.Json();
  EXPECT_EQ(report["verdict"]["state"], "never_freed") << report["verdict"].dump(2);
  EXPECT_EQ(report["verdict"]["summary"].get<std::string>().rfind(
                "no steady growth, but 64.0 MiB never freed at exit, in 1 allocation from 1 site (LoadEmbeddings()", 0),
            0u)
      << report["verdict"].dump(2);
  EXPECT_EQ(report["kinds"]["managed"]["outstanding_bytes"], 64 * kMiB);
  EXPECT_EQ(report["kinds"]["managed"]["allocations"], 1);
  EXPECT_EQ(report["kinds"]["host_pinned"]["allocations"], 50);
  EXPECT_EQ(report["kinds"]["host_pinned"]["frees"], 50);
  EXPECT_EQ(report["kinds"]["host_pinned"]["peak_bytes"], kMiB);
  EXPECT_EQ(report["kinds"]["device"]["allocations"], 0);
  ASSERT_EQ(report["never_freed"].size(), 1u);
  EXPECT_EQ(report["never_freed"][0]["api"], "cudaMallocManaged");
  EXPECT_EQ(report["never_freed"][0]["kind"], "managed");
}

void CheckProcAddressLeaks(const json& report) {
  EXPECT_EQ(report["totals"]["outstanding_bytes"], 64 * kMiB) << report["never_freed"].dump(2);
  ASSERT_EQ(report["never_freed"].size(), 3u) << report["never_freed"].dump(2);
  const json* driver = SiteNamed(report["never_freed"], "LeakThroughProcAddress");
  ASSERT_NE(driver, nullptr) << report["never_freed"].dump(2);
  EXPECT_EQ((*driver)["api"], "cuMemAlloc_v2");
  EXPECT_EQ((*driver)["outstanding_bytes"], 40 * kMiB);
  EXPECT_EQ((*driver)["outstanding_allocations"], 20);
  const json* entry_point = SiteNamed(report["never_freed"], "LeakThroughEntryPoint");
  ASSERT_NE(entry_point, nullptr);
  EXPECT_EQ((*entry_point)["api"], "cuMemAllocManaged");
  EXPECT_EQ((*entry_point)["kind"], "managed");
  EXPECT_EQ((*entry_point)["outstanding_bytes"], 8 * kMiB);
  const json* mapped = SiteNamed(report["never_freed"], "MapPool");
  ASSERT_NE(mapped, nullptr);
  EXPECT_EQ((*mapped)["api"], "cuMemCreate");
  EXPECT_EQ((*mapped)["outstanding_bytes"], 16 * kMiB) << "released, but still mapped";
  EXPECT_EQ((*mapped)["allocations"], 1) << "the 32 MiB scratch handle is a site of its own, freed";
  EXPECT_EQ((*mapped)["frees"], 0);
  EXPECT_EQ(report["kinds"]["device"]["allocations"], 42);  // 20 kept, 20 freed, 2 handles
  EXPECT_EQ(report["kinds"]["device"]["frees"], 21);
}

TEST(TraceAllocE2e, AllocationsThroughCuGetProcAddressAreSeen) {
  Traced run = Trace("--json", Program("leak_proc_address"));
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  json report = run.Json();
  CheckProcAddressLeaks(report);
  EXPECT_GE(report["library"]["dlsym_wrapped"], 2) << "the program's and the runtime's";
  EXPECT_EQ(report["library"]["proc_address_unmatched"], 0);
}

TEST(TraceAllocE2e, EntryPointsThatAreNotExportsAreMatchedByName) {
  Traced run = Trace("--json", Program("leak_proc_address"), "GPUDOCTOR_STUB_PRIVATE_ENTRY_POINTS=1");
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  json report = run.Json();
  CheckProcAddressLeaks(report);
  EXPECT_GE(report["library"]["proc_address_by_name"], 2);
}

TEST(TraceAllocE2e, ThreadsAndForkedChildrenAreCountedApart) {
  Traced run = Trace("--json", Program("threads_and_fork"));
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text;
  json report = run.Json();
  EXPECT_EQ(report["processes"].size(), 2u);
  EXPECT_EQ(report["kinds"]["device"]["allocations"], 8 * 1000 + 8 * 10 + 1);
  EXPECT_EQ(report["kinds"]["device"]["frees"], 8 * 1000);
  EXPECT_EQ(report["totals"]["outstanding_bytes"], 80 * 64 * kKiB + kMiB);
  const json* kept = SiteNamed(report["never_freed"], "KeepPerThread");
  ASSERT_NE(kept, nullptr) << report["never_freed"].dump(2);
  EXPECT_EQ((*kept)["outstanding_allocations"], 80);
  const json* child = SiteNamed(report["never_freed"], "ChildKeeps");
  ASSERT_NE(child, nullptr);
  EXPECT_EQ((*child)["outstanding_bytes"], kMiB);
  EXPECT_NE((*child)["pid"], (*kept)["pid"]);
  EXPECT_EQ(report["library"]["records_dropped"], 0);
}

TEST(TraceAllocE2e, TheProgramsStatusAndSignalPassThrough) {
  Traced exits = Trace("", Program("exit_with") + " 3");
  EXPECT_EQ(exits.exit_code, 3);
  EXPECT_EQ(exits.stdout_text, "program output\n");
  EXPECT_NE(exits.report.find("exited with status 3"), std::string::npos) << exits.report;
  EXPECT_NE(exits.report.find("at LeakOnce()"), std::string::npos) << exits.report;

  Traced killed = Trace("--json", Program("exit_with") + " signal:15");
  EXPECT_EQ(killed.exit_code, 128 + 15);
  json report = killed.Json();
  EXPECT_EQ(report["status"]["signal"], 15);
  EXPECT_EQ(report["status"]["shell_code"], 143);
  EXPECT_EQ(report["totals"]["outstanding_bytes"], kMiB) << "what it held when it was killed";
}

TEST(TraceAllocE2e, LiveIntervalsNameTheGrowingSite) {
  Traced run = Trace("--interval 100ms", Program("leak_list") + " 100 5");
  ASSERT_EQ(run.exit_code, 0);
  EXPECT_NE(run.stderr_text.find("gpudoctor trace-alloc:"), std::string::npos) << run.stderr_text;
  EXPECT_NE(run.stderr_text.find("growing: +"), std::string::npos) << run.stderr_text;
  EXPECT_NE(run.stderr_text.find("GrowList("), std::string::npos) << run.stderr_text;
  EXPECT_NE(run.report.find(", kept growing"), std::string::npos) << run.report;

  Traced json_lines = Trace("--json --interval 100ms", Program("leak_list") + " 60 5");
  ASSERT_EQ(json_lines.exit_code, 0);
  int intervals = 0;
  std::istringstream lines(json_lines.stderr_text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    json event = json::parse(line);
    EXPECT_EQ(event["event"], "interval");
    ++intervals;
  }
  EXPECT_GE(intervals, 1) << json_lines.stderr_text;
}

TEST(TraceAllocE2e, CommandErrorsAreAShellsNumbers) {
  Traced missing = Trace("", "no-such-command-gpudoctor arg");
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_NE(missing.stderr_text.find("no-such-command-gpudoctor: command not found"), std::string::npos)
      << missing.stderr_text;
  Traced directory = Trace("", "/tmp");
  EXPECT_EQ(directory.exit_code, 126);
  RunResult no_command = RunGpudoctor("trace-alloc", Stderr::kCapture);
  EXPECT_EQ(no_command.exit_code, 64);
  RunResult bad_interval = RunGpudoctor("trace-alloc --interval soon -- true", Stderr::kCapture);
  EXPECT_EQ(bad_interval.exit_code, 64);
  EXPECT_NE(bad_interval.output.find("--interval: not a duration: soon"), std::string::npos) << bad_interval.output;
  // A report that cannot be written stops gpudoctor before the program runs.
  RunResult unwritable =
      RunGpudoctor("trace-alloc --report /nonexistent/dir/report -- " + Program("exit_with"), Stderr::kDiscard);
  EXPECT_EQ(unwritable.exit_code, 73);
  EXPECT_EQ(unwritable.output, "") << "the program did not run";
}

TEST(TraceAllocE2e, WithoutItsLibraryTheProgramStillRunsAndGpudoctorSaysWhy) {
  const std::string dir = ::testing::TempDir() + "/trace-alloc-alone-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string copy = dir + "/gpudoctor";
  std::filesystem::copy_file(Binary(), copy, std::filesystem::copy_options::overwrite_existing);
  Traced run = Trace("", Program("exit_with") + " 5", "", copy);
  EXPECT_EQ(run.exit_code, 5);
  EXPECT_EQ(run.stdout_text, "program output\n");
  EXPECT_NE(run.stderr_text.find("libgpudoctor_trace_alloc.so was not found"), std::string::npos) << run.stderr_text;
  EXPECT_NE(run.report.find("Verdict: nothing recorded"), std::string::npos) << run.report;
  std::filesystem::remove_all(dir);
}

TEST(TraceAllocE2e, AStaticProgramRunsUntracedWithTheReason) {
  Traced run = Trace("", Program("static_program"));
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.stdout_text, "static program\n");
  EXPECT_NE(run.report.find("is statically linked: no dynamic loader runs"), std::string::npos) << run.report;
}

// The traced program can write every byte gpudoctor reads from it. Whatever it
// writes, gpudoctor says the ring is corrupt, stops reading it, lets the
// program run on and exits with the program's status, in seconds.
TEST(TraceAllocE2e, AProgramThatOverwritesTheRingCannotHoldGpudoctor) {
  for (const char* mode : {"head", "behind", "random"}) {
    SCOPED_TRACE(mode);
    Traced run = Trace("--json", Program("ring_scribbler") + " " + mode, "timeout -s KILL 60");
    ASSERT_EQ(run.exit_code, 3) << run.stderr_text;
    EXPECT_NE(run.stderr_text.find("overwrote the ring it shares with gpudoctor"), std::string::npos)
        << run.stderr_text;
    EXPECT_EQ(std::count(run.stderr_text.begin(), run.stderr_text.end(), '\n'), 2) << "said once, then the verdict: "
                                                                                     << run.stderr_text;
    json report = run.Json();
    EXPECT_TRUE(report["library"]["ring_corrupt"].is_string()) << report["library"].dump(2);
    EXPECT_TRUE(report["library"]["records_dropped"].is_null()) << "no counter of a corrupt ring is believed";
    EXPECT_EQ(report["status"]["exit_code"], 3);
    EXPECT_GE(report["kinds"]["device"]["allocations"], 10) << "what was read before still counts";
  }
  Traced head = Trace("", Program("ring_scribbler") + " head", "timeout -s KILL 60");
  EXPECT_NE(head.report.find("write position 4611686018427387904 is"), std::string::npos) << head.report;
  EXPECT_EQ(head.report.find("18446744073709551615"), std::string::npos) << head.report;
}

TEST(TraceAllocE2e, CountersThatCannotBeTrueAreNotShown) {
  Traced run = Trace("", Program("ring_scribbler") + " dropped", "timeout -s KILL 60");
  ASSERT_EQ(run.exit_code, 3) << run.stderr_text;
  EXPECT_EQ(run.report.find("18446744073709551615"), std::string::npos) << run.report;
  EXPECT_NE(run.report.find("the ring's counters were overwritten by the program"), std::string::npos) << run.report;
}

// SIGTERM reaches the program; a program that ignores it is ended when
// gpudoctor is asked a second time, and gpudoctor exits with its status.
TEST(TraceAllocE2e, AskedTwiceToStopTheRunEnds) {
  const std::string dir = ::testing::TempDir() + "/trace-alloc-signals-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string script =
      Binary() + " trace-alloc --report " + dir + "/report -- " + Program("ring_scribbler") + " ignore-signals >" +
      dir + "/out 2>" + dir + "/err & pid=$!; "
      "for i in $(seq 100); do grep -q ready " + dir + "/out && break; sleep 0.1; done; "
      "kill -TERM $pid; sleep 0.5; kill -TERM $pid; wait $pid; echo $?";
  RunResult run = RunShell("timeout -s KILL 25 sh -c '" + script + "'");
  EXPECT_EQ(run.output, "137\n") << ReadFile(dir + "/err");
  EXPECT_LT(run.took, std::chrono::seconds(20));
  EXPECT_NE(ReadFile(dir + "/err").find("asked again to stop: ending the program (SIGKILL)"), std::string::npos);
  EXPECT_NE(ReadFile(dir + "/report").find("killed by signal 9"), std::string::npos) << ReadFile(dir + "/report");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpudoctor::testing
