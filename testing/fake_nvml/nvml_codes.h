// NVML return codes by name, for scenario files and nvmlErrorString.
//
// Scenario files name error codes the way people read them:
//
//   NvmlCodeFromName("gpu_is_lost")                 -> NVML_ERROR_GPU_IS_LOST
//   NvmlCodeFromName("NVML_ERROR_GPU_IS_LOST")      -> NVML_ERROR_GPU_IS_LOST
//   NvmlCodeDescription(NVML_ERROR_GPU_IS_LOST)     -> "GPU is lost"
#pragma once

#include <optional>
#include <string_view>

#include "nvml/nvml_api.h"

namespace gpudoctor::fake_nvml {

// Accepts the constant name (NVML_SUCCESS, NVML_ERROR_TIMEOUT) or its short
// lower-case form ("success", "timeout").
std::optional<nvmlReturn_t> NvmlCodeFromName(std::string_view name);

// The short lower-case name, "unknown" for codes outside the table.
std::string_view NvmlCodeName(nvmlReturn_t code);

// A one-line human description, as nvmlErrorString returns it.
const char* NvmlCodeDescription(nvmlReturn_t code);

}  // namespace gpudoctor::fake_nvml
