#include "cli/status_findings.h"

#include "common/text.h"

namespace gpudoctor {

// Temporary until the rule engine is wired: hangs only.
std::vector<Finding> StatusFindings(const Snapshot& snapshot) {
  std::vector<Finding> findings;
  for (const auto& hang : snapshot.hangs) {
    Finding f;
    f.id = "nvml_hang";
    f.severity = Severity::kCritical;
    if (hang.gpu_index) f.gpu = GpuRef{hang.gpu_index, "", hang.pci_bus_id, ""};
    f.summary = "NVML call " + hang.call + " did not return within " + FormatDuration(hang.deadline);
    findings.push_back(f);
  }
  return findings;
}

}  // namespace gpudoctor
