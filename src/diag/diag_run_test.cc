// The worker's command line, both ways, and the parent's handling of workers
// that misbehave: garbage on the pipe, a result it cannot read, silence, a
// crash. Stand-in workers are shell scripts.
#include "diag/diag_run.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "common/scratch_dir.h"

namespace gpudoctor {
namespace {

TEST(DiagWorkerArguments, EveryTestsOptionsSurviveTheCommandLine) {
  DiagWorkerOptions memtest{.test = DiagTest::kMemtest, .cuda_library = "/x/libcuda.so.1"};
  memtest.memtest = {.device = 3, .free_share = 0.5, .chunk_bytes = 1 << 20, .duration = std::chrono::seconds(90),
                     .patterns = {"own_address", "stress"}};
  auto parsed = ParseDiagWorkerArguments(DiagWorkerArguments(memtest));
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->test, DiagTest::kMemtest);
  EXPECT_EQ(parsed->cuda_library, "/x/libcuda.so.1");
  EXPECT_EQ(parsed->memtest.device, 3);
  EXPECT_EQ(parsed->memtest.free_share, 0.5);
  EXPECT_EQ(parsed->memtest.chunk_bytes, 1u << 20);
  EXPECT_EQ(parsed->memtest.duration, std::chrono::seconds(90));
  EXPECT_EQ(parsed->memtest.patterns, memtest.memtest.patterns);

  DiagWorkerOptions burn{.test = DiagTest::kBurn, .cublas_library = "none"};
  burn.burn = {.device = 1, .duration = std::chrono::seconds(30), .precisions = {Precision::kBf16}, .matrix = 4096};
  parsed = ParseDiagWorkerArguments(DiagWorkerArguments(burn));
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->burn.device, 1);
  EXPECT_EQ(parsed->burn.duration, std::chrono::seconds(30));
  EXPECT_EQ(parsed->burn.precisions, std::vector<Precision>{Precision::kBf16});
  EXPECT_EQ(parsed->burn.matrix, 4096u);
  EXPECT_EQ(parsed->cublas_library, "none");

  DiagWorkerOptions pcie{.test = DiagTest::kPcie};
  pcie.pcie = {.devices = {0, 2, 5}, .transfer_bytes = 1 << 24, .repeats = 3, .peers = false};
  parsed = ParseDiagWorkerArguments(DiagWorkerArguments(pcie));
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->pcie.devices, (std::vector<int>{0, 2, 5}));
  EXPECT_EQ(parsed->pcie.transfer_bytes, 1u << 24);
  EXPECT_EQ(parsed->pcie.repeats, 3);
  EXPECT_FALSE(parsed->pcie.peers);
}

