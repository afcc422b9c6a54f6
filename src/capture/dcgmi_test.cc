// The dcgmi report readers on real reports (testdata/captures/dcgmi_diag, each naming its public source), and
// on `dcgmi health -c` text laid out as DCGM's printer lays it out (the rows its own unit test,
// dcgmi/tests/HealthTests.cpp, checks for): no real health report with a fault was found in public.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "capture/dcgmi.h"

namespace gpudoctor::dcgmi {
namespace {

std::string Read(const std::string& file) {
  std::ifstream in(std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/captures/dcgmi_diag/" + file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const DiagnosticRecord* Find(const std::vector<DiagnosticRecord>& records, uint32_t gpu, std::string_view test) {
  for (const DiagnosticRecord& record : records)
    if (record.gpu_index == gpu && record.test == test) return &record;
  return nullptr;
}

TEST(DcgmiDiag, EveryRealReportIsRecognisedAndRead) {
  for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15}) {
    const std::string file = fmt::format("{:03}.txt", n);
    const std::string text = Read(file);
    EXPECT_TRUE(LooksLikeDiag(text)) << file;
    auto records = ParseDiag(text);
    ASSERT_TRUE(records.ok()) << file << ": " << records.error().message;
    EXPECT_FALSE(records->empty()) << file;
    for (const DiagnosticRecord& record : *records) {
      EXPECT_EQ(record.tool, "dcgmi diag");
      EXPECT_FALSE(record.test.empty()) << file;
    }
  }
}

TEST(DcgmiDiag, FailingMemoryTestOfOneGpuWithItsWrappedWarning) {
  auto records = ParseDiag(Read("001.txt"));
  ASSERT_TRUE(records.ok());
  const DiagnosticRecord* gpu0 = Find(*records, 0, "memtest");
  ASSERT_NE(gpu0, nullptr);
  EXPECT_EQ(gpu0->state, "faulty");
  // DCGM wrapped "seconds" and "GPU 0" across rows; the reader joins them back.
  EXPECT_NE(gpu0->summary.find("Thermal violations totaling 13.3 seconds started at 9.7 seconds into the test for "
                               "GPU 0 Verify that the cooling"),
            std::string::npos)
      << gpu0->summary;
  for (uint32_t gpu = 1; gpu <= 7; ++gpu) {
    const DiagnosticRecord* other = Find(*records, gpu, "memtest");
    ASSERT_NE(other, nullptr) << gpu;
    EXPECT_EQ(other->state, "passed") << gpu;
    EXPECT_EQ(other->summary.find("Thermal"), std::string::npos) << "GPU " << gpu << " got GPU 0's warning";
  }
  EXPECT_EQ(gpu0->command, "dcgmi diag -r 3 -i 0");
}

TEST(DcgmiDiag, AnErrorRowFailsTheGpuItNames) {
  auto records = ParseDiag(Read("002.txt"));
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 1u);
  EXPECT_EQ((*records)[0].gpu_index, 3u);
  EXPECT_EQ((*records)[0].state, "faulty");
  EXPECT_NE((*records)[0].summary.find("uncorrectable memory errors and row remappings are pending"), std::string::npos)
      << (*records)[0].summary;
}

TEST(DcgmiDiag, AllGpusFailingPcieAndTheRunLevelOfThePastedCommand) {
  auto records = ParseDiag(Read("004.txt"));
  ASSERT_TRUE(records.ok());
  const DiagnosticRecord* pcie = Find(*records, 0, "pcie");
  ASSERT_NE(pcie, nullptr);
  EXPECT_EQ(pcie->state, "faulty");
  EXPECT_NE(pcie->summary.find("NvLink link 0 is currently down"), std::string::npos) << pcie->summary;
}

TEST(DcgmiDiag, PassingDeploymentTestsPass) {
  auto records = ParseDiag(Read("005.txt"));
  ASSERT_TRUE(records.ok());
  for (const DiagnosticRecord& record : *records) EXPECT_EQ(record.state, "passed") << record.test;
  EXPECT_NE(Find(*records, 0, "page_retirement_row_remap"), nullptr);
  EXPECT_EQ((*records)[0].command, "dcgmi diag -r 3 -i 0");
}

