// `gpudoctor status` end to end: the built binary against every example scenario.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/run_binary.h"

namespace gpudoctor {
namespace {

using nlohmann::json;
using testing::Example;
using testing::RunGpudoctor;

json StatusJson(const std::string& scenario, int expected_exit = 0, const std::string& extra = "") {
  auto result = RunGpudoctor("--json status --simulate " + Example(scenario) + " " + extra);
  EXPECT_EQ(result.exit_code, expected_exit) << scenario;
  auto parsed = json::parse(result.output, nullptr, false);
  EXPECT_FALSE(parsed.is_discarded()) << result.output;
  return parsed.is_discarded() ? json::object() : parsed;
}

// The problem findings (warning or worse) as "id:severity@gpu".
std::set<std::string> Problems(const json& status) {
  std::set<std::string> problems;
  for (const auto& f : status.value("findings", json::array())) {
    if (f["severity"] == "ok") continue;
    std::string gpu = f["gpu"].is_object() && f["gpu"]["index"].is_number() ? std::to_string(f["gpu"]["index"].get<int>()) : "-";
    problems.insert(f["id"].get<std::string>() + ":" + f["severity"].get<std::string>() + "@" + gpu);
  }
  return problems;
}

bool HasProblem(const json& status, const std::string& id, int gpu = -1) {
  for (const auto& f : status.value("findings", json::array())) {
    if (f["id"] != id || f["severity"] == "ok") continue;
    if (gpu < 0 || (f["gpu"].is_object() && f["gpu"]["index"] == gpu)) return true;
  }
  return false;
}

TEST(StatusEndToEnd, HealthyServerHasNoProblems) {
  json status = StatusJson("healthy-8xh100.toml");
  EXPECT_EQ(status["gpus"].size(), 8u);
  EXPECT_TRUE(Problems(status).empty()) << ::testing::PrintToString(Problems(status));
  EXPECT_EQ(status["status"], "ok");
  for (const auto& gpu : status["gpus"]) EXPECT_EQ(gpu["health"], "ok");
}

TEST(StatusEndToEnd, EachExampleShowsItsFault) {
  struct Case {
    const char* scenario;
    const char* finding;
    int gpu;
  } cases[] = {
      {"overheating.toml", "temperature_high", -1},
      {"fan-failure.toml", "fan_failure", -1},
      {"ecc-dbe-row-remap.toml", "ecc_uncorrectable", 6},
      {"ecc-dbe-row-remap.toml", "remapped_rows_pending", 6},
      {"gpu-fallen-off-bus.toml", "gpu_lost", 3},
      {"pcie-downtrained.toml", "pcie_link_degraded", 2},
      {"nvlink-errors.toml", "nvlink_down", -1},
  };
  for (const auto& c : cases) {
    json status = StatusJson(c.scenario);
    EXPECT_TRUE(HasProblem(status, c.finding, c.gpu))
        << c.scenario << " lacks " << c.finding << "; has " << ::testing::PrintToString(Problems(status));
  }
}

// memory-leak.toml starts early in the leak, for an agent to watch it grow
// (agent_e2e_test.cc); pinned at 60m the GPU is full.
TEST(StatusEndToEnd, TheMemoryLeakExampleFillsItsGpuAndNamesTraceAlloc) {
  EXPECT_FALSE(HasProblem(StatusJson("memory-leak.toml"), "memory_high"));
  auto result = RunGpudoctor("--json status --simulate " + Example("memory-leak.toml"), testing::Stderr::kDiscard,
                             "GPUDOCTOR_FAKE_NOW=60m");
  ASSERT_EQ(result.exit_code, 0);
  json full = json::parse(result.output, nullptr, false);
  ASSERT_TRUE(HasProblem(full, "memory_high", 2)) << ::testing::PrintToString(Problems(full));
  for (const auto& f : full["findings"]) {
    if (f["id"] != "memory_high") continue;
    EXPECT_EQ(f["actions"].back(),
              "If the memory keeps growing, find the calls that allocate it and never free it: run the program "
              "again as gpudoctor trace-alloc -- COMMAND")
        << "pid 51877 is simulated: no command line here";
  }
}

TEST(StatusEndToEnd, DriverProblemsExitUnavailableWithTheirFinding) {
  json mismatch = StatusJson("driver-mismatch.toml", 69);
  EXPECT_EQ(mismatch["driver_error"], "version_mismatch");
  EXPECT_TRUE(HasProblem(mismatch, "driver_mismatch")) << ::testing::PrintToString(Problems(mismatch));
  json not_loaded = StatusJson("driver-not-loaded.toml", 69);
  EXPECT_EQ(not_loaded["driver_error"], "driver_not_loaded");
  EXPECT_TRUE(HasProblem(not_loaded, "driver_unavailable")) << ::testing::PrintToString(Problems(not_loaded));
}

TEST(StatusEndToEnd, HangScenarioReturnsWithinTheDefaultDeadlinePlusTwoSeconds) {
  auto result = RunGpudoctor("--json status --simulate " + Example("nvml-hang.toml"));
  EXPECT_LT(result.took.count(), 12000);
  json status = json::parse(result.output, nullptr, false);
  ASSERT_FALSE(status.is_discarded()) << result.output;
  EXPECT_TRUE(HasProblem(status, "nvml_hang", 5)) << ::testing::PrintToString(Problems(status));
  EXPECT_EQ(status["gpus"].size(), 8u);
  EXPECT_EQ(status["gpus"][5]["health"], "critical");
  EXPECT_EQ(status["gpus"][4]["health"], "ok");
}

TEST(StatusEndToEnd, NoDriverIsOneClearLineAndExit69) {
  auto result = RunGpudoctor("status --nvml-lib /nonexistent/libnvidia-ml.so.1", testing::Stderr::kCapture);
  EXPECT_EQ(result.exit_code, 69);
  EXPECT_EQ(result.output, "gpudoctor: NVIDIA driver not found (/nonexistent/libnvidia-ml.so.1)\n");
}

TEST(StatusEndToEnd, MissingScenarioIsNoInput) {
  auto result = RunGpudoctor("status --simulate /nonexistent.toml");
  EXPECT_EQ(result.exit_code, 66);
}

TEST(StatusEndToEnd, TableHasAHealthColumnAndNoColourOffATerminal) {
  auto result = RunGpudoctor("status --simulate " + Example("gpu-fallen-off-bus.toml"));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_NE(result.output.find("Health"), std::string::npos);
  EXPECT_NE(result.output.find("CRITICAL"), std::string::npos);
  EXPECT_EQ(result.output.find("\033["), std::string::npos);
  auto coloured = RunGpudoctor("--color always status --simulate " + Example("gpu-fallen-off-bus.toml"));
  EXPECT_NE(coloured.output.find("\033["), std::string::npos);
}

TEST(StatusEndToEnd, FromSmiReadsEveryCapturedSample) {
  for (const char* name : {"001.txt", "005.txt", "008.txt", "009.txt", "011.txt", "012.txt", "014.txt", "015.txt", "018.txt"}) {
    auto result = RunGpudoctor(std::string("--json status --from-smi ") + GPUDOCTOR_SOURCE_DIR + "/testdata/nvidia_smi/" + name);
    EXPECT_TRUE(result.exit_code == 0 || result.exit_code == 69) << name << " exit " << result.exit_code;
    EXPECT_FALSE(json::parse(result.output, nullptr, false).is_discarded()) << name;
  }
}

TEST(StatusEndToEnd, GarbageCaptureIsADataError) {
  auto result = RunGpudoctor("status --from-smi /bin/true");
  EXPECT_EQ(result.exit_code, 65);
}

}  // namespace
}  // namespace gpudoctor
