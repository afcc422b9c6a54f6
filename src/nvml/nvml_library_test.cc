#include "nvml/nvml_library.h"

#include <gtest/gtest.h>

#include <string>

namespace gpudoctor {
namespace {

const std::string kFake = std::string(GPUDOCTOR_BINARY_DIR) + "/bin/libgpudoctor_fake_nvml.so";
const std::string kLegacy = std::string(GPUDOCTOR_BINARY_DIR) + "/bin/libgpudoctor_fake_nvml_legacy.so";

TEST(NvmlLibrary, MissingLibraryNamesItAndSaysDriverNotFound) {
  auto library = NvmlLibrary::Load("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(library.ok());
  EXPECT_NE(library.error().message.find("NVIDIA driver not found (/nonexistent/libnvidia-ml.so.1)"), std::string::npos);
}

TEST(NvmlLibrary, ALibraryWithoutNvmlSymbolsIsRejected) {
  auto library = NvmlLibrary::Load("libz.so.1");
  ASSERT_FALSE(library.ok());
  EXPECT_NE(library.error().message.find("not an NVML library"), std::string::npos);
}

TEST(NvmlLibrary, PrefersVersionedSymbols) {
  auto library = NvmlLibrary::Load(kFake);
  ASSERT_TRUE(library.ok()) << library.error().message;
  EXPECT_NE((*library)->nvmlInit_v2, nullptr);
  EXPECT_NE((*library)->nvmlDeviceGetCount_v2, nullptr);
  EXPECT_NE((*library)->nvmlDeviceGetPciInfo_v3, nullptr);
}

TEST(NvmlLibrary, FallsBackToUnversionedSymbolsWhenMissing) {
  auto library = NvmlLibrary::Load(kLegacy);
  ASSERT_TRUE(library.ok()) << library.error().message;
  const NvmlLibrary& nvml = **library;
  EXPECT_EQ(nvml.nvmlInit_v2, nullptr);
  EXPECT_EQ(nvml.nvmlDeviceGetCount_v2, nullptr);
  EXPECT_EQ(nvml.nvmlDeviceGetPciInfo_v3, nullptr);
  EXPECT_EQ(nvml.nvmlDeviceGetPciInfo_v2, nullptr);
  ASSERT_NE(nvml.nvmlInit, nullptr);
  std::string scenario = std::string(GPUDOCTOR_SOURCE_DIR) + "/examples/healthy-8xh100.toml";
  setenv("GPUDOCTOR_SCENARIO", scenario.c_str(), 1);
  ASSERT_EQ(nvml.Init(), NVML_SUCCESS);
  unsigned count = 0;
  ASSERT_EQ(nvml.DeviceCount(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 8u);
  nvmlDevice_t device = nullptr;
  ASSERT_EQ(nvml.HandleByIndex(0, &device), NVML_SUCCESS);
  std::string bus_id;
  ASSERT_EQ(nvml.PciBusId(device, &bus_id), NVML_SUCCESS);
  EXPECT_EQ(bus_id.size(), 12u) << bus_id;  // normalised 0000:bb:dd.f from the old struct layout
}

TEST(NvmlErrorMessage, EveryCodeHasAClearMessage) {
  for (int code = 0; code <= 29; ++code) {
    std::string message = NvmlErrorMessage(code);
    EXPECT_EQ(message.find("unrecognised"), std::string::npos) << code;
    EXPECT_NE(message.find("NVML_"), std::string::npos) << code;
  }
  EXPECT_NE(NvmlErrorMessage(NVML_ERROR_UNKNOWN).find("NVML_ERROR_UNKNOWN"), std::string::npos);
  EXPECT_NE(NvmlErrorMessage(NVML_ERROR_GPU_IS_LOST).find("fallen off the bus"), std::string::npos);
  EXPECT_NE(NvmlErrorMessage(NVML_ERROR_LIB_RM_VERSION_MISMATCH).find("mismatch"), std::string::npos);
  EXPECT_EQ(NvmlErrorMessage(4242), "unrecognised NVML error code 4242");
}

TEST(AccessErrorForNvml, MapsDriverWideFailures) {
  EXPECT_EQ(AccessErrorForNvml(NVML_ERROR_GPU_IS_LOST), AccessError::kGpuLost);
  EXPECT_EQ(AccessErrorForNvml(NVML_ERROR_DRIVER_NOT_LOADED), AccessError::kDriverNotLoaded);
  EXPECT_EQ(AccessErrorForNvml(NVML_ERROR_LIB_RM_VERSION_MISMATCH), AccessError::kVersionMismatch);
  EXPECT_EQ(AccessErrorForNvml(NVML_ERROR_NO_PERMISSION), AccessError::kNoPermission);
  EXPECT_EQ(AccessErrorForNvml(NVML_SUCCESS), AccessError::kNone);
}

}  // namespace
}  // namespace gpudoctor
