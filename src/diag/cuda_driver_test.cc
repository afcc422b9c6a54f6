// The CUDA driver loader against the fake driver (testing/fake_cuda): a driver too old for the diag kernels,
// by its version or by the PTX ISA it reads, is said so plainly, never as a CUDA error.
#include "diag/cuda_driver.h"

#include <gtest/gtest.h>

#include <string>

#include "diag/fake_cuda_test_support.h"
#include "diag/memtest.h"

namespace gpudoctor {

extern const char kMemtestPtx[];

namespace {

class CudaDriverVersion : public testing::FakeCudaTest {
 protected:
  void UseScenario(const std::string& cuda_table) {
    const std::string path = dir_.Write("scenario.toml", "gpu_count = 1\n" + cuda_table);
    setenv("GPUDOCTOR_SCENARIO", path.c_str(), 1);
  }
  // The memory test once over the fake driver loaded with `cuda_table`: it loads the kernels' PTX first.
  Result<MemtestResult> RunMemtestWith(const std::string& cuda_table) {
    Load(cuda_table);
    MemtestOptions options;
    options.chunk_bytes = 1 << 20;
    return RunMemtest(*driver_, kMemtestPtx, options, nullptr, nullptr);
  }
};

TEST(DriverTooOldMessage, NamesTheBranchNeededAndTheVersionFound) {
  EXPECT_EQ(DriverTooOldMessage(10020), "driver too old for the diag kernels (needs R450, found CUDA 10.2)");
  EXPECT_EQ(DriverTooOldMessage(11080), "driver too old for the diag kernels (needs R450, found CUDA 11.8)");
  EXPECT_EQ(DriverTooOldMessage(0),
            "driver too old for the diag kernels (needs R450, found a driver that does not say its version)");
}

TEST_F(CudaDriverVersion, ADriverOlderThanCuda11IsRefusedAtLoad) {
  UseScenario("[cuda]\ndriver_version = 10020\n");
  auto driver = CudaDriver::Load(testing::FakeCudaLibrary());
  ASSERT_FALSE(driver);
  EXPECT_EQ(driver.error().message, "driver too old for the diag kernels (needs R450, found CUDA 10.2)");
}

TEST_F(CudaDriverVersion, TheOldestDriverItNeedsIsAccepted) {
  UseScenario("[cuda]\ndriver_version = 11000\n");
  auto driver = CudaDriver::Load(testing::FakeCudaLibrary());
  ASSERT_TRUE(driver) << driver.error().message;
  EXPECT_EQ((*driver)->Version(), 11000);
}

TEST_F(CudaDriverVersion, PtxNewerThanTheDriverReadsIsADriverTooOld) {
  if (std::string(kMemtestPtx).empty()) GTEST_SKIP() << "built without clang-16: no PTX";
  // A driver that says it is new enough but refuses the kernels' ISA (CUDA_ERROR_UNSUPPORTED_PTX_VERSION).
  auto result = RunMemtestWith("[cuda]\nmemory_mib = 4\nptx_isa_max = \"6.5\"\n");
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().message, "driver too old for the diag kernels (needs R450, found CUDA 12.8)");
}

TEST_F(CudaDriverVersion, TheBuiltKernelsAreReadByTheOldestDriver) {
  if (std::string(kMemtestPtx).empty()) GTEST_SKIP() << "built without clang-16: no PTX";
  // R450 reads PTX ISA 7.0 (CUDA 11.0): the kernels load there.
  auto result = RunMemtestWith("[cuda]\nmemory_mib = 4\ndriver_version = 11000\nptx_isa_max = \"7.0\"\n");
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_NE(std::string(kMemtestPtx).find(".version 7.0\n"), std::string::npos);
}

}  // namespace
}  // namespace gpudoctor
