// NvmlLibrary: libnvidia-ml loaded at run time with dlopen, never linked.
//
// Every entry point in GPUDOCTOR_NVML_FUNCTIONS becomes a member function
// pointer that is null when the library lacks the symbol. Callers prefer the
// versioned symbols through the helpers below, which fall back in list order.
//
//   auto nvml = NvmlLibrary::Load("");            // libnvidia-ml.so.1
//   if (!nvml) { puts(nvml.error().message.c_str()); return; }
//   if (nvml->nvmlInit_v2) nvml->nvmlInit_v2();
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "model/snapshot.h"
#include "nvml/nvml_api.h"

namespace gpudoctor {

inline constexpr const char* kDefaultNvmlLibrary = "libnvidia-ml.so.1";

class NvmlLibrary {
 public:
  // Loads `path` (default libnvidia-ml.so.1). A missing library is an Error
  // whose message names the library; missing symbols are not errors.
  static Result<std::unique_ptr<NvmlLibrary>> Load(const std::string& path);
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

#define GPUDOCTOR_DECLARE_POINTER(name, ret, params) ret(*name) params = nullptr;
  GPUDOCTOR_NVML_FUNCTIONS(GPUDOCTOR_DECLARE_POINTER)
#undef GPUDOCTOR_DECLARE_POINTER

  const std::string& path() const { return path_; }

  // Versioned entry points with fallback. Each returns
  // NVML_ERROR_FUNCTION_NOT_FOUND when no variant exists.
  nvmlReturn_t Init() const;
  nvmlReturn_t DeviceCount(unsigned int* count) const;
  nvmlReturn_t HandleByIndex(unsigned int index, nvmlDevice_t* device) const;
  nvmlReturn_t PciBusId(nvmlDevice_t device, std::string* bus_id) const;
  nvmlReturn_t CudaDriverVersion(int* version) const;

 private:
  NvmlLibrary() = default;
  void* handle_ = nullptr;
  std::string path_;
};

// A clear, stable message for every NVML return code, e.g.
// "GPU is lost (NVML_ERROR_GPU_IS_LOST)". Unknown codes say so with the number.
std::string NvmlErrorMessage(nvmlReturn_t code);
// The symbolic name, e.g. "NVML_ERROR_GPU_IS_LOST".
const char* NvmlErrorName(nvmlReturn_t code);
// How an NVML code affects access to a GPU or the whole driver.
AccessError AccessErrorForNvml(nvmlReturn_t code);

}  // namespace gpudoctor
