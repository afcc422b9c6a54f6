// The worker's command line, both ways.
#include "diag/diag_run.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gpudoctor
