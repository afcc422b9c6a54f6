// The memory test through the fake CUDA driver (testing/fake_cuda), which runs
// the same per-word kernels on the CPU and injects the faults of a scenario.
#include "diag/memtest.h"

#include <gtest/gtest.h>

#include <set>

#include "diag/fake_cuda_test_support.h"
#include "diag/kernels/memtest_patterns.h"

namespace gpudoctor {

extern const char kMemtestPtx[];

namespace {

class Memtest : public testing::FakeCudaTest {
 protected:
  Result<MemtestResult> Run(MemtestOptions options = {}) {
    options.chunk_bytes = 1 << 20;
    return RunMemtest(*driver_, kMemtestPtx, options, nullptr, nullptr);
  }

};

TEST_F(Memtest, TheBuiltPtxDeclaresEveryKernelTheTestLaunches) {
  const std::string ptx = kMemtestPtx;
  if (ptx.empty()) GTEST_SKIP() << "built without clang-16: no PTX";
  for (const char* entry : {".entry gd_memtest_fill(", ".entry gd_memtest_check(", ".entry gd_memtest_check_invert("})
    EXPECT_NE(ptx.find(entry), std::string::npos) << entry;
  EXPECT_NE(ptx.find(".target sm_70"), std::string::npos);
}

TEST_F(Memtest, GoodMemoryPassesEveryPattern) {
  if (std::string(kMemtestPtx).empty()) GTEST_SKIP() << "built without clang-16: no PTX";
  Load("[cuda]\nmemory_mib = 8\n");
  auto result = Run();
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->error_count, 0u);
  EXPECT_EQ(result->patterns.size(), MemtestPatternNames().size());
  EXPECT_GT(result->bytes_tested, 6u << 20);
  EXPECT_EQ(result->passes, 1);
  EXPECT_GT(result->copy_gb_per_s, 0);
}

TEST_F(Memtest, AStuckBitIsFoundAtItsAddressWithItsBit) {
  if (std::string(kMemtestPtx).empty()) GTEST_SKIP() << "built without clang-16: no PTX";
  // Bit 5 of the word at byte 3 MiB + 64 reads 1 whatever is written.
  Load("[cuda]\nmemory_mib = 8\n[[cuda.fault]]\ngpu = 0\nstuck_bits = [{ offset = 3145792, bit = 5, value = 1 }]\n");
  auto result = Run({.patterns = {"walking_zeros", "moving_inversions_zeros"}});
  ASSERT_TRUE(result) << result.error().message;
  ASSERT_GT(result->error_count, 0u);
  std::set<uint64_t> addresses;
  for (const MemtestError& error : result->errors) {
    addresses.insert(error.address);
    EXPECT_EQ(error.expected ^ error.actual, 1u << 5) << error.pattern;
    EXPECT_EQ(error.actual & (1u << 5), 1u << 5);
  }
  ASSERT_EQ(addresses.size(), 1u);
  // The fake's device memory starts with the error log's allocation, so the address is base + offset.
  const uint64_t base = *addresses.begin() - 3145792;
  EXPECT_EQ(base % 4096, 0u);
  // A bit stuck at 1 shows where a 0 is written: in the one walking-zeros
  // pattern that clears bit 5, and in the zeros of the moving inversions.
  EXPECT_EQ(result->patterns[0].errors, 1u);
  EXPECT_EQ(result->patterns[1].errors, 1u);
}

TEST_F(Memtest, RandomFlipsAreCountedInEveryPatternThatMeetsThem) {
  if (std::string(kMemtestPtx).empty()) GTEST_SKIP() << "built without clang-16: no PTX";
  Load("[cuda]\nmemory_mib = 8\n[[cuda.fault]]\ngpu = 0\nflip_rate = 1e-5\n");
  auto result = Run({.patterns = {"random_sequence", "own_address"}});
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_GT(result->error_count, 0u);
  for (const MemtestError& error : result->errors) {
    const uint32_t flipped = error.expected ^ error.actual;
    EXPECT_EQ(flipped & (flipped - 1), 0u) << "one bit per flip";
  }
}

TEST_F(Memtest, TooLittleFreeMemoryIsAClearError) {
  if (std::string(kMemtestPtx).empty()) GTEST_SKIP() << "built without clang-16: no PTX";
  Load("[cuda]\nmemory_mib = 8\n[[cuda.fault]]\ngpu = 0\nfree_mib = 0.001\n");
  auto result = Run();
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("too little free memory"), std::string::npos) << result.error().message;
}

TEST_F(Memtest, ADeviceLostMidwayFailsWithTheDriversError) {
  if (std::string(kMemtestPtx).empty()) GTEST_SKIP() << "built without clang-16: no PTX";
  Load("[cuda]\nmemory_mib = 8\n[[cuda.fault]]\ngpu = 0\nlost_at_launch = 20\n");
  auto result = Run();
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("CUDA_ERROR_LAUNCH_FAILED"), std::string::npos) << result.error().message;
}

TEST_F(Memtest, WithoutPtxTheTestSaysHowItWasBuilt) {
  Load("[cuda]\nmemory_mib = 8\n");
  auto result = RunMemtest(*driver_, "", {}, nullptr, nullptr);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("built without GPU kernels"), std::string::npos);
}

TEST(MemtestPatterns, EveryPatternWritesWhatItChecksAndItsComplementDiffersInEveryBit) {
  using namespace memtest;
  for (Pattern pattern : {Pattern{kConstant, 0x5a5a5a5au, 0, 0}, Pattern{kOwnAddress, 0, 0, 0},
                          Pattern{kRandom, 0, 17, 0}, Pattern{kModulo20, 0x12345678u, 3, 0},
                          Pattern{kShiftingOnes, 0, 5, 0}}) {
    Pattern inverted = pattern;
    inverted.inverted = 1;
    for (Index i = 0; i < 100; ++i) EXPECT_EQ(Expected(pattern, 0x1000, i), ~Expected(inverted, 0x1000, i));
  }
  EXPECT_EQ(Expected(Pattern{kOwnAddress, 0, 0, 0}, 0x1000, 3), 0x100cu);
  EXPECT_EQ(Expected(Pattern{kModulo20, 7, 3, 0}, 0, 23), 7u);
  EXPECT_EQ(Expected(Pattern{kModulo20, 7, 3, 0}, 0, 24), ~7u);
  EXPECT_EQ(Expected(Pattern{kShiftingOnes, 0, 31, 0}, 0, 1), 1u);
  EXPECT_NE(Mix(1, 0), Mix(2, 0));
}

}  // namespace
}  // namespace gpudoctor
