// `gpudoctor diag` end to end: the built binary against simulated servers,
// with the fake CUDA driver running the kernels on the CPU and injecting the
// faults of each scenario ([cuda] in docs/scenarios.md).
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/scratch_dir.h"
#include "tests/run_binary.h"

namespace gpudoctor {
namespace {

using nlohmann::json;
using testing::RunGpudoctor;
using testing::RunResult;
using testing::RunShell;
using testing::Stderr;


class Diag : public ::testing::Test {
 protected:
  // A server of `gpus` GPUs on gen4 x8 links (15.75 GB/s) with `extra` appended.
  std::string Scenario(int gpus, const std::string& extra) {
    return dir_.Write("scenario.toml", "gpu_count = " + std::to_string(gpus) +
                                           "\n[defaults]\npcie_generation_max = 4\npcie_width_max = 8\n"
                                           "pcie_generation_current = 4\npcie_width_current = 8\n" +
                                           extra);
  }

  // Runs diag with --json; every line must be a JSON object.
  RunResult Run(const std::string& scenario, const std::string& arguments, const std::string& prefix = "") {
    RunResult result = RunGpudoctor("--simulate " + scenario + " diag " + arguments + " --json", Stderr::kDiscard, prefix);
    lines_.clear();
    std::istringstream in(result.output);
    for (std::string line; std::getline(in, line);) {
      json value = json::parse(line, nullptr, false);
      EXPECT_TRUE(value.is_object()) << "not a JSON line: " << line;
      if (value.is_object()) lines_.push_back(std::move(value));
    }
    return result;
  }

  json Summary() const {
    for (const json& line : lines_)
      if (line.value("event", "") == "summary") return line;
    ADD_FAILURE() << "no summary line";
    return json::object();
  }

  // The summary's row for `gpu` and `test`.
  json Row(int gpu, const std::string& test) const {
    const json summary = Summary();  // kept: the loop walks a part of it
    for (const json& row : summary["results"])
      if (row["gpu"] == gpu && row["test"] == test) return row;
    ADD_FAILURE() << "no summary row for GPU " << gpu << " " << test;
    return json::object();
  }

  std::vector<json> Results() const {
    std::vector<json> out;
    for (const json& line : lines_)
      if (line.value("event", "") == "result") out.push_back(line);
    return out;
  }

  json ResultOf(int gpu, const std::string& test) const {
    for (const json& line : Results())
      if (line["gpu"] == gpu && line["test"] == test) return line;
    ADD_FAILURE() << "no result for GPU " << gpu << " " << test;
    return json::object();
  }

  static bool Mentions(const json& result, const std::string& text) {
    for (const json& problem : result["problems"])
      if (problem.get<std::string>().find(text) != std::string::npos) return true;
    return false;
  }

