#include "health/rule_context.h"

#include <cmath>

#include "common/text.h"
#include "model/gpu_fields.h"

namespace gpudoctor::rules_internal {

RuleContext::RuleContext(const HealthInput& input_in, const HealthConfig& config_in, std::vector<Finding>& findings,
                         std::vector<UncheckedRule>& unchecked)
    : input(input_in), config(config_in), thresholds(config_in.thresholds), findings_(findings), unchecked_(unchecked) {
  if (input.snapshot != nullptr) {
    for (const GpuSnapshot& gpu : input.snapshot->gpus)
      if (gpu.access_error == AccessError::kNone) readable_.push_back(&gpu);
  }
}

Finding& RuleContext::Report(std::string_view rule_id, Severity severity, std::optional<GpuRef> gpu,
                             std::string summary, std::vector<std::string> evidence, std::string_view case_name) {
  const Remedy& remedy =
      severity == Severity::kUnknown ? config.RemedyFor("field_error") : config.RemedyFor(rule_id, case_name);
  return Add(rule_id, severity, std::move(gpu), std::move(summary), std::move(evidence), remedy);
}

Finding& RuleContext::ReportUnknown(std::string_view rule_id, std::string summary, std::vector<std::string> evidence,
                                    std::string_view case_name) {
  return Add(rule_id, Severity::kUnknown, std::nullopt, std::move(summary), std::move(evidence),
             config.RemedyFor(rule_id, case_name));
}

Finding& RuleContext::Add(std::string_view rule_id, Severity severity, std::optional<GpuRef> gpu, std::string summary,
                          std::vector<std::string> evidence, const Remedy& remedy) {
  Finding finding;
  finding.id = std::string(rule_id);
  finding.severity = severity;
  finding.gpu = std::move(gpu);
  finding.summary = std::move(summary);
  finding.evidence = std::move(evidence);
  finding.cause = remedy.cause;
  finding.actions = FillGpuPlaceholder(remedy.actions, finding.gpu);
  findings_.push_back(std::move(finding));
  return findings_.back();
}

void RuleContext::Pass(std::string_view rule_id, std::string summary, std::vector<std::string> evidence) {
  Finding finding;
  finding.id = std::string(rule_id);
  finding.severity = Severity::kOk;
  finding.summary = std::move(summary);
  finding.evidence = std::move(evidence);
  findings_.push_back(std::move(finding));
}

void RuleContext::Unchecked(std::string_view rule_id, std::string reason) {
  unchecked_.push_back({std::string(rule_id), std::move(reason)});
}

bool RuleContext::DriverUp() const {
  return input.snapshot != nullptr && input.snapshot->driver_error == AccessError::kNone;
}

bool RuleContext::SnapshotSimulated() const {
  return input.snapshot != nullptr && input.snapshot->source.starts_with("simulate:");
}

bool RuleContext::SnapshotCaptured() const {
  return input.snapshot != nullptr && input.snapshot->source.starts_with("nvidia-smi:");
}

const HostSignals* RuleContext::GpuHost() const { return SnapshotSimulated() ? nullptr : input.host; }

const GpuSnapshot* RuleContext::PreviousOf(const GpuSnapshot& gpu) const {
  if (input.previous == nullptr) return nullptr;
  for (const GpuSnapshot& earlier : input.previous->gpus) {
    if (gpu.uuid.has_value() && earlier.uuid.has_value()) {
      if (gpu.uuid.value() == earlier.uuid.value()) return &earlier;
    } else if (earlier.index == gpu.index) {
      return &earlier;
    }
  }
  return nullptr;
}

const GpuSnapshot* RuleContext::GpuAtPci(std::string_view pci_bus_id) const {
  if (input.snapshot == nullptr || pci_bus_id.empty()) return nullptr;
  std::optional<std::string> wanted = NormalizePciBusId(pci_bus_id);
  if (!wanted) return nullptr;
  for (const GpuSnapshot& gpu : input.snapshot->gpus) {
    // A GPU that no longer answers is at the address it was last seen at.
    const std::string bus = gpu.pci_bus_id.has_value() ? gpu.pci_bus_id.value()
                            : gpu.last_known                ? gpu.last_known->pci_bus_id
                                                            : std::string();
    if (!bus.empty() && NormalizePciBusId(bus) == wanted) return &gpu;
  }
  return nullptr;
}

bool RuleContext::WithinWindow(const std::optional<WallTime>& time, Duration window) const {
  if (!time) return true;
  return *time >= input.now - std::chrono::duration_cast<WallTime::duration>(window);
}

GpuRef RefFor(const GpuSnapshot& gpu) {
  // What cannot be read now is what the GPU was last seen as, when known.
  const KnownGpuIdentity known = gpu.last_known.value_or(KnownGpuIdentity{});
  GpuRef ref;
  ref.index = gpu.index;
  ref.uuid = gpu.uuid.value_or(known.uuid);
  const std::string bus = gpu.pci_bus_id.value_or(known.pci_bus_id);
  if (!bus.empty()) ref.pci_bus_id = NormalizePciBusId(bus).value_or(bus);
  ref.serial = gpu.serial.value_or(known.serial);
  return ref;
}

GpuRef RefForPci(std::string_view pci_bus_id) {
  GpuRef ref;
  ref.pci_bus_id = NormalizePciBusId(pci_bus_id).value_or(std::string(pci_bus_id));
  return ref;
}

std::string GpuLabel(const GpuSnapshot& gpu) { return fmt::format("GPU {}", gpu.index); }

std::string FormatSpan(Duration duration) {
  const int64_t millis = std::chrono::duration_cast<std::chrono::milliseconds>(duration).count();
  if (millis < 1000) return fmt::format("{}ms", std::max<int64_t>(millis, 0));
  const int64_t seconds = millis / 1000;
  auto two_parts = [](int64_t big, std::string_view big_unit, int64_t small, std::string_view small_unit) {
    return small == 0 ? fmt::format("{}{}", big, big_unit) : fmt::format("{}{} {}{}", big, big_unit, small, small_unit);
  };
  if (seconds < 60) return fmt::format("{}s", seconds);
  if (seconds < 3600) return two_parts(seconds / 60, "m", seconds % 60, "s");
  if (seconds < 48 * 3600) return two_parts(seconds / 3600, "h", seconds % 3600 / 60, "m");
  return two_parts(seconds / 86400, "d", seconds % 86400 / 3600, "h");
}

std::string FormatNumber(double value) {
  if (std::fabs(value - std::round(value)) < 0.05) return fmt::format("{:.0f}", value);
  return fmt::format("{:.1f}", value);
}

std::string JoinWithAnd(const std::vector<std::string>& items) {
  std::string text;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) text += i + 1 == items.size() ? " and " : ", ";
    text += items[i];
  }
  return text;
}

std::string Plural(size_t count, std::string_view singular, std::string_view plural) {
  return fmt::format("{} {}", count, count == 1 ? singular : plural);
}

std::string AllOf(size_t count, std::string_view singular, std::string_view plural) {
  return count == 1 ? fmt::format("1 {}", singular) : fmt::format("All {} {}", count, plural);
}

std::vector<FailedField> FailedFields(const GpuSnapshot& gpu) {
  std::vector<FailedField> out;
  std::string prefix;
  auto collect = [&](const char* name, const auto& field) {
    if (field.failed()) out.push_back({prefix + name, field.error()});
  };
  VisitScalarGpuFields(collect, gpu);
  collect("processes", gpu.processes);
  collect("nvlinks", gpu.nvlinks);
  if (gpu.nvlinks.has_value()) {
    for (const NvLinkInfo& link : gpu.nvlinks.value()) {
      prefix = fmt::format("nvlinks[{}].", link.link);
      VisitNvLinkFields(collect, link);
    }
  }
  return out;
}

}  // namespace gpudoctor::rules_internal