TEST(DcgmiDiag, Version4GivesOneLinePerGpu) {
  auto records = ParseDiag(Read("006.txt"));
  ASSERT_TRUE(records.ok());
  for (uint32_t gpu = 0; gpu < 4; ++gpu) {
    const DiagnosticRecord* software = Find(*records, gpu, "software");
    ASSERT_NE(software, nullptr) << gpu;
    EXPECT_EQ(software->state, "passed");
  }
}

TEST(DcgmiDiag, JsonReportWithSkippedTests) {
  auto records = ParseDiag(Read("008.txt"));
  ASSERT_TRUE(records.ok()) << records.error().message;
  const DiagnosticRecord* memory = Find(*records, 0, "memtest");
  ASSERT_NE(memory, nullptr);
  EXPECT_EQ(memory->state, "could_not_run");
  EXPECT_EQ(memory->command, "dcgmi diag -r 3 -i 0");
}

TEST(DcgmiDiag, JsonOfDcgm3ReadWhole) {
  // 011.txt: -r 3 -j, GPUs as "gpu_ids" strings, the deployment checks naming none.
  auto records = ParseDiag(Read("011.txt"));
  ASSERT_TRUE(records.ok()) << records.error().message;
  const DiagnosticRecord* eud = Find(*records, 0, "eud_test");
  ASSERT_NE(eud, nullptr);
  EXPECT_EQ(eud->state, "could_not_run");
  for (const char* test : {"software", "pcie", "memtest", "burn"}) {
    const DiagnosticRecord* record = Find(*records, 0, test);
    ASSERT_NE(record, nullptr) << test;
    EXPECT_EQ(record->state, "passed") << test;
  }
  const std::string& burn = Find(*records, 0, "burn")->summary;
  EXPECT_NE(burn.find("gigaflops"), std::string::npos) << burn;
  // 012.txt: -r 1 -j, deployment checks only: their results name no GPU and stand for the server's GPU 0.
  records = ParseDiag(Read("012.txt"));
  ASSERT_TRUE(records.ok()) << records.error().message;
  ASSERT_EQ(records->size(), 3u);  // software (eight checks), page retirement and row remap, inforom
  for (const DiagnosticRecord& record : *records) EXPECT_EQ(record.state, "passed") << record.test;
}

TEST(DcgmiDiag, JsonOfDcgm4WithEntitiesAndTestSummaries) {
  // 013.txt: DCGM 4.5.2 repeats each entity's warning in the test's summary: one record, with the message once.
  auto records = ParseDiag(Read("013.txt"));
  ASSERT_TRUE(records.ok()) << records.error().message;
  const DiagnosticRecord* software = Find(*records, 0, "software");
  ASSERT_NE(software, nullptr);
  EXPECT_EQ(software->state, "faulty");
  EXPECT_NE(software->summary.find("Persistence mode for GPU 0 is disabled"), std::string::npos) << software->summary;
  EXPECT_EQ(software->command, "dcgmi diag -r 3 -i 0");
  EXPECT_EQ(Find(*records, 0, "memtest")->state, "could_not_run");
  EXPECT_EQ(Find(*records, 0, "pcie")->state, "could_not_run");
  EXPECT_EQ(records->size(), 3u);
  // 014.txt: the same server with the memory and PCIe tests allowed: they pass; 4.x's info is an array.
  records = ParseDiag(Read("014.txt"));
  ASSERT_TRUE(records.ok()) << records.error().message;
  EXPECT_EQ(Find(*records, 0, "memtest")->state, "passed");
  EXPECT_NE(Find(*records, 0, "memtest")->summary.find("Allocated 112427837082 bytes"), std::string::npos);
  EXPECT_EQ(Find(*records, 0, "pcie")->state, "passed");
  // 015.txt: DCGM 4.2.3, whose test summary holds only a note with no entity: not a result of its own.
  records = ParseDiag(Read("015.txt"));
  ASSERT_TRUE(records.ok()) << records.error().message;
  ASSERT_EQ(records->size(), 1u);
  EXPECT_EQ((*records)[0].state, "faulty");
  EXPECT_EQ((*records)[0].summary.find("SRAM"), std::string::npos) << (*records)[0].summary;
}

