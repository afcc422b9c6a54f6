#include "nvml/nvml_library.h"

#include <dlfcn.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "common/text.h"

namespace gpudoctor {
namespace {

struct NvmlCode {
  nvmlReturn_t code;
  const char* name;
  const char* message;
};

constexpr std::array<NvmlCode, 31> kNvmlCodes{{
    {NVML_SUCCESS, "NVML_SUCCESS", "success"},
    {NVML_ERROR_UNINITIALIZED, "NVML_ERROR_UNINITIALIZED", "NVML was not initialised"},
    {NVML_ERROR_INVALID_ARGUMENT, "NVML_ERROR_INVALID_ARGUMENT", "invalid argument"},
    {NVML_ERROR_NOT_SUPPORTED, "NVML_ERROR_NOT_SUPPORTED", "not supported on this GPU"},
    {NVML_ERROR_NO_PERMISSION, "NVML_ERROR_NO_PERMISSION", "permission denied (run as root or check /dev/nvidia* permissions)"},
    {NVML_ERROR_ALREADY_INITIALIZED, "NVML_ERROR_ALREADY_INITIALIZED", "NVML already initialised"},
    {NVML_ERROR_NOT_FOUND, "NVML_ERROR_NOT_FOUND", "not found"},
    {NVML_ERROR_INSUFFICIENT_SIZE, "NVML_ERROR_INSUFFICIENT_SIZE", "buffer too small"},
    {NVML_ERROR_INSUFFICIENT_POWER, "NVML_ERROR_INSUFFICIENT_POWER", "insufficient power: a power cable is not connected properly"},
    {NVML_ERROR_DRIVER_NOT_LOADED, "NVML_ERROR_DRIVER_NOT_LOADED", "the NVIDIA kernel driver is not loaded"},
    {NVML_ERROR_TIMEOUT, "NVML_ERROR_TIMEOUT", "the driver timed out"},
    {NVML_ERROR_IRQ_ISSUE, "NVML_ERROR_IRQ_ISSUE", "the kernel detected an interrupt problem with the GPU"},
    {NVML_ERROR_LIBRARY_NOT_FOUND, "NVML_ERROR_LIBRARY_NOT_FOUND", "a library NVML needs was not found"},
    {NVML_ERROR_FUNCTION_NOT_FOUND, "NVML_ERROR_FUNCTION_NOT_FOUND", "this NVML library does not implement the function"},
    {NVML_ERROR_CORRUPTED_INFOROM, "NVML_ERROR_CORRUPTED_INFOROM", "the GPU's infoROM is corrupted"},
    {NVML_ERROR_GPU_IS_LOST, "NVML_ERROR_GPU_IS_LOST", "the GPU has fallen off the bus or is otherwise inaccessible"},
    {NVML_ERROR_RESET_REQUIRED, "NVML_ERROR_RESET_REQUIRED", "the GPU needs a reset before it can be used again"},
    {NVML_ERROR_OPERATING_SYSTEM, "NVML_ERROR_OPERATING_SYSTEM", "the operating system blocked the call"},
    {NVML_ERROR_LIB_RM_VERSION_MISMATCH, "NVML_ERROR_LIB_RM_VERSION_MISMATCH", "driver/library version mismatch: the NVML library and the loaded kernel module differ"},
    {NVML_ERROR_IN_USE, "NVML_ERROR_IN_USE", "the GPU is in use"},
    {NVML_ERROR_MEMORY, "NVML_ERROR_MEMORY", "out of memory"},
    {NVML_ERROR_NO_DATA, "NVML_ERROR_NO_DATA", "no data"},
    {NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED", "ECC is not supported with vGPU"},
    {NVML_ERROR_INSUFFICIENT_RESOURCES, "NVML_ERROR_INSUFFICIENT_RESOURCES", "insufficient resources"},
    {NVML_ERROR_FREQ_NOT_SUPPORTED, "NVML_ERROR_FREQ_NOT_SUPPORTED", "frequency not supported"},
    {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", "structure version mismatch"},
    {NVML_ERROR_DEPRECATED, "NVML_ERROR_DEPRECATED", "deprecated function"},
    {NVML_ERROR_NOT_READY, "NVML_ERROR_NOT_READY", "the system is not ready"},
    {NVML_ERROR_GPU_NOT_FOUND, "NVML_ERROR_GPU_NOT_FOUND", "no GPU found"},
    {NVML_ERROR_INVALID_STATE, "NVML_ERROR_INVALID_STATE", "the GPU is in an invalid state"},
    {NVML_ERROR_UNKNOWN, "NVML_ERROR_UNKNOWN", "unknown error"},
}};

const NvmlCode* FindCode(nvmlReturn_t code) {
  for (const auto& entry : kNvmlCodes)
    if (entry.code == code) return &entry;
  return nullptr;
}

}  // namespace

const char* NvmlErrorName(nvmlReturn_t code) {
  const NvmlCode* entry = FindCode(code);
  return entry ? entry->name : "NVML_ERROR_UNRECOGNISED";
}

std::string NvmlErrorMessage(nvmlReturn_t code) {
  if (const NvmlCode* entry = FindCode(code)) return std::string(entry->message) + " (" + entry->name + ")";
  return "unrecognised NVML error code " + std::to_string(code);
}

AccessError AccessErrorForNvml(nvmlReturn_t code) {
  switch (code) {
    case NVML_SUCCESS: return AccessError::kNone;
    case NVML_ERROR_DRIVER_NOT_LOADED: return AccessError::kDriverNotLoaded;
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return AccessError::kVersionMismatch;
    case NVML_ERROR_NO_PERMISSION: return AccessError::kNoPermission;
    case NVML_ERROR_GPU_IS_LOST: return AccessError::kGpuLost;
    case NVML_ERROR_RESET_REQUIRED: return AccessError::kResetRequired;
    case NVML_ERROR_LIBRARY_NOT_FOUND: return AccessError::kLibraryNotFound;
    case NVML_ERROR_UNKNOWN: return AccessError::kUnknown;
    default: return AccessError::kOther;
  }
}

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Load(const std::string& path) {
  std::string target = path.empty() ? kDefaultNvmlLibrary : path;
  // RTLD_LOCAL keeps NVML's symbols out of the global namespace; RTLD_NOW
  // surfaces a broken library here rather than at the first call.
  void* handle = dlopen(target.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    // "No such file" is the common case and needs no detail; anything else
    // (wrong architecture, missing dependency) is worth showing.
    const char* reason = dlerror();
    const std::string why = reason ? reason : "";
    if (why.empty() || why.find("No such file or directory") != std::string::npos)
      return Error{"NVIDIA driver not found (" + target + ")"};
    return Error{"NVIDIA driver not found (" + target + "): " + why};
  }
  std::unique_ptr<NvmlLibrary> library(new NvmlLibrary());
  library->handle_ = handle;
  library->path_ = target;
#define GPUDOCTOR_RESOLVE(name, ret, params) \
  library->name = reinterpret_cast<ret(*) params>(dlsym(handle, #name));
  GPUDOCTOR_NVML_FUNCTIONS(GPUDOCTOR_RESOLVE)
#undef GPUDOCTOR_RESOLVE
  if (!library->nvmlInit_v2 && !library->nvmlInit)
    return Error{target + " is not an NVML library: it exports neither nvmlInit_v2 nor nvmlInit"};
  return library;
}

NvmlLibrary::~NvmlLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

nvmlReturn_t NvmlLibrary::Init() const {
  if (nvmlInit_v2) return nvmlInit_v2();
  if (nvmlInit) return nvmlInit();
  return NVML_ERROR_FUNCTION_NOT_FOUND;
}

nvmlReturn_t NvmlLibrary::DeviceCount(unsigned int* count) const {
  if (nvmlDeviceGetCount_v2) return nvmlDeviceGetCount_v2(count);
  if (nvmlDeviceGetCount) return nvmlDeviceGetCount(count);
  return NVML_ERROR_FUNCTION_NOT_FOUND;
}

nvmlReturn_t NvmlLibrary::HandleByIndex(unsigned int index, nvmlDevice_t* device) const {
  if (nvmlDeviceGetHandleByIndex_v2) return nvmlDeviceGetHandleByIndex_v2(index, device);
  if (nvmlDeviceGetHandleByIndex) return nvmlDeviceGetHandleByIndex(index, device);
  return NVML_ERROR_FUNCTION_NOT_FOUND;
}

nvmlReturn_t NvmlLibrary::CudaDriverVersion(int* version) const {
  if (nvmlSystemGetCudaDriverVersion_v2) return nvmlSystemGetCudaDriverVersion_v2(version);
  if (nvmlSystemGetCudaDriverVersion) return nvmlSystemGetCudaDriverVersion(version);
  return NVML_ERROR_FUNCTION_NOT_FOUND;
}

nvmlReturn_t NvmlLibrary::PciBusId(nvmlDevice_t device, std::string* bus_id) const {
  auto finish = [bus_id](const char* text, size_t capacity) {
    const std::string_view raw(text, strnlen(text, capacity));
    if (auto normalized = NormalizePciBusId(raw)) {
      *bus_id = std::move(*normalized);
    } else {
      bus_id->assign(raw);
    }
  };
  if (nvmlDeviceGetPciInfo_v3 || nvmlDeviceGetPciInfo_v2) {
    nvmlPciInfo_t info{};
    nvmlReturn_t rc = nvmlDeviceGetPciInfo_v3 ? nvmlDeviceGetPciInfo_v3(device, &info)
                                              : nvmlDeviceGetPciInfo_v2(device, &info);
    if (rc == NVML_SUCCESS) finish(info.busId, sizeof info.busId);
    return rc;
  }
  if (nvmlDeviceGetPciInfo) {
    nvmlPciInfoV1_t info{};
    nvmlReturn_t rc = nvmlDeviceGetPciInfo(device, &info);
    if (rc == NVML_SUCCESS) finish(info.busId, sizeof info.busId);
    return rc;
  }
  return NVML_ERROR_FUNCTION_NOT_FOUND;
}

}  // namespace gpudoctor
