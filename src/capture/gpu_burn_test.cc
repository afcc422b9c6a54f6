// gpu_burn's output read into burn records: on real runs (testdata/captures/gpu_burn, each naming its public
// source), and on outputs laid out from gpu_burn's own printf formats (gpu_burn-drv.cpp, listenClients) for the
// cases no public file with a named source was found for: a FAULTY GPU, a worker that died, a run that did no
// work, an abort. Those are labelled as constructed.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "capture/capture.h"
#include "capture/gpu_burn.h"

namespace gpudoctor::gpu_burn {
namespace {

std::string Path(const std::string& file) {
  return std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/captures/gpu_burn/" + file;
}

std::string Read(const std::string& file) {
  std::ifstream in(Path(file));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(GpuBurn, ARealRunOfEightGpusGivesEightPassedBurnsNamedByUuid) {
  const std::string text = Read("001.txt");
  ASSERT_TRUE(LooksLikeGpuBurn(text));
  auto records = ParseGpuBurn(text);
  ASSERT_TRUE(records.ok()) << records.error().message;
  ASSERT_EQ(records->size(), 8u);
  for (uint32_t gpu = 0; gpu < 8; ++gpu) {
    const DiagnosticRecord& record = (*records)[gpu];
    EXPECT_EQ(record.gpu_index, gpu);
    EXPECT_EQ(record.test, "burn");
    EXPECT_EQ(record.tool, "gpu_burn");
    EXPECT_EQ(record.state, "passed") << record.summary;
    EXPECT_TRUE(record.uuid.starts_with("GPU-")) << record.uuid;
    EXPECT_NE(record.summary.find("without a wrong result"), std::string::npos) << record.summary;
  }
}

TEST(GpuBurn, AnOlderBuildsPaddedNumbersStillGiveEachGpuItsColumn) {
  auto records = ParseGpuBurn(Read("002.txt"));
  ASSERT_TRUE(records.ok()) << records.error().message;
  ASSERT_EQ(records->size(), 2u);
  for (const DiagnosticRecord& record : *records) {
    EXPECT_EQ(record.state, "passed") << record.summary;
    // "( 0 Gflop/s)" at first: the second GPU's work is read from its own column, not shifted.
    EXPECT_EQ(record.summary.find("computed 0 operations"), std::string::npos) << record.summary;
  }
}

// Constructed from gpu_burn's formats: "%.1f%%  proc'd: %d (%.0f Gflop/s) - ...  errors: %d  (WARNING!)- ...".
TEST(GpuBurn, WrongResultsMakeAGpuFaultyAndTheOthersPass) {
  const std::string text =
      "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-11111111-2222-3333-4444-555555555555)\n"
      "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-66666666-7777-8888-9999-000000000000)\n"
      "50.0%  proc'd: 5000 (18000 Gflop/s) - 5000 (18100 Gflop/s)   errors: 0 - 1311  (WARNING!)  temps: 61 C - 63 C \r"
      "100.0%  proc'd: 10000 (18000 Gflop/s) - 10000 (18050 Gflop/s)   errors: 0 - 0   temps: 62 C - 64 C \n"
      "Killing processes with SIGTERM (soft kill)\ndone\n\nTested 2 GPUs:\n\tGPU 0: OK\n\tGPU 1: FAULTY\n";
  auto records = ParseGpuBurn(text);
  ASSERT_TRUE(records.ok()) << records.error().message;
  ASSERT_EQ(records->size(), 2u);
  EXPECT_EQ((*records)[0].state, "passed");
  EXPECT_EQ((*records)[1].state, "faulty");
  EXPECT_EQ((*records)[1].uuid, "GPU-66666666-7777-8888-9999-000000000000");
  EXPECT_NE((*records)[1].summary.find("up to 1311 in one report interval"), std::string::npos)
      << (*records)[1].summary;
  EXPECT_NE((*records)[1].summary.find("last at 64 C"), std::string::npos) << (*records)[1].summary;
  EXPECT_EQ((*records)[1].command, "gpu_burn -i 1 300");
}

// gpu_burn's error counter is a signed int that garbage can wrap: the most negative count is the largest.
TEST(GpuBurn, TheMostNegativeCountIsReadAsItsSize) {
  auto records = ParseGpuBurn("100.0%  proc'd: 10 (900 Gflop/s)   errors: -9223372036854775808  (WARNING!)  temps: "
                              "60 C \nTested 1 GPUs:\n\tGPU 0: FAULTY\n");
  ASSERT_TRUE(records.ok()) << records.error().message;
  EXPECT_NE((*records)[0].summary.find("up to 9223372036854775808 in one report interval"), std::string::npos)
      << (*records)[0].summary;
}

// gpu_burn prints OK for a GPU whose worker died: only errors set its FAULTY flag.
TEST(GpuBurn, AWorkerThatDiedFailsTheBurnThoughGpuBurnSaysOk) {
  const std::string text =
      "30.0%  proc'd: 3000 (9000 Gflop/s) - -1 (0 Gflop/s)   errors: 0 - 0  (DIED!)  temps: 55 C - 48 C \r"
      "100.0%  proc'd: 10000 (9000 Gflop/s) - -1 (0 Gflop/s)   errors: 0 - 0  (DIED!)  temps: 57 C - 40 C \n"
      "Tested 2 GPUs:\n\tGPU 0: OK\n\tGPU 1: OK\n";
  auto records = ParseGpuBurn(text);
  ASSERT_TRUE(records.ok()) << records.error().message;
  ASSERT_EQ(records->size(), 2u);
  EXPECT_EQ((*records)[0].state, "passed");
  EXPECT_EQ((*records)[1].state, "faulty");
  EXPECT_NE((*records)[1].summary.find("died during the burn, at 30.0% (gpu_burn printed OK)"), std::string::npos)
      << (*records)[1].summary;
}

TEST(GpuBurn, EveryWorkerDeadAbortsWithoutAVerdictAndEachGpuFailed) {
  const std::string text =
      "GPU 0: Tesla T4 (UUID: GPU-0aaee1d0-efc5-d3e6-a13b-f69ac8f6fe36)\n"
      "Couldn't init a GPU test: Error: \n"
      "0.0%  proc'd: -1 (0 Gflop/s)   errors: 0  (DIED!)  temps: 68 C \n\n"
      "No clients are alive!  Aborting\n";
  auto records = ParseGpuBurn(text);
  ASSERT_TRUE(records.ok()) << records.error().message;
  ASSERT_EQ(records->size(), 1u);
  EXPECT_EQ((*records)[0].state, "faulty");
  EXPECT_NE((*records)[0].summary.find("Couldn't init a GPU test"), std::string::npos) << (*records)[0].summary;
}

// gpu_burn prints OK for a GPU it never loaded: nothing computed, nothing compared.
TEST(GpuBurn, ARunThatDidNoWorkTestedNothing) {
  const std::string text =
      "Couldn't init a GPU test: Error in \"load module\":\n"
      "100.0%  proc'd: 0 (0 Gflop/s) - 0 (0 Gflop/s)   errors: 0 - 0   temps: 30 C - 28 C \n"
      "Tested 2 GPUs:\n\tGPU 0: OK\n\tGPU 1: OK\n";
  auto records = ParseGpuBurn(text);
  ASSERT_TRUE(records.ok()) << records.error().message;
  ASSERT_EQ(records->size(), 2u);
  for (const DiagnosticRecord& record : *records) {
    EXPECT_EQ(record.state, "could_not_run") << record.summary;
    EXPECT_NE(record.summary.find("load module"), std::string::npos) << record.summary;
  }
}

TEST(GpuBurn, AnAbortWhoseLastProgressWasCutStillFailsEveryGpuItNamed) {
  auto records = ParseGpuBurn(
      "GPU 0: Tesla T4 (UUID: GPU-0aaee1d0-efc5-d3e6-a13b-f69ac8f6fe36)\n"
      "12.0%  proc'd: 1200 (3000 Gflop/s)   errors: 0   temps: 70 C \r\n\nNo clients are alive!  Aborting\n");
  ASSERT_TRUE(records.ok()) << records.error().message;
  ASSERT_EQ(records->size(), 1u);
  EXPECT_EQ((*records)[0].state, "faulty");
  EXPECT_NE((*records)[0].summary.find("at 12.0% (No clients are alive!  Aborting)"), std::string::npos)
      << (*records)[0].summary;
  // A verdict pasted without its progress: gpu_burn's word, said as such.
  auto verdict_only = ParseGpuBurn("Tested 1 GPUs:\n\tGPU 0: OK\n");
  ASSERT_TRUE(verdict_only.ok());
  EXPECT_EQ((*verdict_only)[0].state, "passed");
  EXPECT_EQ((*verdict_only)[0].summary, "gpu_burn printed OK for GPU 0 (its progress is not in the capture)");
}

TEST(GpuBurn, AnOutputCutBeforeItsVerdictIsInterrupted) {
  auto records = ParseGpuBurn("42.5%  proc'd: 4000 (9000 Gflop/s)   errors: 0   temps: 60 C \r");
  ASSERT_TRUE(records.ok()) << records.error().message;
  ASSERT_EQ(records->size(), 1u);
  EXPECT_EQ((*records)[0].state, "interrupted");
  EXPECT_NE((*records)[0].summary.find("ends at 42.5%"), std::string::npos) << (*records)[0].summary;
}

TEST(GpuBurn, OtherOutputsAreNotTakenForIt) {
  EXPECT_FALSE(LooksLikeGpuBurn("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-27806f02-cd3c-d2f5-f0c5-dae4dee3906a)\n"));
  EXPECT_FALSE(LooksLikeGpuBurn("Tested the fans: all OK\n"));
  EXPECT_TRUE(LooksLikeGpuBurn("Tested 1 GPUs:\n\tGPU 0: OK\n"));
  auto none = ParseGpuBurn("No clients are alive!  Aborting\n");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no GPU found"), std::string::npos) << none.error().message;
}

TEST(GpuBurn, CheckFromReadsItAsGpuBurnsOutput) {
  auto capture = ReadCapture(Path("001.txt"));
  ASSERT_TRUE(capture.ok()) << capture.error().message;
  EXPECT_EQ(capture->kind, CaptureKind::kGpuBurn);
  EXPECT_FALSE(capture->snapshot);
  EXPECT_EQ(capture->diagnostics.size(), 8u);
}

}  // namespace
}  // namespace gpudoctor::gpu_burn
