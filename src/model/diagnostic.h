// The outcome of one `gpudoctor diag` test on one GPU, as the history keeps it
// and as `status`, `check` and the dashboard show it ("memtest passed 2 days
// ago"). Written by the diag command; the diagnostics themselves live in
// src/diag.
#pragma once

#include <cstdint>
#include <string>

#include "common/clock.h"

namespace gpudoctor {

struct DiagnosticRecord {
  WallTime finished_at;
  uint32_t gpu_index = 0;
  std::string uuid;        // empty when NVML did not report one
  std::string pci_bus_id;
  std::string test;        // "memtest", "burn", "pcie"
  std::string state;       // "passed", "faulty", "hung", "could_not_run", "interrupted"
  std::string summary;     // one line: what was tested and what was found
  std::string command;     // the command that runs the same test again
  bool operator==(const DiagnosticRecord&) const = default;
};

}  // namespace gpudoctor
