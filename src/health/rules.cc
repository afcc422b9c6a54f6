#include "health/rules.h"

#include <set>
#include <string>

#include "health/rule_context.h"
#include "health/rule_ids.h"

namespace gpudoctor {
namespace {

using rules_internal::RuleContext;

struct RuleEntry {
  std::string_view id;
  void (*evaluate)(RuleContext&);
};

// One function per rule id, in the order of kRuleIds.
constexpr RuleEntry kRules[] = {
    {"nvml_hang", rules_internal::NvmlHang},
    {"driver_hang", rules_internal::DriverHang},
    {"driver_unavailable", rules_internal::DriverUnavailable},
    {"driver_mismatch", rules_internal::DriverMismatch},
    {"nouveau_loaded", rules_internal::NouveauLoaded},
    {"cuda_incompatible", rules_internal::CudaIncompatible},
    {"no_devices", rules_internal::NoDevices},
    {"gpu_count_mismatch", rules_internal::GpuCountMismatch},
    {"gpu_missing", rules_internal::GpuMissing},
    {"gpu_lost", rules_internal::GpuLost},
    {"gpu_unreachable", rules_internal::GpuUnreachable},
    {"field_error", rules_internal::FieldErrors},
    {"capture_incomplete", rules_internal::CaptureIncomplete},
    {"temperature_high", rules_internal::TemperatureHigh},
    {"fan_failure", rules_internal::FanFailure},
    {"clock_throttle", rules_internal::ClockThrottle},
    {"power_capped", rules_internal::PowerCapped},
    {"psu_fault", rules_internal::PsuFault},
    {"sensor_alarm", rules_internal::SensorAlarm},
    {"inlet_temperature", rules_internal::InletTemperature},
    {"ecc_uncorrectable", rules_internal::EccUncorrectable},
    {"ecc_corrected_high", rules_internal::EccCorrectedHigh},
    {"retired_pages", rules_internal::RetiredPages},
    {"remapped_rows_pending", rules_internal::RemappedRowsPending},
    {"row_remap_failure", rules_internal::RowRemapFailure},
    {"inforom_corrupted", rules_internal::InforomCorrupted},
    {"memory_high", rules_internal::MemoryHigh},
    {"pcie_link_degraded", rules_internal::PcieLinkDegraded},
    {"pcie_replay", rules_internal::PcieReplay},
    {"nvlink_down", rules_internal::NvlinkDown},
    {"nvlink_fabric", rules_internal::NvlinkFabric},
    {"nvlink_errors", rules_internal::NvlinkErrors},
    {"xid_recent", rules_internal::XidRecent},
    {"log_errors", rules_internal::LogErrors},
    {"disk_space", rules_internal::DiskSpace},
    {"process_missing", rules_internal::ProcessMissing},
    {"backup_stale", rules_internal::BackupStale},
    {"host_hung_tasks", rules_internal::HostHungTasks},
    {"host_memory", rules_internal::HostMemory},
    {"host_pressure", rules_internal::HostPressure},
    {"maintenance_due", rules_internal::MaintenanceDue},
    {"agent_history", rules_internal::AgentHistory},
    {"diagnostic_failed", rules_internal::DiagnosticFailed},
};

constexpr bool RulesFollowRuleIds() {
  if (std::size(kRules) != std::size(kRuleIds)) return false;
  for (size_t i = 0; i < std::size(kRules); ++i)
    if (kRules[i].id != kRuleIds[i]) return false;
  return true;
}
static_assert(RulesFollowRuleIds(), "kRules must list one function per rule id, in the order of kRuleIds");

}  // namespace

std::vector<Finding> EvaluateRules(const HealthInput& input, const HealthConfig& config) {
  std::vector<UncheckedRule> unchecked;
  return EvaluateRules(input, config, unchecked);
}

std::vector<Finding> EvaluateRules(const HealthInput& input, const HealthConfig& config,
                                   std::vector<UncheckedRule>& unchecked) {
  std::vector<Finding> findings;
  RuleContext context(input, config, findings, unchecked);
  for (const RuleEntry& rule : kRules) {
    if (config.Enabled(rule.id)) rule.evaluate(context);
  }
  const size_t judged = findings.size();
  rules_internal::ReportedConditions(context);
  // A rule that found its own inputs in order says nothing against a fault the capture's tool reported.
  std::set<std::string> reported;
  for (size_t i = judged; i < findings.size(); ++i) reported.insert(findings[i].id);
  std::erase_if(findings, [&](const Finding& f) { return f.severity == Severity::kOk && reported.contains(f.id); });
  return findings;
}

Severity SeverityForEvent(EventSeverity severity) {
  switch (severity) {
    case EventSeverity::kInfo: return Severity::kOk;
    case EventSeverity::kWarning: return Severity::kWarning;
    case EventSeverity::kCritical: return Severity::kCritical;
  }
  return Severity::kWarning;
}

}  // namespace gpudoctor
