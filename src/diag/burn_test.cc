// The compute burn through the fake CUDA driver, which runs the burn's own
// per-thread work and matrix products on the CPU, answers as cuBLAS too, and
// injects wrong products and slow GPUs.
#include "diag/burn.h"

#include <gtest/gtest.h>

#include "diag/fake_cuda_test_support.h"
#include "diag/kernels/burn_math.h"

namespace gpudoctor {

extern const char kBurnPtx[];

namespace {

class Burn : public testing::FakeCudaTest {
 protected:
  void SetUp() override {
    if (std::string(kBurnPtx).empty()) GTEST_SKIP() << "built without clang-16: no PTX";
  }

  Result<BurnResult> Run(BurnOptions options = {}, const Cublas* cublas = nullptr) {
    if (options.matrix == 0) options.matrix = 48;
    options.duration = std::chrono::milliseconds(40);
    return RunBurn(*driver_, cublas, kBurnPtx, options, nullptr, nullptr);
  }
};

TEST_F(Burn, TheBuiltPtxDeclaresEveryKernelTheBurnLaunches) {
  const std::string ptx = kBurnPtx;
  for (const char* entry : {"gd_burn_fill_f64(", "gd_burn_fill_bf16(", "gd_burn_expected_1(", "gd_burn_expected_2(",
                            "gd_burn_sums_f32(", "gd_burn_gemm_f64(", "gd_burn_gemm_f32(", "gd_burn_gemm_bf16("})
    EXPECT_NE(ptx.find(std::string(".entry ") + entry), std::string::npos) << entry;
}

TEST_F(Burn, AGoodGpuGetsEveryProductRightInEveryPrecision) {
  Load("[cuda]\nmemory_mib = 8\n");
  auto result = Run();
  ASSERT_TRUE(result) << result.error().message;
  ASSERT_EQ(result->precisions.size(), 4u);
  for (const BurnPrecisionResult& precision : result->precisions) {
    EXPECT_GE(precision.iterations, 1) << precision.precision;
    EXPECT_EQ(precision.wrong_iterations, 0) << precision.precision;
    EXPECT_EQ(precision.engine, "gpudoctor kernel (CUDA cores)");
    EXPECT_EQ(precision.matrix, 48u);
    EXPECT_GT(precision.tflops, 0);
    EXPECT_GT(precision.baseline_tflops, 0);
  }
  EXPECT_TRUE(result->errors.empty());
}

TEST_F(Burn, OneWrongEntryIsFoundInItsRowAndColumnInEveryPrecision) {
  Load("[cuda]\nmemory_mib = 8\n[[cuda.fault]]\ngpu = 0\nwrong_product = { row = 3, col = 40, delta = 2.0 }\n");
  auto result = Run();
  ASSERT_TRUE(result) << result.error().message;
  size_t iterations = 0;
  for (const BurnPrecisionResult& p : result->precisions) iterations += static_cast<size_t>(p.iterations);
  ASSERT_EQ(result->errors.size(), std::min<size_t>(iterations, 100));  // the first 100 are kept
  for (const BurnPrecisionResult& precision : result->precisions)
    EXPECT_EQ(precision.wrong_iterations, precision.iterations) << precision.precision;
  for (const BurnError& error : result->errors) {
    EXPECT_EQ(error.rows, std::vector<uint64_t>{3}) << error.precision;
    EXPECT_EQ(error.cols, std::vector<int64_t>{40}) << error.precision;
    EXPECT_EQ(error.not_integer, 0u);
  }
}

TEST_F(Burn, AnEntryOffByLessThanOneIsCaughtAsNotAnInteger) {
  // 0.25 off: truncated to an integer it would sum right; it is still wrong.
  Load("[cuda]\nmemory_mib = 8\n[[cuda.fault]]\ngpu = 0\nwrong_product = { row = 0, col = 0, delta = 0.25 }\n");
  auto result = Run({.precisions = {Precision::kFp64}});
  ASSERT_TRUE(result) << result.error().message;
  ASSERT_FALSE(result->errors.empty());
  EXPECT_EQ(result->errors.front().not_integer, 1u);
}

TEST_F(Burn, CublasDoesTheProductsWhenFoundAndIsVerifiedTheSameWay) {
  Load("[cuda]\nmemory_mib = 8\n[[cuda.fault]]\ngpu = 0\nwrong_product = { row = 7, col = 7, delta = -1.0 }\n");
  auto cublas = Cublas::Find(testing::FakeCudaLibrary());
  ASSERT_TRUE(cublas) << cublas.error().message;
  auto result = Run({.precisions = {Precision::kBf16, Precision::kTf32}}, cublas->get());
  ASSERT_TRUE(result) << result.error().message;
  for (const BurnPrecisionResult& precision : result->precisions) {
    EXPECT_EQ(precision.engine, "cuBLAS 12.8.4");
    EXPECT_GT(precision.wrong_iterations, 0);
  }
  EXPECT_EQ(result->errors.front().rows, std::vector<uint64_t>{7});
}

TEST_F(Burn, ASlowGpuShowsInItsThroughput) {
  Load("[cuda]\nmemory_mib = 8\ngemm_ms = 2\n[[cuda.fault]]\ngpu = 1\nslow_factor = 3.0\n", 2);
  auto fast = Run({.device = 0, .precisions = {Precision::kFp32}});
  auto slow = Run({.device = 1, .precisions = {Precision::kFp32}});
  ASSERT_TRUE(fast && slow);
  // The fake's products take at least 2 ms and 6 ms: the slow one is at most a third as fast.
  EXPECT_LT(slow->precisions[0].baseline_tflops, fast->precisions[0].baseline_tflops * 0.5);
}

TEST_F(Burn, TooLittleMemoryForEvenTheSmallestProductIsAClearError) {
  Load("[cuda]\nmemory_mib = 8\n[[cuda.fault]]\ngpu = 0\nfree_mib = 0.5\n");
  auto result = RunBurn(*driver_, nullptr, kBurnPtx, {.precisions = {Precision::kFp64}}, nullptr, nullptr);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("too little free memory"), std::string::npos) << result.error().message;
}

TEST(BurnMath, EntriesAreSmallIntegersAndBf16HoldsThemExactly) {
  int seen[5] = {};
  for (unsigned long long i = 0; i < 1000; ++i) {
    const int entry = burn::Entry(3, i, i * 7);
    ASSERT_GE(entry, -2);
    ASSERT_LE(entry, 2);
    ++seen[entry + 2];
    EXPECT_EQ(burn::Bf16Value(burn::Bf16Bits(static_cast<float>(entry))), static_cast<float>(entry));
  }
  for (int count : seen) EXPECT_GT(count, 100);  // every value, about equally
}

TEST(BurnMath, TheExpectedChecksumsAreThoseOfTheTrueProduct) {
  using burn::Index;
  using burn::Sum;
  const Index n = 37;
  std::vector<Sum> b_sums(n), b_weighted(n), sums(n), weighted(n), got_sums(n, 0), got_weighted(n, 0);
  for (Index k = 0; k < n; ++k) burn::ExpectedStep1Thread(n, 2, b_sums.data(), b_weighted.data(), k);
  for (Index i = 0; i < n; ++i)
    burn::ExpectedStep2Thread(n, 1, b_sums.data(), b_weighted.data(), sums.data(), weighted.data(), i);
  std::vector<double> c(n * n);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j)
      for (Index k = 0; k < n; ++k) c[i + j * n] += burn::Entry(1, i, k) * burn::Entry(2, k, j);
  unsigned odd = 0;
  auto add_up = [&] {
    std::fill(got_sums.begin(), got_sums.end(), 0);
    std::fill(got_weighted.begin(), got_weighted.end(), 0);
    for (Index t = 0; t < n * ((n + burn::kSegment - 1) / burn::kSegment); ++t)
      burn::SumsThread(c.data(), n, got_sums.data(), got_weighted.data(), &odd, t);
  };
  add_up();
  EXPECT_EQ(got_sums, sums);
  EXPECT_EQ(got_weighted, weighted);
  EXPECT_EQ(odd, 0u);
  // Two wrong entries of one row that cancel in the plain sum still show in the weighted one.
  c[5 + 3 * n] += 1;
  c[5 + 30 * n] -= 1;
  add_up();
  EXPECT_EQ(got_sums[5], sums[5]);
  EXPECT_EQ(got_weighted[5] - weighted[5], 3 - 30);
}

TEST(BurnPrecision, NamesRoundTrip) {
  for (Precision precision : kAllPrecisions) EXPECT_EQ(ParsePrecision(PrecisionName(precision)), precision);
  EXPECT_FALSE(ParsePrecision("fp16"));
}

}  // namespace
}  // namespace gpudoctor