  testing::ScratchDir dir_;
  std::vector<json> lines_;
};

// Processes still running with this scenario in their environment: the workers get it, nothing else does.
int WorkersOf(const std::string& scenario) {
  RunResult r = RunShell("grep -lsF 'GPUDOCTOR_SCENARIO=" + scenario + "' /proc/[0-9]*/environ | wc -l");
  return std::atoi(r.output.c_str());
}

bool BuiltWithKernels() {
  // Without clang-16 the workers say so and every GPU "could not run".
  static const bool built = [] {
    testing::ScratchDir dir;
    const std::string scenario = dir.Write("s.toml", "gpu_count = 1\n[cuda]\nmemory_mib = 2\n");
    RunResult r = RunGpudoctor("--simulate " + scenario + " diag burn --matrix 16 --duration 0s --json");
    return r.output.find("built without GPU kernels") == std::string::npos;
  }();
  return built;
}

#define REQUIRE_KERNELS() \
  if (!BuiltWithKernels()) GTEST_SKIP() << "built without clang-16: no GPU kernels"

TEST_F(Diag, HealthyGpusPassEveryTestAndReportProgress) {
  REQUIRE_KERNELS();
  const std::string scenario = Scenario(2, "[cuda]\nmemory_mib = 4\npcie_gbps = 14\np2p_gbps = 14\n");
  RunResult r = Run(scenario, "all --duration 1s --matrix 32 --transfer-size 4");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(Results().size(), 6u) << r.output;
  for (const json& result : Results()) {
    EXPECT_EQ(result["state"], "passed") << result.dump();
    EXPECT_TRUE(result["problems"].empty()) << result.dump();
    EXPECT_FALSE(result["summary"].get<std::string>().empty());
  }
  EXPECT_EQ(ResultOf(0, "memtest")["error_count"], 0);
  EXPECT_EQ(ResultOf(1, "burn")["precisions"].size(), 4u);
  EXPECT_EQ(ResultOf(1, "burn")["precisions"][0]["engine"], "gpudoctor kernel (CUDA cores)");
  EXPECT_EQ(ResultOf(0, "pcie")["peers"].size(), 1u);
  std::set<std::string> progressed;
  for (const json& line : lines_)
    if (line["event"] == "progress") progressed.insert(line["test"].get<std::string>());
  EXPECT_EQ(progressed, (std::set<std::string>{"memtest", "burn", "pcie"}));
}

TEST_F(Diag, AStuckBitIsReportedWithItsAddressBitAndPattern) {
  REQUIRE_KERNELS();
  const std::string scenario =
      Scenario(2, "[cuda]\nmemory_mib = 4\n[[cuda.fault]]\ngpu = 1\n"
                  "stuck_bits = [{ offset = 1048640, bit = 9, value = 0 }]\n");
  RunResult r = Run(scenario, "memtest --pattern walking_ones --pattern own_address");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(ResultOf(0, "memtest")["state"], "passed");
  const json bad = ResultOf(1, "memtest");
  EXPECT_EQ(bad["state"], "faulty");
  ASSERT_FALSE(bad["errors"].empty());
  std::set<std::string> addresses;
  for (const json& error : bad["errors"]) {
    EXPECT_EQ(error["xor"], "0x00000200") << error.dump();  // bit 9
    addresses.insert(error["address"].get<std::string>());
  }
  EXPECT_EQ(addresses.size(), 1u);
  EXPECT_EQ(bad["errors"][0]["pattern"], "walking_ones");
}

TEST_F(Diag, AWrongProductMakesTheBurnFailAndSaysWhere) {
  REQUIRE_KERNELS();
  const std::string scenario = Scenario(
      1, "[cuda]\nmemory_mib = 4\n[[cuda.fault]]\ngpu = 0\nwrong_product = { row = 5, col = 9, delta = 3.0 }\n");
  RunResult r = Run(scenario, "burn --matrix 32 --duration 1s --precision bf16");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  const json burn = ResultOf(0, "burn");
  EXPECT_EQ(burn["state"], "faulty");
  EXPECT_TRUE(Mentions(burn, "wrong matrix product")) << burn.dump();
  ASSERT_FALSE(burn["errors"].empty());
  EXPECT_EQ(burn["errors"][0]["rows"], json::array({5}));
  EXPECT_EQ(burn["errors"][0]["cols"], json::array({9}));
  // The text output names the entry.
  RunResult text = RunGpudoctor("--simulate " + scenario + " diag burn --matrix 32 --duration 0s --precision fp64");
  EXPECT_NE(text.output.find("entry C[5, 9]"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("What to do"), std::string::npos);
}

TEST_F(Diag, CublasIsUsedWhenFoundAndSaysSo) {
  REQUIRE_KERNELS();
  const std::string scenario = Scenario(1, "[cuda]\nmemory_mib = 4\n");
  const std::string cublas = std::string(GPUDOCTOR_BINARY_DIR) + "/bin/libgpudoctor_fake_cuda.so";
  RunResult r = Run(scenario, "burn --matrix 32 --duration 0s --cublas-lib " + cublas);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const json with_cublas = ResultOf(0, "burn");
  for (const json& precision : with_cublas["precisions"]) EXPECT_EQ(precision["engine"], "cuBLAS 12.8.4");
  // A library that is not cuBLAS is refused with the reason, and the burn goes on with its own kernels.
  r = Run(scenario, "burn --matrix 32 --duration 0s --precision fp32 --cublas-lib /nonexistent/libcublas.so.12");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const json burn = ResultOf(0, "burn");
  EXPECT_EQ(burn["precisions"][0]["engine"], "gpudoctor kernel (CUDA cores)");
  ASSERT_FALSE(burn["notes"].empty());
  EXPECT_NE(burn["notes"][0].get<std::string>().find("/nonexistent/libcublas.so.12"), std::string::npos);
}

TEST_F(Diag, AGpuSlowerThanItsPeersIsFaulty) {
  REQUIRE_KERNELS();
  const std::string scenario =
      Scenario(3, "[cuda]\nmemory_mib = 4\ngemm_ms = 4\n[[cuda.fault]]\ngpu = 2\nslow_factor = 2.0\n");
  RunResult r = Run(scenario, "burn --matrix 16 --duration 1s --precision fp32");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(ResultOf(0, "burn")["state"], "passed");
  EXPECT_EQ(ResultOf(1, "burn")["state"], "passed");
  EXPECT_EQ(ResultOf(2, "burn")["state"], "faulty");
  EXPECT_TRUE(Mentions(ResultOf(2, "burn"), "slower than its peers")) << ResultOf(2, "burn").dump();
}

TEST_F(Diag, AHungGpuIsEndedAtItsDeadlineAndTheOthersFinish) {
  REQUIRE_KERNELS();
  const std::string scenario = Scenario(2, "[cuda]\nmemory_mib = 4\n[[cuda.fault]]\ngpu = 0\nhang_at_launch = 3\n");
  // 5 s: long enough that the healthy worker, starting under a sanitizer on a loaded machine, is never
  // silent that long; short enough that the hung one is ended well within the bound below.
  RunResult r = Run(scenario, "memtest --stall-timeout 5s --pattern own_address", "timeout 60");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(ResultOf(0, "memtest")["state"], "hung");
  EXPECT_EQ(ResultOf(1, "memtest")["state"], "passed");
  EXPECT_LT(r.took, std::chrono::seconds(20));
  EXPECT_EQ(WorkersOf(scenario), 0) << "a worker was left behind";
}

TEST_F(Diag, ADeviceLostMidwayIsFaultyWithTheDriversWords) {
  REQUIRE_KERNELS();
  const std::string scenario = Scenario(1, "[cuda]\nmemory_mib = 4\n[[cuda.fault]]\ngpu = 0\nlost_at_launch = 12\n");
  RunResult r = Run(scenario, "burn --matrix 16 --duration 1s");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(Mentions(ResultOf(0, "burn"), "CUDA_ERROR_LAUNCH_FAILED")) << ResultOf(0, "burn").dump();
}

TEST_F(Diag, TooLittleMemoryCouldNotRun) {
  REQUIRE_KERNELS();
  const std::string scenario = Scenario(1, "[cuda]\nmemory_mib = 4\n[[cuda.fault]]\ngpu = 0\nfree_mib = 0.001\n");
  RunResult r = Run(scenario, "memtest");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_EQ(ResultOf(0, "memtest")["state"], "could_not_run");
  EXPECT_TRUE(Mentions(ResultOf(0, "memtest"), "too little free memory"));
}

TEST_F(Diag, ADriverTooOldForTheKernelsCouldNotRunAndSaysWhichItNeeds) {
  const std::string scenario = Scenario(2, "[cuda]\nmemory_mib = 4\ndriver_version = 10020\n");
  RunResult r = Run(scenario, "memtest");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  for (int gpu : {0, 1}) {
    EXPECT_EQ(ResultOf(gpu, "memtest")["state"], "could_not_run");
    EXPECT_TRUE(Mentions(ResultOf(gpu, "memtest"), "driver too old for the diag kernels (needs R450, found CUDA 10.2)"))
        << ResultOf(gpu, "memtest");
  }
}

TEST_F(Diag, ABusyGpuIsRefusedUnlessForced) {
  REQUIRE_KERNELS();
  const std::string scenario = Scenario(
      2, "[gpu.1]\nprocesses = [{ pid = 4242, name = \"python\", used_memory_mib = 100 }]\n[cuda]\nmemory_mib = 4\n");
  RunResult r = Run(scenario, "memtest --pattern own_address");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_EQ(ResultOf(0, "memtest")["state"], "passed");
  EXPECT_EQ(ResultOf(1, "memtest")["state"], "could_not_run");
  EXPECT_TRUE(Mentions(ResultOf(1, "memtest"), "--force"));
  r = Run(scenario, "memtest --pattern own_address --force --gpu 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(Results().size(), 1u);
}

// Two runs on one GPU would each read the other's load as a fault: the second
// is refused for that GPU, with the holder's PID, and tests the others.
TEST_F(Diag, ASecondRunOnTheSameGpuIsRefusedWithTheHoldersPid) {
  REQUIRE_KERNELS();
  const std::string scenario = Scenario(2, "[cuda]\nmemory_mib = 4\n");
  const std::string run_dir = dir_.File("run");
  const std::string env = "GPUDOCTOR_RUN_DIR=" + run_dir;
  RunResult first = Run(scenario, "memtest --pattern own_address", env);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  std::vector<std::string> locks;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir)) locks.push_back(entry.path().string());
  std::sort(locks.begin(), locks.end());
  ASSERT_EQ(locks.size(), 2u) << "one lock file per GPU, by bus id";
  // Another run holds GPU 1, as `gpudoctor diag` does: flock and its PID in the file.
  const int held = open(locks[1].c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(flock(held, LOCK_EX | LOCK_NB), 0);
  ASSERT_EQ(ftruncate(held, 0), 0);
  ASSERT_EQ(pwrite(held, "4242\n", 5, 0), 5);
  RunResult second = Run(scenario, "memtest --pattern own_address", env);
  EXPECT_EQ(second.exit_code, 3) << second.output;
  EXPECT_EQ(ResultOf(0, "memtest")["state"], "passed");
  EXPECT_EQ(ResultOf(1, "memtest")["state"], "could_not_run");
  EXPECT_TRUE(Mentions(ResultOf(1, "memtest"), "another gpudoctor diag (pid 4242) is testing this GPU"))
      << ResultOf(1, "memtest").dump(2);
  close(held);
  RunResult third = Run(scenario, "memtest --pattern own_address", env);
  EXPECT_EQ(third.exit_code, 0) << "free again once the holder is gone: " << third.output;
}

TEST_F(Diag, AnInterruptStopsEveryWorkerAndFreesTheGpus) {
  REQUIRE_KERNELS();
  const std::string scenario = Scenario(2, "[cuda]\nmemory_mib = 4\n");
  // The burn would run 10 minutes; SIGINT after a second ends it.
  RunResult r = RunShell("(" + testing::Binary() + " --simulate " + scenario +
                         " diag burn --matrix 16 --duration 10m --json & pid=$!; sleep 1.5; kill -INT $pid; wait $pid; "
                         "echo exit=$?)");
  EXPECT_NE(r.output.find("exit=130"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"state\":\"interrupted\""), std::string::npos) << r.output;
  EXPECT_LT(r.took, std::chrono::seconds(30));
  EXPECT_EQ(WorkersOf(scenario), 0) << "a worker was left behind";
}

TEST_F(Diag, AnXidDuringTheBurnMakesThatGpuFaulty) {
  REQUIRE_KERNELS();
  const std::string scenario = Scenario(2, "[cuda]\nmemory_mib = 4\n");
  const std::string log = dir_.Write("kern.log", "Dec  5 10:00:00 node1 kernel: an old line\n");
  // GPU 1 of the simulated server is at 0000:43:00.0.
  RunResult r = Run(scenario, "burn --matrix 16 --duration 3s --precision fp32 --logs " + log, "(sleep 1.5; echo 'Dec  5 10:00:05 node1 kernel: NVRM: Xid (PCI:0000:43:00): 79, pid=0, GPU has fallen off the bus.' >> " + log + ") & ");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(ResultOf(0, "burn")["state"], "passed");
  EXPECT_EQ(ResultOf(1, "burn")["state"], "faulty");
  EXPECT_TRUE(Mentions(ResultOf(1, "burn"), "Xid 79")) << ResultOf(1, "burn").dump();
}

TEST_F(Diag, AHardwareSlowdownDuringTheBurnIsAFaultButThePowerCapIsNot) {
  REQUIRE_KERNELS();
  const std::string scenario = Scenario(
      2, "[gpu.0]\nclock_event_reasons = [\"sw_power_cap\"]\n[gpu.1]\nclock_event_reasons = [\"hw_slowdown\"]\n"
         "[cuda]\nmemory_mib = 4\n");
  RunResult r = Run(scenario, "burn --matrix 16 --duration 1s --precision fp32");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(ResultOf(0, "burn")["state"], "passed");
  EXPECT_TRUE(Mentions(ResultOf(1, "burn"), "hw_slowdown")) << ResultOf(1, "burn").dump();
}

TEST_F(Diag, PcieJudgesEachLinkAgainstItsGenerationAndWidthAndChecksTheData) {
  REQUIRE_KERNELS();
  // gen4 x8 allows 15.75 GB/s: 14 is healthy, 5 is a failing link; GPU 2 corrupts what it carries.
  const std::string scenario = Scenario(
      3, "[cuda]\nmemory_mib = 8\npcie_gbps = 14\np2p_gbps = 14\n[[cuda.fault]]\ngpu = 1\npcie_gbps = 5\n"
         "[[cuda.fault]]\ngpu = 2\ncorrupt_copies = true\n");
  RunResult r = Run(scenario, "pcie --transfer-size 4");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  // GPU 0's copies to and from GPU 2 arrive changed, but GPU 2 is the one broken on its own link.
  const json good = ResultOf(0, "pcie");
  EXPECT_EQ(good["state"], "passed") << good.dump();
  EXPECT_NEAR(good["host_to_device_gb_per_s"].get<double>(), 14.0, 0.1);
  ASSERT_FALSE(good["notes"].empty());
  EXPECT_NE(good.dump().find("GPU 2 is the one at fault"), std::string::npos) << good.dump();
  EXPECT_TRUE(Mentions(ResultOf(1, "pcie"), "5.0 GB/s, 32% of the 15.8 GB/s gen4 x8 allows")) << ResultOf(1, "pcie").dump();
  EXPECT_TRUE(Mentions(ResultOf(2, "pcie"), "came back changed")) << ResultOf(2, "pcie").dump();
  EXPECT_TRUE(Mentions(ResultOf(2, "pcie"), "copy GPU 0 -> 2 changed the data"));
}

TEST_F(Diag, TheBadCardsExampleFindsEachCardsFaultAndNoOther) {
  REQUIRE_KERNELS();
  RunResult r = Run(testing::Example("diag-bad-cards.toml"), "all --duration 1s --matrix 64 --transfer-size 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  ASSERT_EQ(Results().size(), 12u) << r.output;
  const std::set<std::pair<int, std::string>> faulty = {{1, "memtest"}, {2, "burn"}, {3, "pcie"}};
  for (const json& result : Results()) {
    const bool expected = faulty.count({result["gpu"].get<int>(), result["test"].get<std::string>()}) > 0;
    EXPECT_EQ(result["state"], expected ? "faulty" : "passed") << result.dump();
  }
  // The summary, last, says the same in one line and one row per GPU and test, with the key figures.
  EXPECT_EQ(lines_.back()["event"], "summary");
  const json summary = Summary();
  EXPECT_EQ(summary["exit_code"], 2);
  EXPECT_EQ(summary["level"], nullptr);
  EXPECT_EQ(summary["passed"], 9);
  EXPECT_EQ(summary["faulty"], 3);
  EXPECT_EQ(summary["results"].size(), 12u);
  EXPECT_NE(summary["line"].get<std::string>().find("9 passed, 3 FAULTY (GPU 1 memtest, GPU 2 burn, GPU 3 pcie)"),
            std::string::npos)
      << summary.dump();
  EXPECT_EQ(Row(1, "memtest")["unit"], "errors");
  EXPECT_EQ(Row(1, "memtest")["value"], ResultOf(1, "memtest")["error_count"]);
  EXPECT_EQ(Row(2, "burn")["unit"], "wrong products");
  EXPECT_NE(Row(2, "burn")["reason"].get<std::string>().find("wrong matrix product"), std::string::npos);
  EXPECT_EQ(Row(0, "burn")["unit"], "TFLOP/s");
  EXPECT_EQ(Row(0, "memtest")["unit"], "GB/s");
  EXPECT_NEAR(Row(0, "pcie")["value"].get<double>(), ResultOf(0, "pcie")["device_to_host_gb_per_s"].get<double>(),
              0.01);
  EXPECT_EQ(Row(0, "pcie")["reason"], "");
  // The memtest's words are all 100% of the same-run copy on the fake's clock.
  const json good_memtest = ResultOf(0, "memtest");
  for (const json& pattern : good_memtest["patterns"])
    EXPECT_NEAR(pattern["share_of_copy"].get<double>(), 1.0, 0.01) << pattern.dump();
  EXPECT_EQ(ResultOf(1, "memtest")["errors"][0]["xor"], "0x00002000");
}

// A loaded host makes every launch slow on the wall clock (launch_delay_ms):
// the burn's first progress line comes after more time than the stall
// timeout allows silence, but each launch counts as progress, so the workers
// are slow, not hung, and GPU 2's wrong product is found where it is.
TEST_F(Diag, OnASlowHostTheBadCardsAreStillFoundAndNoGpuIsHung) {
  REQUIRE_KERNELS();
  std::ifstream example(testing::Example("diag-bad-cards.toml"));
  std::stringstream text;
  text << example.rdbuf();
  std::string slow = text.str();
  const std::string table = "[cuda]\nmemory_mib = 16\n";
  ASSERT_NE(slow.find(table), std::string::npos);
  // 10 launches to the first verified product (fills, baseline): 8 s, past the 7 s stall timeout. The first
  // report comes after 4 of them (3.2 s), which leaves a loaded test machine time to start the workers.
  slow.replace(slow.find(table), table.size(), table + "launch_delay_ms = 800\n");
  const std::string scenario = dir_.Write("slow-bad-cards.toml", slow);
  RunResult r = Run(scenario, "burn --precision bf16 --matrix 64 --duration 0s --stall-timeout 7s");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  ASSERT_EQ(Results().size(), 4u) << r.output;
  for (const json& result : Results()) EXPECT_NE(result["state"], "hung") << result.dump();
  const json bad = ResultOf(2, "burn");
  EXPECT_EQ(bad["state"], "faulty") << bad.dump();
  ASSERT_TRUE(bad.contains("errors") && !bad["errors"].empty()) << bad.dump();
  EXPECT_EQ(bad["errors"][0]["rows"], json::array({17}));
  EXPECT_EQ(bad["errors"][0]["cols"], json::array({42}));
  EXPECT_EQ(Summary()["hung"], 0);
  // The bar moved before the verified products: the preparation and the baseline report too.
  std::set<std::string> steps;
  for (const json& line : lines_)
    if (line["event"] == "progress" && line["gpu"] == 0) steps.insert(line["step"].get<std::string>());
  EXPECT_TRUE(steps.count("bf16 preparing") && steps.count("bf16 alone") && steps.count("bf16")) << r.output;
}

TEST_F(Diag, ALevelRunsItsTestsWithItsPatternsAndAnOptionBesideItWins) {
  REQUIRE_KERNELS();
  const std::string scenario = Scenario(2, "[cuda]\nmemory_mib = 4\npcie_gbps = 14\np2p_gbps = 14\n");
  // Level 1's memtest patterns and copies; --duration and --matrix beside it keep the test short.
  RunResult r = Run(scenario, "--level 1 --duration 0s --matrix 16 --precision fp32");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(Results().size(), 6u) << r.output;
  std::vector<std::string> patterns;
  const json memtest = ResultOf(0, "memtest");
  for (const json& pattern : memtest["patterns"]) patterns.push_back(pattern["name"]);
  EXPECT_EQ(patterns, (std::vector<std::string>{"own_address", "moving_inversions_ones", "moving_inversions_zeros",
                                                "random_sequence"}));
  EXPECT_EQ(Summary()["level"], 1);
  EXPECT_EQ(Summary()["passed"], 6);
  // `diag all --level 1` is the same run; --pattern beside it wins over the level's patterns.
  r = Run(scenario, "all --level 1 --pattern walking_ones --duration 0s --matrix 16 --precision fp32 --no-peers");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(ResultOf(1, "memtest")["patterns"].size(), 1u);
  EXPECT_EQ(ResultOf(1, "memtest")["patterns"][0]["name"], "walking_ones");
  EXPECT_TRUE(ResultOf(0, "pcie")["peers"].empty());
  // The text output ends with the table and its line.
  RunResult text = RunGpudoctor("--simulate " + scenario + " diag memtest --level 1 --gpu 1");
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("Summary (level 1)\n  GPU  test     state"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("\n  1    memtest  PASSED "), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("\n1 GPU, 1 result: 1 passed\n"), std::string::npos) << text.output;
  // --quiet: the summary alone.
  r = Run(scenario, "memtest --level 1 --quiet");
  ASSERT_EQ(lines_.size(), 1u) << r.output;
  EXPECT_EQ(lines_[0]["event"], "summary");
}

TEST_F(Diag, ResultsGoToTheAgentsHistoryWhereStatusAndCheckShowThem) {
  REQUIRE_KERNELS();
  const std::string scenario = Scenario(
      2, "[cuda]\nmemory_mib = 4\n[[cuda.fault]]\ngpu = 1\nstuck_bits = [{ offset = 2097152, bit = 0, value = 1 }]\n");
  const std::string db = (dir_.path() / "history.db").string();
  // Without a history nothing is created.
  RunResult r = Run(scenario, "memtest --pattern walking_zeros --db " + db);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no agent history at " + db), std::string::npos) << r.output;
  EXPECT_EQ(RunShell("test -e " + db).exit_code, 1);

  ASSERT_EQ(RunGpudoctor("maintenance done dust_cleaning --db " + db).exit_code, 0);  // an agent's history
  r = Run(scenario, "memtest --pattern walking_zeros --db " + db);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("results kept in the agent's history"), std::string::npos) << r.output;

  RunResult status = RunGpudoctor("--json status --simulate " + scenario + " --db " + db);
  const json gpus = json::parse(status.output)["gpus"];
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0]["diagnostics"][0]["state"], "passed");
  EXPECT_EQ(gpus[1]["diagnostics"][0]["state"], "faulty");
  EXPECT_EQ(gpus[1]["diagnostics"][0]["command"], "gpudoctor diag memtest --gpu 1");

