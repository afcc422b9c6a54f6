#include "diag/cuda_driver.h"

#include <dlfcn.h>

#include <fmt/format.h>

namespace gpudoctor {

std::string DriverTooOldMessage(int cuda_driver_version) {
  const std::string found = cuda_driver_version > 0 ? fmt::format("found CUDA {}.{}", cuda_driver_version / 1000,
                                                                  cuda_driver_version % 1000 / 10)
                                                    : std::string("found a driver that does not say its version");
  return fmt::format("driver too old for the diag kernels (needs {}, {})", kMinimumDriverBranch, found);
}

Result<std::unique_ptr<CudaDriver>> CudaDriver::Load(const std::string& path) {
  const std::string target = path.empty() ? kDefaultCudaLibrary : path;
  void* handle = dlopen(target.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Error{fmt::format("cannot load the CUDA driver {}: {}", target, why ? why : "unknown reason")};
  }
  std::unique_ptr<CudaDriver> driver(new CudaDriver());
  driver->handle_ = handle;
  driver->path_ = target;
#define GPUDOCTOR_RESOLVE(name, ret, params)                                                  \
  driver->name = reinterpret_cast<ret(*) params>(dlsym(handle, #name));                    \
  if (driver->name == nullptr) {                                                           \
    if (driver->cuDriverGetVersion == nullptr)                                             \
      return Error{fmt::format("the CUDA driver {} has no {}: it is too old", target, #name)}; \
    return Error{fmt::format("{} ({} has no {})", DriverTooOldMessage(driver->Version()), target, #name)}; \
  }
  GPUDOCTOR_CUDA_FUNCTIONS(GPUDOCTOR_RESOLVE)
#undef GPUDOCTOR_RESOLVE
  // cuDriverGetVersion needs no cuInit: an old driver is told apart before any GPU is touched.
  if (const int version = driver->Version(); version < kMinimumCudaDriverVersion)
    return Error{DriverTooOldMessage(version)};
  return driver;
}

CudaDriver::~CudaDriver() {
  if (handle_ != nullptr) dlclose(handle_);
}

int CudaDriver::Version() const {
  int version = 0;
  if (cuDriverGetVersion == nullptr || cuDriverGetVersion(&version) != CUDA_SUCCESS) return 0;
  return version;
}

std::string CudaDriver::ErrorMessage(CUresult code) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName(code, &name) != CUDA_SUCCESS || name == nullptr) name = nullptr;
  if (cuGetErrorString(code, &text) != CUDA_SUCCESS || text == nullptr) text = nullptr;
  if (name == nullptr) return fmt::format("CUDA error {}", code);
  return text ? fmt::format("{}: {}", name, text) : std::string(name);
}

}  // namespace gpudoctor