TEST(DcgmiDiag, JsonIterationsAndARunThatCouldNotBeMade) {
  // The shapes dcgmi/Diag.cpp prints for --iterations and for a run that failed to start (not real captures).
  auto records = ParseDiag(R"({"Overall Result" : "Fail", "iterations" : [
      {"DCGM Diagnostic" : {"test_categories" : [{"category" : "Hardware", "tests" : [{"name" : "memory",
        "results" : [{"entity_group" : "GPU", "entity_group_id" : 1, "entity_id" : 1, "status" : "Pass"}]}]}]}},
      {"DCGM Diagnostic" : {"test_categories" : [{"category" : "Hardware", "tests" : [{"name" : "memory",
        "results" : [{"entity_group" : "GPU", "entity_group_id" : 1, "entity_id" : 1, "status" : "Fail",
                      "warnings" : [{"error_id" : 83, "warning" : "Memory test found a mismatch"}]}]}]}]}}]})");
  ASSERT_TRUE(records.ok()) << records.error().message;
  ASSERT_EQ(records->size(), 1u);
  EXPECT_EQ((*records)[0].gpu_index, 1u);
  EXPECT_EQ((*records)[0].state, "faulty");  // the worse of the two iterations
  EXPECT_NE((*records)[0].summary.find("mismatch"), std::string::npos);
  auto failed = ParseDiag(
      R"({"DCGM Diagnostic" : {"runtime_error" : "Couldn't find the plugin directory", "version" : "4.2.3"}})");
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().message, "dcgmi diag printed no report: Couldn't find the plugin directory");
}

TEST(DcgmiDiag, ATestNamedByNoWordStillGetsAName) {
  auto records = ParseDiag("| -_-                       | Fail - GPU: 1                                  |\n");
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 1u);
  EXPECT_EQ((*records)[0].test, "unnamed");
  EXPECT_EQ((*records)[0].state, "faulty");
}

TEST(DcgmiDiag, AnErrorInsteadOfAReportIsNoReport) {
  // 010.txt: the run could not load its plugins (DCGM 4 without its CUDA 12 plugin folder).
  const std::string text = Read("010.txt");
  EXPECT_TRUE(LooksLikeDiag(text));
  auto records = ParseDiag(text);
  ASSERT_FALSE(records.ok());
  EXPECT_EQ(records.error().message,
            "dcgmi diag printed no report: Error: Unable to complete diagnostic for entities 0,1,2,3. Return: (-30) : "
            "DCGM GPU Diagnostic returned an error; Error: Cannot load plugins. Unable to change to the plugin dir "
            "'/usr/libexec/datacenter-gpu-manager-4/plugins/cuda12/': 'No such file or directory'");
}

TEST(DcgmiDiag, NoResultIsAnError) {
  EXPECT_FALSE(ParseDiag("| Diagnostic                | Result                                         |\n").ok());
  EXPECT_FALSE(LooksLikeDiag("+------+\n| GPU  | Name |\n"));
}

constexpr std::string_view kHealthReport =
    "Health Monitor Report\n"
    "+----------------------------+------------------------------------------------------------+\n"
    "| Overall Health             | Failure                                                    |\n"
    "| GPU                        |                                                            |\n"
    "| -> 0                       | Warning                                                    |\n"
    "|    -> Errors               |                                                            |\n"
    "|       -> PCIe system       | Warning                                                    |\n"
    "|                            | Detected more than 8 PCIe replays per minute for GPU 0 :   |\n"
    "|                            | 13 Reconnect PCIe card. Run system side PCIE diagnostic    |\n"
    "|                            | utilities to verify hops off the GPU board.                |\n"
    "| -> 1                       | Failure                                                    |\n"
    "|    -> Errors               |                                                            |\n"
    "|       -> Memory system     | Failure                                                    |\n"
    "|                            | Detected 2 uncorrectable (DBE) memory errors on GPU 1.     |\n"
    "|       -> InfoROM system    | Warning                                                    |\n"
    "|                            | A corrupt InfoROM has been detected in GPU 1.              |\n"
    "+----------------------------+------------------------------------------------------------+\n";