  RunResult check = RunGpudoctor("--json check --no-host --no-logs --simulate " + scenario + " --db " + db);
  EXPECT_EQ(check.exit_code, 2) << check.output;
  bool reported = false;
  const json report = json::parse(check.output);
  for (const json& finding : report["findings"]) {
    if (finding["id"] != "diagnostic_failed" || finding["severity"] == "ok") continue;
    reported = true;
    EXPECT_EQ(finding["gpu"]["index"], 1);
    EXPECT_NE(finding["actions"].dump().find("gpudoctor diag memtest --gpu 1"), std::string::npos) << finding;
  }
  EXPECT_TRUE(reported) << check.output;
}

TEST_F(Diag, BadCommandLinesAreUsageErrors) {
  const std::string scenario = Scenario(2, "[cuda]\nmemory_mib = 4\n");
  EXPECT_EQ(RunGpudoctor("--simulate " + scenario + " diag burn --precision fp8").exit_code, 64);
  EXPECT_EQ(RunGpudoctor("--simulate " + scenario + " diag memtest --gpu 7").exit_code, 64);
  EXPECT_EQ(RunGpudoctor("--simulate " + scenario + " diag memtest --size 150%").exit_code, 64);
  EXPECT_EQ(RunGpudoctor("--simulate " + scenario + " diag memtest --pattern nope").exit_code, 64);
  EXPECT_EQ(RunGpudoctor("--simulate " + scenario + " diag burn --duration soon").exit_code, 64);
  EXPECT_EQ(RunGpudoctor("--simulate " + scenario + " diag").exit_code, 64);
  EXPECT_EQ(RunGpudoctor("--simulate " + scenario + " diag --level 4").exit_code, 64);
  EXPECT_EQ(RunGpudoctor("--simulate " + scenario + " diag all --level 0").exit_code, 64);
  EXPECT_EQ(RunGpudoctor("--simulate " + scenario + " diag pcie --transfer-size 0").exit_code, 64);
  RunResult none = RunGpudoctor("--simulate " + scenario + " diag", Stderr::kCapture);
  EXPECT_NE(none.output.find("a command or a level is required"), std::string::npos)
      << none.output;
}

TEST_F(Diag, HelpSaysWhatEachLevelRunsAndHowLong) {
  RunResult help = RunGpudoctor("diag --help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* line : {"--level 1  about 20 s: memtest (4 patterns over 50% of free memory, one pass)",
                           "--level 2  about 3 min:", "--level 3  about 1 h: memtest (every pattern over 90% of "
                           "free memory, repeated for 20 min), a 40 min verified burn, pcie (1024 MiB copies)"})
    EXPECT_NE(help.output.find(line), std::string::npos) << line << "\n" << help.output;
}

