#include "health/finding.h"

#include "common/text.h"

namespace gpudoctor {

const char* SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kOk: return "ok";
    case Severity::kWarning: return "warning";
    case Severity::kCritical: return "critical";
    case Severity::kUnknown: return "unknown";
  }
  return "unknown";
}

std::optional<Severity> SeverityFromName(std::string_view name) {
  if (name == "ok") return Severity::kOk;
  if (name == "warning") return Severity::kWarning;
  if (name == "critical") return Severity::kCritical;
  if (name == "unknown") return Severity::kUnknown;
  return std::nullopt;
}

int SeverityRank(Severity severity) {
  switch (severity) {
    case Severity::kOk: return 0;
    case Severity::kUnknown: return 1;
    case Severity::kWarning: return 2;
    case Severity::kCritical: return 3;
  }
  return 1;
}

int ExitStatusFor(Severity worst) { return static_cast<int>(worst); }

bool SameGpu(const GpuRef& a, const GpuRef& b) {
  if (!a.uuid.empty() && !b.uuid.empty()) return a.uuid == b.uuid;
  auto bus_a = NormalizePciBusId(a.pci_bus_id), bus_b = NormalizePciBusId(b.pci_bus_id);
  if (bus_a && bus_b) return *bus_a == *bus_b;
  return a.index && b.index && *a.index == *b.index;
}

std::string GpuName(const GpuRef& gpu) {
  if (gpu.index) return "GPU " + std::to_string(*gpu.index);
  return gpu.pci_bus_id.empty() ? std::string("a GPU") : "GPU at " + gpu.pci_bus_id;
}

std::vector<std::string> FillGpuPlaceholder(const std::vector<std::string>& actions,
                                            const std::vector<uint32_t>& gpu_indexes) {
  std::string indexes;
  for (uint32_t index : gpu_indexes) indexes += (indexes.empty() ? "" : ",") + std::to_string(index);
  std::vector<std::string> filled;
  for (const std::string& action : actions)
    filled.push_back(indexes.empty() ? ReplaceAll(ReplaceAll(action, " --gpu {gpu}", ""), "{gpu}", "<index>")
                                     : ReplaceAll(action, "{gpu}", indexes));
  return filled;
}

std::vector<std::string> FillGpuPlaceholder(const std::vector<std::string>& actions, const std::optional<GpuRef>& gpu) {
  std::vector<uint32_t> indexes;
  if (gpu && gpu->index) indexes.push_back(*gpu->index);
  return FillGpuPlaceholder(actions, indexes);
}

std::string FindingKey(const Finding& finding) {
  std::string key = finding.id;
  if (finding.gpu) {
    const GpuRef& gpu = *finding.gpu;
    if (!gpu.uuid.empty()) key += "@" + gpu.uuid;
    else if (!gpu.pci_bus_id.empty()) key += "@" + gpu.pci_bus_id;
    else if (gpu.index) key += "@gpu" + std::to_string(*gpu.index);
    else if (!gpu.serial.empty()) key += "@" + gpu.serial;
  }
  if (!finding.subject.empty()) key += "/" + finding.subject;
  return key;
}

Severity WorstSeverity(const std::vector<Finding>& findings) {
  Severity worst = Severity::kOk;
  for (const Finding& finding : findings)
    if (SeverityRank(finding.severity) > SeverityRank(worst)) worst = finding.severity;
  return worst;
}

}  // namespace gpudoctor