TEST(DcgmiHealth, EachWatchedSystemBecomesTheRuleThatJudgesItLive) {
  EXPECT_TRUE(LooksLikeHealth(kHealthReport));
  auto conditions = ParseHealth(kHealthReport);
  ASSERT_TRUE(conditions.ok()) << conditions.error().message;
  ASSERT_EQ(conditions->size(), 3u);
  EXPECT_EQ((*conditions)[0].rule_id, "pcie_replay");
  EXPECT_EQ((*conditions)[0].gpu_index, 0u);
  EXPECT_FALSE((*conditions)[0].failure);
  EXPECT_EQ((*conditions)[0].text,
            "Detected more than 8 PCIe replays per minute for GPU 0 : 13 Reconnect PCIe card. Run system side PCIE "
            "diagnostic utilities to verify hops off the GPU board.");
  EXPECT_EQ((*conditions)[1].rule_id, "ecc_uncorrectable");
  EXPECT_EQ((*conditions)[1].gpu_index, 1u);
  EXPECT_TRUE((*conditions)[1].failure);
  EXPECT_EQ((*conditions)[2].rule_id, "inforom_corrupted");
  EXPECT_EQ((*conditions)[2].system, "InfoROM system");
}

TEST(DcgmiHealth, AHealthyReportHasNoCondition) {
  auto conditions = ParseHealth(
      "Health Monitor Report\n"
      "+----------------------------+------------------------------------------------------------+\n"
      "| Overall Health             | Healthy                                                    |\n"
      "+----------------------------+------------------------------------------------------------+\n");
  ASSERT_TRUE(conditions.ok());
  EXPECT_TRUE(conditions->empty());
}

TEST(DcgmiHealth, JsonReportsGiveTheSameConditionsAsTables) {
  // testdata/captures/dcgmi_health/003.txt: -j of a healthy server, as VirtualClient keeps it.
  std::ifstream in(std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/captures/dcgmi_health/003.txt");
  std::stringstream healthy;
  healthy << in.rdbuf();
  EXPECT_TRUE(LooksLikeHealth(healthy.str()));
  auto none = ParseHealth(healthy.str());
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_TRUE(none->empty());
  // The boxes dcgmi's JSON printer (dcgmi/DcgmiOutput.cpp) makes of a report with findings (not a real capture).
  auto conditions = ParseHealth(R"({"body" : {"GPU" : {"children" : {"1" : {"children" : {"Errors" : {"children" : {
      "Memory system" : {"overflow" : ["Detected 4 uncorrectable ECC errors for GPU 1", "Drain the GPU."],
                         "value" : "Failure"}}}}, "value" : "Failure"}}}, "Overall Health" : {"value" : "Failure"}},
      "header" : ["Health Monitor Report"]})");
  ASSERT_TRUE(conditions.ok()) << conditions.error().message;
  ASSERT_EQ(conditions->size(), 1u);
  EXPECT_EQ((*conditions)[0].rule_id, "ecc_uncorrectable");
  EXPECT_EQ((*conditions)[0].gpu_index, 1u);
  EXPECT_TRUE((*conditions)[0].failure);
  EXPECT_EQ((*conditions)[0].text, "Detected 4 uncorrectable ECC errors for GPU 1 Drain the GPU.");
}

TEST(DcgmiHealth, AnErrorInsteadOfAReportIsNoReport) {
  // testdata/captures/dcgmi_health/001.txt, as posted.
  const std::string text = "dcgmi health --check -g 1\nError: Health watches not enabled. Please enable watches.\n";
  EXPECT_TRUE(LooksLikeHealth(text));
  auto conditions = ParseHealth(text);
  ASSERT_FALSE(conditions.ok());
  EXPECT_EQ(conditions.error().message,
            "dcgmi health printed no report: Error: Health watches not enabled. Please enable watches.");
}

}  // namespace
}  // namespace gpudoctor::dcgmi
