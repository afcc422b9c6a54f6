#include "model/snapshot.h"

#include "model/gpu_fields.h"

#include <array>
#include <utility>

namespace gpudoctor {
namespace {

constexpr std::array<std::pair<AccessError, const char*>, 10> kAccessErrorNames{{
    {AccessError::kNone, "none"},
    {AccessError::kLibraryNotFound, "library_not_found"},
    {AccessError::kDriverNotLoaded, "driver_not_loaded"},
    {AccessError::kVersionMismatch, "version_mismatch"},
    {AccessError::kNoPermission, "no_permission"},
    {AccessError::kGpuLost, "gpu_lost"},
    {AccessError::kResetRequired, "reset_required"},
    {AccessError::kHang, "hang"},
    {AccessError::kUnknown, "unknown_error"},
    {AccessError::kOther, "other"},
}};

constexpr std::array<std::pair<uint64_t, const char*>, 9> kClockEventNames{{
    {clock_event::kGpuIdle, "gpu_idle"},
    {clock_event::kApplicationsClocksSetting, "applications_clocks_setting"},
    {clock_event::kSwPowerCap, "sw_power_cap"},
    {clock_event::kHwSlowdown, "hw_slowdown"},
    {clock_event::kSyncBoost, "sync_boost"},
    {clock_event::kSwThermalSlowdown, "sw_thermal_slowdown"},
    {clock_event::kHwThermalSlowdown, "hw_thermal_slowdown"},
    {clock_event::kHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
    {clock_event::kDisplayClockSetting, "display_clock_setting"},
}};

}  // namespace

const char* AccessErrorName(AccessError error) {
  for (const auto& [value, name] : kAccessErrorNames)
    if (value == error) return name;
  return "other";
}

std::optional<AccessError> AccessErrorFromName(std::string_view name) {
  for (const auto& [value, text] : kAccessErrorNames)
    if (name == text) return value;
  return std::nullopt;
}

std::vector<std::string> DecodeClockEventReasons(uint64_t mask) {
  std::vector<std::string> names;
  for (const auto& [bit, name] : kClockEventNames)
    if (mask & bit) names.emplace_back(name);
  uint64_t known = 0;
  for (const auto& entry : kClockEventNames) known |= entry.first;
  if (mask & ~known) names.emplace_back("other");
  return names;
}

void GpuSnapshot::MarkUnreadable(AccessError error, const std::string& message) {
  access_error = error;
  access_message = message;
  auto fail = [&message](const char*, auto& field) {
    field = std::remove_reference_t<decltype(field)>::Failed(message);
  };
  VisitScalarGpuFields(fail, *this);
  processes = Field<std::vector<ProcessInfo>>::Failed(message);
  nvlinks = Field<std::vector<NvLinkInfo>>::Failed(message);
}

const GpuSnapshot* Snapshot::FindGpu(uint32_t index) const {
  for (const auto& gpu : gpus)
    if (gpu.index == index) return &gpu;
  return nullptr;
}

std::string FormatCudaVersion(int32_t version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace gpudoctor
