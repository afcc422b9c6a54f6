// A test fixture over the fake CUDA driver (testing/fake_cuda): each test
// writes a scenario with a [cuda] table, which the driver reads at cuInit.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "common/scratch_dir.h"
#include "diag/cuda_driver.h"

namespace gpudoctor::testing {

// Where the build put the fake driver (it answers as cuBLAS too).
inline std::string FakeCudaLibrary() { return std::string(GPUDOCTOR_BINARY_DIR) + "/bin/libgpudoctor_fake_cuda.so"; }

class FakeCudaTest : public ::testing::Test {
 protected:
  // A scenario of `gpus` GPUs with `cuda` as its [cuda] table.
  void Load(const std::string& cuda_table, int gpus = 1) {
    const std::string path = dir_.Write("scenario.toml", "gpu_count = " + std::to_string(gpus) + "\n" + cuda_table);
    setenv("GPUDOCTOR_SCENARIO", path.c_str(), 1);
    auto driver = CudaDriver::Load(FakeCudaLibrary());
    ASSERT_TRUE(driver) << driver.error().message;
    driver_ = std::move(*driver);
  }

  ScratchDir dir_;
  std::unique_ptr<CudaDriver> driver_;
};

}  // namespace gpudoctor::testing
