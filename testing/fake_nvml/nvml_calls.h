// The NVML entry points the fake library exports, as an enum, and the way
// scenario files name them in hang and error faults.
//
//   CallSet calls = *MatchCalls("nvmlDeviceGetCount");  // both _v2 and plain
//   if (calls.test(Index(NvmlCall::nvmlDeviceGetCount_v2))) ...
#pragma once

#include <bitset>
#include <cstddef>
#include <optional>
#include <string_view>

#include "nvml/nvml_api.h"

namespace gpudoctor::fake_nvml {

#define GPUDOCTOR_FAKE_NVML_ENUM(name, ret, params) name,
enum class NvmlCall : unsigned char { GPUDOCTOR_NVML_FUNCTIONS(GPUDOCTOR_FAKE_NVML_ENUM) };
#undef GPUDOCTOR_FAKE_NVML_ENUM

#define GPUDOCTOR_FAKE_NVML_COUNT(name, ret, params) +1
inline constexpr size_t kNvmlCallCount = 0 GPUDOCTOR_NVML_FUNCTIONS(GPUDOCTOR_FAKE_NVML_COUNT);
#undef GPUDOCTOR_FAKE_NVML_COUNT

using CallSet = std::bitset<kNvmlCallCount>;

constexpr size_t Index(NvmlCall call) { return static_cast<size_t>(call); }
std::string_view CallName(NvmlCall call);

// True for calls that act on one GPU: those taking an nvmlDevice_t, and
// nvmlDeviceGetHandleByIndex(_v2), which names the GPU by index.
bool IsDeviceCall(NvmlCall call);

// "*" matches every call. A name matches the entry point of that name and,
// when it has no version suffix, its versioned variants ("nvmlInit" matches
// nvmlInit and nvmlInit_v2; "nvmlInit_v2" matches only nvmlInit_v2).
// nullopt when nothing matches, which in a scenario file is a typo.
std::optional<CallSet> MatchCalls(std::string_view pattern);

}  // namespace gpudoctor::fake_nvml
