// The captured nvidia-smi samples in testdata/health/nvidia_smi (copied from
// real reports; each file's header names what was wrong) must give the
// findings their headers name, and the healthy sample none that is a warning
// or critical.
#include <gtest/gtest.h>

#include <map>

#include "health/health_test_support.h"
#include "smi/nvidia_smi.h"

namespace gpudoctor {
namespace {

using namespace testing_support;

struct Sample {
  std::string file;
  // Rule id -> severity of its worst finding. Every warning or critical
  // finding of the sample must be listed here.
  std::map<std::string, Severity> expected;
};

void PrintTo(const Sample& sample, std::ostream* out) { *out << sample.file; }

class NvidiaSmiCorpus : public ::testing::TestWithParam<Sample> {};

TEST_P(NvidiaSmiCorpus, GivesTheFindingsItsHeaderNames) {
  const Sample& sample = GetParam();
  Result<Snapshot> snapshot =
      ReadNvidiaSmiFile(std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/health/nvidia_smi/" + sample.file);
  ASSERT_TRUE(snapshot.ok()) << snapshot.error().message;
  std::vector<Finding> findings = Evaluate(&*snapshot);

  std::map<std::string, Severity> worst;
  for (const Finding& finding : findings) {
    auto [it, inserted] = worst.emplace(finding.id, finding.severity);
    if (!inserted && SeverityRank(finding.severity) > SeverityRank(it->second)) it->second = finding.severity;
  }
  std::string all;
  for (const Finding& finding : findings)
    all += "\n  " + finding.id + " " + SeverityName(finding.severity) + ": " + finding.summary;
  for (const auto& [id, severity] : sample.expected) {
    ASSERT_TRUE(worst.count(id)) << "no " << id << " finding; got:" << all;
    EXPECT_EQ(worst[id], severity) << id << all;
  }
  for (const Finding& problem : Problems(findings)) {
    EXPECT_TRUE(sample.expected.count(problem.id)) << "unexpected " << problem.id << ": " << problem.summary;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Samples, NvidiaSmiCorpus,
    ::testing::Values(Sample{"001.txt", {{"gpu_unreachable", Severity::kCritical}}},
                      Sample{"005.txt", {{"driver_mismatch", Severity::kCritical}}},
                      Sample{"008.txt", {{"driver_unavailable", Severity::kCritical}}},
                      // GPU 14's fan reads ERR! while it is at 68 °C: critical.
                      Sample{"009.txt", {{"fan_failure", Severity::kCritical}, {"field_error", Severity::kWarning}}},
                      Sample{"011.txt", {{"remapped_rows_pending", Severity::kWarning}}},
                      Sample{"012.txt", {{"temperature_high", Severity::kWarning}}},
                      // The default power limit reads [Unknown Error]; the draw is above the limit.
                      Sample{"014.txt", {{"power_capped", Severity::kWarning}, {"field_error", Severity::kWarning}}},
                      Sample{"015.txt", {}},
                      Sample{"018.txt", {{"ecc_uncorrectable", Severity::kCritical}}},
                      // From public reports beyond the shared corpus (each file names its source).
                      Sample{"101.txt", {{"nvlink_down", Severity::kCritical}}},
                      Sample{"102.txt", {{"inforom_corrupted", Severity::kWarning}}},
                      Sample{"103.txt", {{"gpu_unreachable", Severity::kCritical}}},
                      Sample{"104.txt", {{"gpu_unreachable", Severity::kCritical}}},
                      // An A100 SXM4 module with every link inactive, on a server where no link is up.
                      Sample{"105.txt", {{"nvlink_down", Severity::kWarning}}},
                      // topo -m with the terminal's escape codes in its header: read, nothing wrong.
                      Sample{"106.txt", {}},
                      Sample{"107.txt", {{"ecc_uncorrectable", Severity::kCritical},
                                         {"retired_pages", Severity::kWarning}}}),
    [](const ::testing::TestParamInfo<Sample>& info) { return "sample_" + info.param.file.substr(0, 3); });

}  // namespace
}  // namespace gpudoctor
