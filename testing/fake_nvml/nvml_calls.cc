#include "nvml_calls.h"

#include <array>
#include <string>

namespace gpudoctor::fake_nvml {
namespace {

#define GPUDOCTOR_FAKE_NVML_NAME(name, ret, params) std::string_view{#name},
constexpr std::array<std::string_view, kNvmlCallCount> kCallNames{GPUDOCTOR_NVML_FUNCTIONS(GPUDOCTOR_FAKE_NVML_NAME)};
#undef GPUDOCTOR_FAKE_NVML_NAME

// Calls whose first parameter is an nvmlDevice_t, found from the parameter
// lists so the classification cannot drift from the list of entry points.
#define GPUDOCTOR_FAKE_NVML_TAKES_DEVICE(name, ret, params) std::string_view{#params}.starts_with("(nvmlDevice_t "),
constexpr std::array<bool, kNvmlCallCount> kTakesDevice{GPUDOCTOR_NVML_FUNCTIONS(GPUDOCTOR_FAKE_NVML_TAKES_DEVICE)};
#undef GPUDOCTOR_FAKE_NVML_TAKES_DEVICE

bool HasVersionSuffix(std::string_view name) {
  size_t underscore = name.rfind("_v");
  return underscore != std::string_view::npos && underscore + 2 < name.size() &&
         name.find_first_not_of("0123456789", underscore + 2) == std::string_view::npos;
}

// "nvmlInit_v2" -> "nvmlInit"; names without a suffix are returned as is.
std::string_view BaseName(std::string_view name) {
  return HasVersionSuffix(name) ? name.substr(0, name.rfind("_v")) : name;
}

}  // namespace

std::string_view CallName(NvmlCall call) { return kCallNames[Index(call)]; }

bool IsDeviceCall(NvmlCall call) {
  return kTakesDevice[Index(call)] || call == NvmlCall::nvmlDeviceGetHandleByIndex ||
         call == NvmlCall::nvmlDeviceGetHandleByIndex_v2;
}

std::optional<CallSet> MatchCalls(std::string_view pattern) {
  CallSet calls;
  if (pattern == "*") return calls.set();
  bool match_versions = !HasVersionSuffix(pattern);
  for (size_t i = 0; i < kNvmlCallCount; ++i) {
    std::string_view name = kCallNames[i];
    if (name == pattern || (match_versions && BaseName(name) == pattern)) calls.set(i);
  }
  if (calls.none()) return std::nullopt;
  return calls;
}

}  // namespace gpudoctor::fake_nvml
