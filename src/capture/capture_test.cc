// ReadCapture on real captures of each kind (testdata/captures, each file naming its public source) and on
// files in no known format.
#include "capture/capture.h"

#include <gtest/gtest.h>

#include <fstream>

namespace gpudoctor {
namespace {

std::string Data(const std::string& relative) { return std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/" + relative; }

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(ReadCapture, NvlinkErrorCountersFillEachLink) {
  auto capture = ReadCapture(Data("captures/nvlink_e/001.txt"));
  ASSERT_TRUE(capture.ok()) << capture.error().message;
  EXPECT_EQ(capture->kind, CaptureKind::kNvidiaSmi);
  ASSERT_TRUE(capture->snapshot);
  const GpuSnapshot* gpu0 = capture->snapshot->FindGpu(0);
  ASSERT_NE(gpu0, nullptr);
  ASSERT_TRUE(gpu0->nvlinks.has_value());
  ASSERT_EQ(gpu0->nvlinks.value().size(), 6u);  // links 0-5, each counter line joined into its link
  EXPECT_EQ(gpu0->nvlinks.value()[3].replay_errors.value(), 211u);
  EXPECT_EQ(gpu0->nvlinks.value()[3].crc_flit_errors.value(), 0u);
  EXPECT_FALSE(gpu0->nvlinks.value()[3].active.has_value());  // nvlink -e does not say
  const GpuSnapshot* gpu2 = capture->snapshot->FindGpu(2);
  ASSERT_NE(gpu2, nullptr);
  EXPECT_EQ(gpu2->nvlinks.value()[0].crc_flit_errors.value(), 65535u);
}

TEST(ReadCapture, NvlinkErrorsWithoutUuidStillNameTheGpu) {
  auto capture = ReadCapture(Data("captures/nvlink_e/004.txt"));
  ASSERT_TRUE(capture.ok()) << capture.error().message;
  ASSERT_TRUE(capture->snapshot);
  ASSERT_EQ(capture->snapshot->gpus.size(), 1u);
  EXPECT_EQ(capture->snapshot->gpus[0].name.value(), "NVIDIA GB300");
  EXPECT_FALSE(capture->snapshot->gpus[0].uuid.has_value());
}

TEST(ReadCapture, TopologyOfAHealthyNvlinkMachineReportsNothing) {
  auto capture = ReadCapture(Data("captures/topo_m/001.txt"));
  ASSERT_TRUE(capture.ok()) << capture.error().message;
  ASSERT_TRUE(capture->snapshot);
  EXPECT_EQ(capture->snapshot->gpus.size(), 4u);
  EXPECT_EQ(capture->snapshot->device_count.value(), 4u);
  EXPECT_TRUE(capture->snapshot->reported_conditions.empty());
}

TEST(ReadCapture, TopologyCutShortSaysSo) {
  auto capture = ReadCapture(Data("captures/topo_m/004.txt"));  // rows GPU0-GPU5 of eight
  ASSERT_TRUE(capture.ok()) << capture.error().message;
  EXPECT_EQ(capture->snapshot->gpus.size(), 6u);
  EXPECT_EQ(capture->snapshot->device_count.value(), 8u);
  EXPECT_FALSE(capture->snapshot->incomplete_reasons.empty());
  EXPECT_TRUE(capture->snapshot->reported_conditions.empty());
}

TEST(ReadCapture, TopologyGpuWithFewerNvlinksIsReported) {
  // The matrix of topo_m/007.txt (GB200, every pair NV18) with GPU3's links to GPU0 and GPU1 gone to SYS, as a
  // matrix prints a GPU whose NVLinks to those peers are down.
  const std::string matrix =
      "        GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity   GPU NUMA ID\n"
      "GPU0     X      NV18    NV18    SYS     0-71    0               N/A\n"
      "GPU1    NV18     X      NV18    SYS     0-71    0               N/A\n"
      "GPU2    NV18    NV18     X      NV18    72-143  1               N/A\n"
      "GPU3    SYS     SYS     NV18     X      72-143  1               N/A\n";
  auto capture = ReadCapture(WriteTemp("topo_down.txt", matrix));
  ASSERT_TRUE(capture.ok()) << capture.error().message;
  const auto& conditions = capture->snapshot->reported_conditions;
  // GPU3 has 18 links in all; GPU0 and GPU1, which lost their links to it, 36; GPU2 54.
  ASSERT_EQ(conditions.size(), 1u);
  EXPECT_EQ(conditions[0].gpu_index, 3u);
  EXPECT_EQ(conditions[0].rule_id, "nvlink_down");
  EXPECT_NE(conditions[0].text.find("18 NVLinks in all, where another GPU has 54"), std::string::npos)
      << conditions[0].text;
}

TEST(ReadCapture, PcieOnlyTopologyJudgesNoNvlink) {
  for (const char* file : {"captures/topo_m/002.txt", "captures/topo_m/006.txt", "captures/topo_m/008.txt"}) {
    auto capture = ReadCapture(Data(file));
    ASSERT_TRUE(capture.ok()) << file << ": " << capture.error().message;
    EXPECT_TRUE(capture->snapshot->reported_conditions.empty()) << file;
  }
}

TEST(ReadCapture, DcgmiDiagGivesDiagnosticRecords) {
  auto capture = ReadCapture(Data("captures/dcgmi_diag/003.txt"));
  ASSERT_TRUE(capture.ok()) << capture.error().message;
  EXPECT_EQ(capture->kind, CaptureKind::kDcgmiDiag);
  EXPECT_FALSE(capture->snapshot);
  bool gpu0_memory_faulty = false;
  for (const DiagnosticRecord& record : capture->diagnostics) {
    if (record.gpu_index == 0 && record.test == "memtest") {
      gpu0_memory_faulty = record.state == "faulty";
      EXPECT_NE(record.summary.find("Unable to create CUDA context"), std::string::npos) << record.summary;
    }
    if (record.gpu_index == 1 && record.test == "memtest") {
      EXPECT_EQ(record.state, "passed");
    }
  }
  EXPECT_TRUE(gpu0_memory_faulty);
}

TEST(ReadCapture, FabricManagerLogIsTheCapturesLog) {
  auto capture = ReadCapture(Data("captures/fabricmanager/001.txt"));
  ASSERT_TRUE(capture.ok()) << capture.error().message;
  EXPECT_EQ(capture->kind, CaptureKind::kLog);
  EXPECT_FALSE(capture->snapshot);
  EXPECT_EQ(capture->log_file, Data("captures/fabricmanager/001.txt"));
}

TEST(ReadCapture, BugReportGivesItsNvidiaSmiAndItsLogs) {
  auto capture = ReadCapture(Data("bug_report/nvidia-bug-report.log"));
  ASSERT_TRUE(capture.ok()) << capture.error().message;
  EXPECT_EQ(capture->kind, CaptureKind::kBugReport);
  ASSERT_TRUE(capture->snapshot);
  EXPECT_EQ(capture->log_file, Data("bug_report/nvidia-bug-report.log"));
  // Its `nvidia-smi nvlink --errorcounters` section joins the -q readings.
  const GpuSnapshot* gpu0 = capture->snapshot->FindGpu(0);
  ASSERT_NE(gpu0, nullptr);
  ASSERT_TRUE(gpu0->nvlinks.has_value());
  EXPECT_EQ(gpu0->nvlinks.value().at(0).replay_errors.value(), 0u);
}

TEST(ReadCapture, RefusesWhatItDoesNotKnowAndSaysWhy) {
  bool not_recognised = false;
  auto capture = ReadCapture(WriteTemp("prose.txt", "Dear support,\nthe cluster is slow today.\n"), &not_recognised);
  ASSERT_FALSE(capture.ok());
  EXPECT_TRUE(not_recognised);
  EXPECT_NE(capture.error().message.find("not recognised: found no nvidia-smi output"), std::string::npos)
      << capture.error().message;
  EXPECT_NE(capture.error().message.find("dcgmi diag"), std::string::npos);

  auto missing = ReadCapture(::testing::TempDir() + "/no-such-capture.txt", &not_recognised);
  ASSERT_FALSE(missing.ok());
  EXPECT_FALSE(not_recognised);

  auto binary = ReadCapture(WriteTemp("binary.bin", std::string("\x7f" "ELF\0\0\0", 7)), &not_recognised);
  ASSERT_FALSE(binary.ok());
  EXPECT_TRUE(not_recognised);

  // --format=csv,noheader rows with no command line: nvidia-smi's, but no column is named; the refusal says so.
  auto rows = ReadCapture(WriteTemp("noheader.csv", "GeForce GTX 1080 Ti, 53 %, 84, 123.00 W\n"
                                                    "GeForce GTX 1080 Ti, 78 %, 68, 242.05 W\n"),
                          &not_recognised);
  ASSERT_FALSE(rows.ok());
  EXPECT_TRUE(not_recognised);
  EXPECT_NE(rows.error().message.find("not recognised: nvidia-smi CSV without column names"), std::string::npos)
      << rows.error().message;

  // A sentence with commas (here a DCGM host engine's log line, as NVIDIA/DCGM#270 quotes one) is no CSV row: the
  // refusal lists the formats looked for instead of asking for column names.
  auto prose = ReadCapture(WriteTemp("hostengine.log",
                                     "ERROR [1514002:1514004] [[Health]] Detected a WARNING in health system Thermal: "
                                     "'Detected clocks event due to thermal violation in GPU 2. Verify that the "
                                     "cooling on this machine is functional, including external, thermal material "
                                     "interface, fans, and any other components.\n"),
                           &not_recognised);
  ASSERT_FALSE(prose.ok());
  EXPECT_TRUE(not_recognised);
  EXPECT_EQ(prose.error().message.find("CSV without column names"), std::string::npos) << prose.error().message;
  EXPECT_NE(prose.error().message.find("found no nvidia-smi output"), std::string::npos) << prose.error().message;
}

}  // namespace
}  // namespace gpudoctor
