// The rule ids: a stable interface that people script against
// (docs/findings.md). Listed in the order `check` reports them.
#pragma once

#include <algorithm>
#include <string_view>

namespace gpudoctor {

inline constexpr std::string_view kRuleIds[] = {
    // Driver and NVML.
    "nvml_hang",
    "driver_unavailable",
    "driver_mismatch",
    "nouveau_loaded",
    "cuda_incompatible",
    "no_devices",
    "gpu_count_mismatch",
    "gpu_missing",
    "gpu_lost",
    "gpu_unreachable",
    "field_error",
    // Thermal, fans and power.
    "temperature_high",
    "fan_failure",
    "clock_throttle",
    "power_capped",
    "psu_fault",
    "sensor_alarm",
    "inlet_temperature",
    // GPU memory.
    "ecc_uncorrectable",
    "ecc_corrected_high",
    "retired_pages",
    "remapped_rows_pending",
    "row_remap_failure",
    "memory_high",
    // PCIe and NVLink.
    "pcie_link_degraded",
    "pcie_replay",
    "nvlink_down",
    "nvlink_errors",
    // Logs.
    "xid_recent",
    "log_errors",
    // Host.
    "disk_space",
    "process_missing",
    "backup_stale",
    "host_hung_tasks",
    "host_memory",
    "host_pressure",
};

inline bool IsRuleId(std::string_view id) {
  return std::find(std::begin(kRuleIds), std::end(kRuleIds), id) != std::end(kRuleIds);
}

// The cases a rule words differently ([rules.<id>.<case>] in data/rules.toml).
struct RuleCase {
  std::string_view rule_id;
  std::string_view case_name;
};
inline constexpr RuleCase kRuleCases[] = {
    {"driver_unavailable", "library_not_found"}, {"driver_unavailable", "driver_not_loaded"},
    {"driver_unavailable", "no_permission"},     {"gpu_unreachable", "reset_required"},
    {"gpu_unreachable", "no_permission"},        {"clock_throttle", "power_brake"},
};

inline bool IsRuleCase(std::string_view rule_id, std::string_view case_name) {
  return std::any_of(std::begin(kRuleCases), std::end(kRuleCases),
                     [&](const RuleCase& c) { return c.rule_id == rule_id && c.case_name == case_name; });
}

}  // namespace gpudoctor
