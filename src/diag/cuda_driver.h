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

class CudaDriver {
 public:
  // Loads `path` (default libcuda.so.1). A missing library or entry point is
  // an Error naming it: gpudoctor needs every function of the list.
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

 private:
  CudaDriver() = default;
  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace gpudoctor
