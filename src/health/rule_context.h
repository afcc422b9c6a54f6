// Internal to gd_health: what every rule function gets, and the helpers the
// rule files share. Not part of the public API.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/text.h"
#include "health/rules.h"

namespace gpudoctor::rules_internal {

class RuleContext {
 public:
  RuleContext(const HealthInput& input, const HealthConfig& config, std::vector<Finding>& findings,
              std::vector<UncheckedRule>& unchecked);

  const HealthInput& input;
  const HealthConfig& config;
  const RuleThresholds& thresholds;

  // Adds a finding with the rule's remedy (or that of its case). Unknown
  // findings - a reading the rule needs failed - get field_error's remedy.
  Finding& Report(std::string_view rule_id, Severity severity, std::optional<GpuRef> gpu, std::string summary,
                  std::vector<std::string> evidence, std::string_view case_name = {});
  // Adds an unknown finding with the rule's own remedy (or that of its case), for a rule whose
  // verdict is that its input cannot be judged whole (not a failed reading).
  Finding& ReportUnknown(std::string_view rule_id, std::string summary, std::vector<std::string> evidence,
                         std::string_view case_name = {});
  // Adds the rule's ok result: what it checked and found in order.
  void Pass(std::string_view rule_id, std::string summary, std::vector<std::string> evidence = {});
  // Says why the rule, having reported nothing, had nothing to judge.
  void Unchecked(std::string_view rule_id, std::string reason);

  // NVML started: the snapshot can be trusted to list the GPUs.
  bool DriverUp() const;
  // Where the snapshot came from ("nvml", "simulate:<file>", "nvidia-smi:<file>").
  bool SnapshotSimulated() const;
  bool SnapshotCaptured() const;
  // The host signals, when they describe the snapshot's own machine, for the
  // rules that hold its PCI bus and driver module against the GPUs; nullptr
  // without host signals or when the GPUs are simulated (this machine's bus
  // is not the simulated server's).
  const HostSignals* GpuHost() const;
  // GPUs of the snapshot that could be read (no access error).
  const std::vector<const GpuSnapshot*>& ReadableGpus() const { return readable_; }
  // The GPU of the previous snapshot that is the same device as `gpu`.
  const GpuSnapshot* PreviousOf(const GpuSnapshot& gpu) const;
  // The snapshot's GPU at `pci_bus_id` (any form), or nullptr.
  const GpuSnapshot* GpuAtPci(std::string_view pci_bus_id) const;
  // Whether `time` (nullopt: unknown, always inside) is within `window` before now.
  bool WithinWindow(const std::optional<WallTime>& time, Duration window) const;

 private:
  Finding& Add(std::string_view rule_id, Severity severity, std::optional<GpuRef> gpu, std::string summary,
               std::vector<std::string> evidence, const Remedy& remedy);

  std::vector<Finding>& findings_;
  std::vector<UncheckedRule>& unchecked_;
  std::vector<const GpuSnapshot*> readable_;
};

GpuRef RefFor(const GpuSnapshot& gpu);
// A reference to a device known only by its PCI bus id (or, failing that, by index).
GpuRef RefForPci(std::string_view pci_bus_id);
// "GPU 3"
std::string GpuLabel(const GpuSnapshot& gpu);
// Durations as people say them, without zero parts: "500ms", "45s", "2m", "24h", "25h 30m", "3d".
std::string FormatSpan(Duration duration);
// "83.5" -> "83.5", "80.0" -> "80": numbers as people write them.
std::string FormatNumber(double value);
// "GPU 0 and GPU 3", "GPU 0, GPU 1 and GPU 2"
std::string JoinWithAnd(const std::vector<std::string>& items);
std::string Plural(size_t count, std::string_view singular, std::string_view plural);
// "All 8 GPUs", or "1 GPU" when there is only one.
std::string AllOf(size_t count, std::string_view singular, std::string_view plural);

// A failed reading of a GPU, named as in the snapshot's JSON form.
struct FailedField {
  std::string name;
  std::string error;
};
std::vector<FailedField> FailedFields(const GpuSnapshot& gpu);

// One rule per function; each reports only its own id.
void NvmlHang(RuleContext& context);
void DriverHang(RuleContext& context);
void DriverUnavailable(RuleContext& context);
void DriverMismatch(RuleContext& context);
void NouveauLoaded(RuleContext& context);
void CudaIncompatible(RuleContext& context);
void NoDevices(RuleContext& context);
void GpuCountMismatch(RuleContext& context);
void GpuMissing(RuleContext& context);
void GpuLost(RuleContext& context);
void GpuUnreachable(RuleContext& context);
void FieldErrors(RuleContext& context);
void CaptureIncomplete(RuleContext& context);

void TemperatureHigh(RuleContext& context);
void FanFailure(RuleContext& context);
void ClockThrottle(RuleContext& context);
void PowerCapped(RuleContext& context);
void PsuFault(RuleContext& context);
void SensorAlarm(RuleContext& context);
void InletTemperature(RuleContext& context);

void EccUncorrectable(RuleContext& context);
void EccCorrectedHigh(RuleContext& context);
void RetiredPages(RuleContext& context);
void RemappedRowsPending(RuleContext& context);
void RowRemapFailure(RuleContext& context);
void InforomCorrupted(RuleContext& context);
void MemoryHigh(RuleContext& context);

void PcieLinkDegraded(RuleContext& context);
void PcieReplay(RuleContext& context);
void NvlinkDown(RuleContext& context);
void NvlinkFabric(RuleContext& context);
void MaintenanceDue(RuleContext& context);
void AgentHistory(RuleContext& context);
void DiagnosticFailed(RuleContext& context);
// Not a rule of its own: the conditions a captured tool reported (HealthInput::reported_conditions and the
// snapshot's), each as a finding of the rule that judges the same thing live.
void ReportedConditions(RuleContext& context);
void NvlinkErrors(RuleContext& context);

void XidRecent(RuleContext& context);
void LogErrors(RuleContext& context);

void DiskSpace(RuleContext& context);
void ProcessMissing(RuleContext& context);
void BackupStale(RuleContext& context);
void HostHungTasks(RuleContext& context);
void HostMemory(RuleContext& context);
void HostPressure(RuleContext& context);

}  // namespace gpudoctor::rules_internal
