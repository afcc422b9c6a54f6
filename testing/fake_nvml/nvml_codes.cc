#include "nvml_codes.h"

#include <array>

#include "common/text.h"

namespace gpudoctor::fake_nvml {
namespace {

struct CodeInfo {
  nvmlReturn_t code;
  std::string_view name;  // NVML_ERROR_<NAME> in lower case
  const char* description;
};

constexpr std::array<CodeInfo, 31> kCodes{{
    {NVML_SUCCESS, "success", "Success"},
    {NVML_ERROR_UNINITIALIZED, "uninitialized", "NVML was not initialized"},
    {NVML_ERROR_INVALID_ARGUMENT, "invalid_argument", "Invalid argument"},
    {NVML_ERROR_NOT_SUPPORTED, "not_supported", "Not supported on this device"},
    {NVML_ERROR_NO_PERMISSION, "no_permission", "Insufficient permissions"},
    {NVML_ERROR_ALREADY_INITIALIZED, "already_initialized", "Already initialized"},
    {NVML_ERROR_NOT_FOUND, "not_found", "Not found"},
    {NVML_ERROR_INSUFFICIENT_SIZE, "insufficient_size", "Buffer too small"},
    {NVML_ERROR_INSUFFICIENT_POWER, "insufficient_power", "Insufficient external power"},
    {NVML_ERROR_DRIVER_NOT_LOADED, "driver_not_loaded", "NVIDIA driver is not loaded"},
    {NVML_ERROR_TIMEOUT, "timeout", "Timed out"},
    {NVML_ERROR_IRQ_ISSUE, "irq_issue", "Interrupt request issue"},
    {NVML_ERROR_LIBRARY_NOT_FOUND, "library_not_found", "NVML shared library not found"},
    {NVML_ERROR_FUNCTION_NOT_FOUND, "function_not_found", "Function not found"},
    {NVML_ERROR_CORRUPTED_INFOROM, "corrupted_inforom", "InfoROM is corrupted"},
    {NVML_ERROR_GPU_IS_LOST, "gpu_is_lost", "GPU is lost"},
    {NVML_ERROR_RESET_REQUIRED, "reset_required", "GPU requires a reset"},
    {NVML_ERROR_OPERATING_SYSTEM, "operating_system", "The operating system blocked the request"},
    {NVML_ERROR_LIB_RM_VERSION_MISMATCH, "lib_rm_version_mismatch", "Driver/library version mismatch"},
    {NVML_ERROR_IN_USE, "in_use", "In use by another client"},
    {NVML_ERROR_MEMORY, "memory", "Insufficient memory"},
    {NVML_ERROR_NO_DATA, "no_data", "No data"},
    {NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, "vgpu_ecc_not_supported", "ECC is not supported on this vGPU"},
    {NVML_ERROR_INSUFFICIENT_RESOURCES, "insufficient_resources", "Insufficient resources"},
    {NVML_ERROR_FREQ_NOT_SUPPORTED, "freq_not_supported", "Frequency not supported"},
    {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "argument_version_mismatch", "Structure version mismatch"},
    {NVML_ERROR_DEPRECATED, "deprecated", "Deprecated"},
    {NVML_ERROR_NOT_READY, "not_ready", "Not ready"},
    {NVML_ERROR_GPU_NOT_FOUND, "gpu_not_found", "GPU not found"},
    {NVML_ERROR_INVALID_STATE, "invalid_state", "Invalid state"},
    {NVML_ERROR_UNKNOWN, "unknown", "Unknown error"},
}};

constexpr std::string_view kConstantPrefix = "nvml_error_";

}  // namespace

std::optional<nvmlReturn_t> NvmlCodeFromName(std::string_view name) {
  std::string lower = ToLower(Trim(name));
  std::string_view key = lower;
  if (key == "nvml_success")
    key = "success";
  else if (StartsWith(key, kConstantPrefix))
    key.remove_prefix(kConstantPrefix.size());
  for (const CodeInfo& info : kCodes)
    if (info.name == key) return info.code;
  return std::nullopt;
}

std::string_view NvmlCodeName(nvmlReturn_t code) {
  for (const CodeInfo& info : kCodes)
    if (info.code == code) return info.name;
  return "unknown";
}

const char* NvmlCodeDescription(nvmlReturn_t code) {
  for (const CodeInfo& info : kCodes)
    if (info.code == code) return info.description;
  return "Unknown error code";
}

}  // namespace gpudoctor::fake_nvml
