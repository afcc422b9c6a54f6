// `gpudoctor check --from FILE` on every real capture in testdata/captures (each file names its public source
// and what it shows): the findings each must give, by rule and severity, and nothing else that is a problem;
// and the captures that hold nothing to judge, refused with a reason that names what they are.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/run_binary.h"

namespace gpudoctor {
namespace {

using nlohmann::json;

struct Sample {
  std::string file;  // under testdata/captures
  // Rule id -> severity of its worst finding; every problem the capture gives must be listed.
  std::map<std::string, std::string> expected;
};

void PrintTo(const Sample& sample, std::ostream* out) { *out << sample.file; }

class Captures : public ::testing::TestWithParam<Sample> {};

TEST_P(Captures, GiveTheFindingsTheyShow) {
  const Sample& sample = GetParam();
  const std::string path = std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/captures/" + sample.file;
  testing::RunResult run = testing::RunGpudoctor("check --json --from " + path);
  auto result = json::parse(run.output, nullptr, false);
  ASSERT_FALSE(result.is_discarded()) << run.output;
  std::map<std::string, std::string> worst;
  std::string all;
  const std::map<std::string, int> rank = {{"ok", 0}, {"unknown", 1}, {"warning", 2}, {"critical", 3}};
  for (const auto& finding : result["findings"]) {
    const std::string id = finding["id"], severity = finding["severity"];
    if (severity == "ok") continue;
    all += "\n  " + id + " " + severity + ": " + finding.value("summary", "");
    auto [it, added] = worst.emplace(id, severity);
    if (!added && rank.at(severity) > rank.at(it->second)) it->second = severity;
  }
  EXPECT_EQ(worst, sample.expected) << all;
  // Nagios exit status of the worst finding (0 ok, 1 warning, 2 critical, 3 unknown).
  std::string overall = "ok";
  for (const auto& [id, severity] : worst)
    if (rank.at(severity) > rank.at(overall)) overall = severity;
  const std::map<std::string, int> exit_of = {{"ok", 0}, {"warning", 1}, {"critical", 2}, {"unknown", 3}};
  EXPECT_EQ(run.exit_code, exit_of.at(overall));
}

const std::map<std::string, std::string> kExcerpt = {{"capture_incomplete", "unknown"}};

INSTANTIATE_TEST_SUITE_P(
    Real, Captures,
    ::testing::Values(
        // nvidia-smi nvlink -e: a saturated CRC counter and replays on two V100s; healthy H100 and GB300.
        Sample{"nvlink_e/001.txt", {{"nvlink_errors", "warning"}}},
        Sample{"nvlink_e/002.txt", {{"nvlink_errors", "warning"}}}, Sample{"nvlink_e/003.txt", {}},
        Sample{"nvlink_e/004.txt", {}},
        // nvidia-smi topo -m: NVLink and PCIe-only machines, whole or cut short (which says so).
        Sample{"topo_m/001.txt", {}}, Sample{"topo_m/002.txt", {}}, Sample{"topo_m/003.txt", {}},
        Sample{"topo_m/004.txt", kExcerpt}, Sample{"topo_m/005.txt", kExcerpt}, Sample{"topo_m/006.txt", kExcerpt},
        Sample{"topo_m/007.txt", {}}, Sample{"topo_m/008.txt", kExcerpt}, Sample{"topo_m/009.txt", {}},
        Sample{"topo_m/010.txt", {}}, Sample{"topo_m/011.txt", {}},
        // dcgmi diag: a failing memory test, a deployment error, a memory test that cannot create a context next
        // to a PCIe test's warnings, PCIe failing on all GPUs; passing runs of DCGM 3.x and 4.x; a JSON run that
        // skipped every test (no verdict: unknown); dcgmi diag -j of DCGM 3.x passing, and of DCGM 4 with
        // persistence mode off.
        Sample{"dcgmi_diag/001.txt", {{"diagnostic_failed", "critical"}}},
        Sample{"dcgmi_diag/002.txt", {{"diagnostic_failed", "warning"}}},
        Sample{"dcgmi_diag/003.txt", {{"diagnostic_failed", "critical"}}},
        Sample{"dcgmi_diag/004.txt", {{"diagnostic_failed", "warning"}}}, Sample{"dcgmi_diag/005.txt", {}},
        Sample{"dcgmi_diag/006.txt", {}}, Sample{"dcgmi_diag/007.txt", {}},
        Sample{"dcgmi_diag/008.txt", {{"diagnostic_failed", "unknown"}}},
        Sample{"dcgmi_diag/009.txt", {}}, Sample{"dcgmi_diag/011.txt", {}}, Sample{"dcgmi_diag/012.txt", {}},
        Sample{"dcgmi_diag/013.txt", {{"diagnostic_failed", "warning"}}},
        Sample{"dcgmi_diag/014.txt", {{"diagnostic_failed", "warning"}}},
        Sample{"dcgmi_diag/015.txt", {{"diagnostic_failed", "warning"}}},
        // dcgmi health -c -j of a healthy server.
        Sample{"dcgmi_health/003.txt", {}},
        // gpu_burn's output: 8 A100s all OK (raw, \r apart), 2 Tesla M4s OK (an older build, pasted).
        Sample{"gpu_burn/001.txt", {}}, Sample{"gpu_burn/002.txt", {}},
        // nvidia-smi -q sections (-d ECC, ROW_REMAPPER, PERFORMANCE, Fabric): row remap pending, power brake
        // slowdown, a fabric registration in progress; healthy ones.
        Sample{"smi_q_d/001.txt", {{"capture_incomplete", "unknown"}, {"remapped_rows_pending", "warning"}}},
        Sample{"smi_q_d/002.txt", {{"capture_incomplete", "unknown"}, {"clock_throttle", "critical"}}},
        Sample{"smi_q_d/003.txt", {{"capture_incomplete", "unknown"}, {"clock_throttle", "critical"}}},
        Sample{"smi_q_d/004.txt", kExcerpt}, Sample{"smi_q_d/005.txt", {}}, Sample{"smi_q_d/006.txt", {}},
        Sample{"smi_q_d/007.txt", {{"nvlink_fabric", "warning"}}},
        Sample{"smi_q_d/008.txt", kExcerpt},  // -i 0 of 4 GPUs
        // The fabric manager's log or journal alone: an SXid, no NVSwitch, a failed multicast setup, a driver of
        // another version; clean starts.
        Sample{"fabricmanager/001.txt", {{"log_errors", "warning"}}}, Sample{"fabricmanager/002.txt", {}},
        Sample{"fabricmanager/003.txt", {{"log_errors", "warning"}}},
        Sample{"fabricmanager/004.txt", {{"log_errors", "warning"}}}, Sample{"fabricmanager/005.txt", {}},
        Sample{"fabricmanager/006.txt", {{"log_errors", "warning"}}},
        Sample{"fabricmanager/007.txt", {{"log_errors", "critical"}}},
        Sample{"fabricmanager/008.txt", {{"log_errors", "critical"}}}),
    [](const ::testing::TestParamInfo<Sample>& info) {
      std::string name = info.param.file;
      for (char& c : name)
        if (c == '/' || c == '.') c = '_';
      return name;
    });

TEST(Captures, DcgmiErrorsInsteadOfAReportAreRefusedWithDcgmisWords) {
  for (const char* file : {"dcgmi_health/001.txt", "dcgmi_health/002.txt"}) {
    const std::string path = std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/captures/" + file;
    testing::RunResult run = testing::RunGpudoctor("check --from " + path, testing::Stderr::kCapture);
    EXPECT_EQ(run.exit_code, 65) << file;
    EXPECT_NE(run.output.find("dcgmi health printed no report: Error: "), std::string::npos) << run.output;
  }
}

TEST(Captures, ABugReportIsJudgedWithItsOwnKernelLog) {
  const std::string path = std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/bug_report/nvidia-bug-report.log";
  testing::RunResult run = testing::RunGpudoctor("check --json --from " + path);
  auto result = json::parse(run.output, nullptr, false);
  ASSERT_FALSE(result.is_discarded()) << run.output;
  bool log_read = false;
  for (const auto& source : result.value("sources", json::array()))
    if (source.value("source", "") == "kernel log") log_read = source.value("status", "") == "read";
  EXPECT_TRUE(log_read) << result.dump(2).substr(0, 2000);
}

}  // namespace
}  // namespace gpudoctor
