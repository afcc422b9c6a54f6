// CudaDriver: libcuda.so.1 (or the fake driver) loaded at run time with
// dlopen, never linked, as NVML is. Only src/diag knows the CUDA driver.
//
//   auto cuda = CudaDriver::Load("");   // libcuda.so.1
//   if (!cuda) { puts(cuda.error().message.c_str()); return; }
//   CUresult status = (*cuda)->cuInit(0);
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "diag/cuda_api.h"

namespace gpudoctor {

inline constexpr const char* kDefaultCudaLibrary = "libcuda.so.1";

// The oldest driver the diag kernels run on: CUDA 11.0's (branch R450), which reads their PTX ISA 7.0 and has
// every entry point of cuda_api.h (cuDevicePrimaryCtxRelease_v2 is the newest). docs/diag.md#the-driver.
inline constexpr int kMinimumCudaDriverVersion = 11000;
inline constexpr const char* kMinimumDriverBranch = "R450";

// "driver too old for the diag kernels (needs R450, found CUDA 10.2)": what a diag that could not run says.
std::string DriverTooOldMessage(int cuda_driver_version);

class CudaDriver {
 public:
  // Loads `path` (default libcuda.so.1). A missing library or entry point is
  // an Error naming it: gpudoctor needs every function of the list. A driver
  // older than kMinimumCudaDriverVersion, or one without an entry point of the
  // list, is an Error of DriverTooOldMessage.
  static Result<std::unique_ptr<CudaDriver>> Load(const std::string& path);
  ~CudaDriver();
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

#define GPUDOCTOR_DECLARE_POINTER(name, ret, params) ret(*name) params = nullptr;
  GPUDOCTOR_CUDA_FUNCTIONS(GPUDOCTOR_DECLARE_POINTER)
#undef GPUDOCTOR_DECLARE_POINTER

  const std::string& path() const { return path_; }

  // "CUDA_ERROR_OUT_OF_MEMORY: out of memory", from the driver's own strings.
  std::string ErrorMessage(CUresult code) const;

  // The CUDA version the driver implements (cuDriverGetVersion: 12080 for 12.8), 0 when it does not say.
  int Version() const;

 private:
  CudaDriver() = default;
  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace gpudoctor
