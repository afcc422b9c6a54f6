// The finding ids: a stable interface that people script against
// (docs/findings.md). kRuleIds are the rules `check` runs, in the order it
// reports them; kTrendDetectorIds are the agent's detectors over history.
#pragma once

#include <algorithm>
#include <string_view>

namespace gpudoctor {

inline constexpr std::string_view kRuleIds[] = {
    // Driver and NVML.
    "nvml_hang",
    "driver_hang",
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
    "capture_incomplete",
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
    "inforom_corrupted",
    "memory_high",
    // PCIe and NVLink.
    "pcie_link_degraded",
    "pcie_replay",
    "nvlink_down",
    "nvlink_fabric",
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
    // Upkeep.
    "maintenance_due",
    // The agent's history, as check and triage read it.
    "agent_history",
    // The tests of `gpudoctor diag`, as the agent's history keeps them.
    "diagnostic_failed",
};

inline bool IsRuleId(std::string_view id) {
  return std::find(std::begin(kRuleIds), std::end(kRuleIds), id) != std::end(kRuleIds);
}

// The ids of the agent's trend detectors (src/health/detectors), just as
// stable. They judge a window of history, so only the agent reports them:
// they are not rules of `check`, have no [rules.<id>] table (their thresholds
// live in [detectors], docs/detectors.md) and never share an id with a rule.
inline constexpr std::string_view kTrendDetectorIds[] = {
    "utilization_stuck",
    "utilization_flapping",
    "tensor_cores_idle",
    "gpu_straggler",
    "memory_leak",
    "ecc_rate",
    "pcie_replay_rate",
    "nvlink_error_rate",
    "cooling_failure",
    "job_stall",
    "job_loss_nan",
    "job_loss_flat",
};

inline bool IsTrendDetectorId(std::string_view id) {
  return std::find(std::begin(kTrendDetectorIds), std::end(kTrendDetectorIds), id) != std::end(kTrendDetectorIds);
}

constexpr bool RuleAndDetectorIdsAreDistinct() {
  for (std::string_view detector : kTrendDetectorIds)
    for (std::string_view rule : kRuleIds)
      if (detector == rule) return false;
  return true;
}
static_assert(RuleAndDetectorIdsAreDistinct(), "a trend detector may not reuse a rule's id");

// The cases a rule words differently ([rules.<id>.<case>] in data/rules.toml).
struct RuleCase {
  std::string_view rule_id;
  std::string_view case_name;
};
inline constexpr RuleCase kRuleCases[] = {
    {"driver_unavailable", "library_not_found"}, {"driver_unavailable", "driver_not_loaded"},
    {"driver_unavailable", "no_permission"},     {"gpu_unreachable", "reset_required"},
    {"gpu_unreachable", "no_permission"},        {"clock_throttle", "power_brake"},
    {"clock_throttle", "heat"},
    {"diagnostic_failed", "memtest"},            {"diagnostic_failed", "burn"},
    {"diagnostic_failed", "pcie"},               {"diagnostic_failed", "software"},
    {"diagnostic_failed", "untested"},
};

inline bool IsRuleCase(std::string_view rule_id, std::string_view case_name) {
  return std::any_of(std::begin(kRuleCases), std::end(kRuleCases),
                     [&](const RuleCase& c) { return c.rule_id == rule_id && c.case_name == case_name; });
}

// Escalations over the agent's history (health/correlate/escalate.h): like
// the trend detectors only the agent raises them, they have no [rules.<id>]
// table (their thresholds are in [escalation]) and never share an id.
inline constexpr std::string_view kEscalationIds[] = {
    "xid_recurring",
    "xid_fatal_repeated",
    "xid_diagnostics_due",
    "remediation_repeated",
};

inline bool IsEscalationId(std::string_view id) {
  return std::find(std::begin(kEscalationIds), std::end(kEscalationIds), id) != std::end(kEscalationIds);
}

// Findings the agent raises about itself. Like the trend detectors they are
// the agent's alone, have no [rules.<id>] table and never share an id.
inline constexpr std::string_view kHistoryStoreFailingId = "history_store_failing";
inline constexpr std::string_view kAgentFindingIds[] = {kHistoryStoreFailingId};

}  // namespace gpudoctor