TEST_F(Diag, WithoutADriverItCouldNotRun) {
  // A CUDA driver that cannot be loaded: the GPUs could not be tested, and the result says why.
  const std::string scenario = Scenario(1, "[cuda]\nmemory_mib = 4\n");
  RunResult r = RunGpudoctor("--simulate " + scenario + " diag memtest --json --cuda-lib /nonexistent/libcuda.so.1");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("cannot load the CUDA driver /nonexistent/libcuda.so.1"), std::string::npos) << r.output;
}

TEST_F(Diag, WhenNvmlCannotListTheGpusItIsUnavailable) {
  RunResult r = RunGpudoctor("--simulate " + testing::Example("driver-not-loaded.toml") + " diag memtest",
                             Stderr::kCapture);
  EXPECT_EQ(r.exit_code, 69) << r.output;
  EXPECT_NE(r.output.find("NVML cannot list the GPUs"), std::string::npos) << r.output;
}

TEST_F(Diag, AMistakeInTheCudaTableIsNamed) {
  const std::string scenario = Scenario(1, "[cuda]\nmemory_mb = 4\n");
  RunResult r = RunGpudoctor("--simulate " + scenario + " diag memtest", Stderr::kCapture);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("unknown key \"memory_mb\" in [cuda]"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gpudoctor