TEST(DiagWorkerArguments, BadCommandLinesAreRefusedWithTheReason) {
  EXPECT_FALSE(ParseDiagWorkerArguments({}));
  EXPECT_FALSE(ParseDiagWorkerArguments({"fry"}));
  EXPECT_FALSE(ParseDiagWorkerArguments({"burn", "--device"}));
  auto bad = ParseDiagWorkerArguments({"burn", "--device", "x"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("--device"), std::string::npos);
  EXPECT_FALSE(ParseDiagWorkerArguments({"burn", "--precision", "fp8"}));
  EXPECT_FALSE(ParseDiagWorkerArguments({"pcie", "--colour", "red"}));
}

class Workers : public ::testing::Test {
 protected:
  // Runs `script` as the worker of two GPUs (memtest: one worker each).
  std::vector<DiagOutcome> Run(const std::string& script, Duration stall = std::chrono::seconds(20)) {
    const std::string path = dir_.Write("worker.sh", "#!/bin/sh\n" + script);
    chmod(path.c_str(), 0755);
    DiagRunOptions options{.worker = path, .devices = {0, 1}, .stall_timeout = stall};
    return RunDiagWorkers(options, nullptr, nullptr);
  }
  testing::ScratchDir dir_;
};

TEST_F(Workers, GarbageAndPartialLinesAreIgnoredAndTheLastResultCounts) {
  auto outcomes = Run(
      "printf 'not json\\n\\001\\377\\n{\"event\":\"progress\",\"fraction\":\"half\"}\\n'\n"
      "printf '{\"event\":\"result\",\"result\":{\"error_count\":0,\"passes\":1}}\\n{\"event\":\"resu'\n");
  ASSERT_EQ(outcomes.size(), 2u);
  for (const DiagOutcome& outcome : outcomes) {
    EXPECT_EQ(outcome.state, DiagState::kPassed) << outcome.message;
    ASSERT_TRUE(outcome.memtest);
    EXPECT_EQ(outcome.memtest->passes, 1);
  }
}

TEST(WorkerLines, LinesOfTheWrongShapeNeverThrow) {
  DiagOutcome outcome{.test = DiagTest::kBurn, .devices = {0}, .state = DiagState::kPassed};
  DiagProgress progress;
  EXPECT_EQ(ReadWorkerLine("{\"event\":\"progress\",\"fraction\":\"half\"}", outcome, progress), WorkerLine::kIgnored);
  EXPECT_EQ(ReadWorkerLine("{\"event\":5}", outcome, progress), WorkerLine::kIgnored);
  EXPECT_EQ(ReadWorkerLine("[1,2]", outcome, progress), WorkerLine::kIgnored);
  EXPECT_EQ(ReadWorkerLine("{\"event\":\"progress\",\"step\":\"bf16\",\"rate\":512.5}", outcome, progress),
            WorkerLine::kProgress);
  EXPECT_EQ(progress.step, "bf16");
  EXPECT_EQ(progress.rate, 512.5);
  EXPECT_EQ(ReadWorkerLine("{\"event\":\"failed\",\"started\":\"yes\"}", outcome, progress), WorkerLine::kFinal);
  EXPECT_EQ(outcome.state, DiagState::kCouldNotRun);
  EXPECT_NE(outcome.message.find("failed could not be read"), std::string::npos) << outcome.message;
  EXPECT_EQ(ReadWorkerLine("{\"event\":\"result\",\"result\":{\"precisions\":[{\"wrong_iterations\":2}]}}", outcome,
                           progress),
            WorkerLine::kFinal);
  EXPECT_EQ(outcome.state, DiagState::kFaulty);
  EXPECT_EQ(outcome.message, "2 wrong matrix products");
  // A fraction where an integer belongs, beyond the integer's range (fuzz_diag_worker found it): converting it
  // would be undefined, so the line is ignored, or the result unreadable.
  EXPECT_EQ(ReadWorkerLine("{\"event\":\"progress\",\"pass\":1.4e22}", outcome, progress), WorkerLine::kIgnored);
  EXPECT_EQ(ReadWorkerLine("{\"event\":\"result\",\"result\":{\"precisions\":[{\"iterations\":-1e300}]}}", outcome,
                           progress),
            WorkerLine::kFinal);
  EXPECT_EQ(outcome.state, DiagState::kCouldNotRun);
  EXPECT_NE(outcome.message.find("out of its field's range"), std::string::npos) << outcome.message;
}

TEST_F(Workers, AResultOfTheWrongShapeCouldNotBeRead) {
  auto outcomes = Run("echo '{\"event\":\"result\",\"result\":{\"error_count\":\"many\"}}'\n");
  EXPECT_EQ(outcomes[0].state, DiagState::kCouldNotRun);
  EXPECT_NE(outcomes[0].message.find("could not be read"), std::string::npos) << outcomes[0].message;
}

TEST_F(Workers, AWorkerThatExitsWithoutAResultSaysHow) {
  auto outcomes = Run("echo garbage; exit 3\n");
  EXPECT_EQ(outcomes[0].state, DiagState::kCouldNotRun);
  EXPECT_NE(outcomes[0].message.find("exited 3 without a result"), std::string::npos) << outcomes[0].message;
  outcomes = Run("kill -SEGV $$\n");
  EXPECT_EQ(outcomes[1].state, DiagState::kCouldNotRun);
  EXPECT_NE(outcomes[1].message.find("died of signal 11"), std::string::npos) << outcomes[1].message;
}

TEST_F(Workers, ASilentWorkerIsEndedAsHung) {
  auto outcomes = Run("echo '{\"event\":\"progress\"}'; exec sleep 600\n", std::chrono::milliseconds(500));
  for (const DiagOutcome& outcome : outcomes) {
    EXPECT_EQ(outcome.state, DiagState::kHung);
    EXPECT_NE(outcome.message.find("never returned"), std::string::npos);
  }
}

TEST(WorkerLines, AHeartbeatCarriesTheCountOfWorkDoneAndNothingElse) {
  DiagOutcome outcome{.test = DiagTest::kMemtest, .devices = {0}};
  DiagProgress progress{.step = "own_address"};
  EXPECT_EQ(ReadWorkerLine("{\"event\":\"heartbeat\",\"units\":42,\"slowest_unit_s\":1.5}", outcome, progress),
            WorkerLine::kHeartbeat);
  EXPECT_EQ(progress.units, 42u);
  EXPECT_EQ(progress.slowest_unit, std::chrono::milliseconds(1500));
  EXPECT_EQ(progress.step, "own_address");  // not a step
  EXPECT_EQ(ReadWorkerLine("{\"event\":\"heartbeat\",\"units\":-1}", outcome, progress), WorkerLine::kIgnored);
  EXPECT_EQ(ReadWorkerLine("{\"event\":\"heartbeat\",\"units\":1,\"slowest_unit_s\":-5}", outcome, progress),
            WorkerLine::kHeartbeat);
  EXPECT_EQ(progress.slowest_unit, Duration::zero());
  EXPECT_EQ(ReadWorkerLine("{\"event\":\"heartbeat\",\"units\":1,\"slowest_unit_s\":1e300}", outcome, progress),
            WorkerLine::kHeartbeat);
  EXPECT_LE(progress.slowest_unit, std::chrono::hours(24 * 365 * 100));
}

// The heartbeat goes on while a kernel never returns: the count, not the
// line, says whether the work advances.
TEST_F(Workers, AWorkerWhoseCountStopsIsHungThoughItsHeartbeatGoesOn) {
  auto outcomes = Run(
      "echo '{\"event\":\"heartbeat\",\"units\":5,\"slowest_unit_s\":0.001}'\n"
      "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.2; echo '{\"event\":\"heartbeat\",\"units\":5}'; done\n"
      "echo '{\"event\":\"result\",\"result\":{\"passes\":1}}'\n",
      std::chrono::milliseconds(500));
  for (const DiagOutcome& outcome : outcomes) EXPECT_EQ(outcome.state, DiagState::kHung) << outcome.message;
}

// Once a unit has taken 0.15 s, units 1.4 s apart outlast the 1 s stall
// timeout but not 20 times the slowest unit: the worker finishes.
TEST_F(Workers, AWorkerWhoseCountKeepsGrowingSlowlyIsNeverHung) {
  auto outcomes = Run(
      "echo '{\"event\":\"heartbeat\",\"units\":1,\"slowest_unit_s\":0.15}'\n"
      "for n in 2 3; do sleep 0.7; echo '{\"event\":\"heartbeat\",\"units\":1,\"slowest_unit_s\":0.15}';\n"
      "  sleep 0.7; echo \"{\\\"event\\\":\\\"heartbeat\\\",\\\"units\\\":$n,\\\"slowest_unit_s\\\":1.4}\"; done\n"
      "echo '{\"event\":\"result\",\"result\":{\"passes\":1}}'\n",
      std::chrono::seconds(1));
  for (const DiagOutcome& outcome : outcomes) EXPECT_EQ(outcome.state, DiagState::kPassed) << outcome.message;
}

TEST_F(Workers, AFailureBeforeTheTestCouldNotRunAndOneDuringItIsFaulty) {
  auto outcomes = Run(
      "if [ \"$4\" = 0 ]; then echo '{\"event\":\"failed\",\"started\":false,\"message\":\"no driver\"}';\n"
      "else echo '{\"event\":\"failed\",\"started\":true,\"message\":\"CUDA_ERROR_LAUNCH_FAILED\"}'; fi\n");
  EXPECT_EQ(outcomes[0].state, DiagState::kCouldNotRun);
  EXPECT_EQ(outcomes[0].message, "no driver");
  EXPECT_EQ(outcomes[1].state, DiagState::kFaulty);
}

}  // namespace
}  // namespace gpudoctor
