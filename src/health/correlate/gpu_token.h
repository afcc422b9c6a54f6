// Internal to src/health/correlate: one name per GPU, for counting GPUs and
// grouping what happened to each.
#pragma once

#include <string>

#include "common/text.h"
#include "health/finding.h"

namespace gpudoctor {

// The UUID, else the canonical PCI bus id, else "index:N".
inline std::string GpuToken(const GpuRef& ref) {
  if (!ref.uuid.empty()) return ref.uuid;
  if (auto bus = NormalizePciBusId(ref.pci_bus_id)) return *bus;
  if (ref.index) return "index:" + std::to_string(*ref.index);
  return ref.serial;
}

}  // namespace gpudoctor
