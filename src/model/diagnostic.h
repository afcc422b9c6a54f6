// The outcome of one `gpudoctor diag` test on one GPU, as the history keeps it
// and as `status`, `check` and the dashboard show it ("memtest passed 2 days
// ago"). Written by the diag command; the diagnostics themselves live in
// src/diag. A captured `dcgmi diag` report gives records of the same shape.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/clock.h"

namespace gpudoctor {

// The tool of gpudoctor's own diagnostic records; any other names a captured report's.
inline constexpr std::string_view kGpudoctorDiagTool = "gpudoctor diag";

struct DiagnosticRecord {
  WallTime finished_at;
  uint32_t gpu_index = 0;
  std::string uuid;        // empty when NVML did not report one
  std::string pci_bus_id;
  std::string test;        // "memtest", "burn", "pcie"
  std::string state;       // "passed", "faulty", "hung", "could_not_run", "interrupted"
  std::string summary;     // one line: what was tested and what was found
  std::string command;     // the command that runs the same test again
  // What ran the test: "gpudoctor diag", or another tool whose report was captured ("dcgmi diag"), whose
  // records are never stored.
  std::string tool = std::string(kGpudoctorDiagTool);
  bool operator==(const DiagnosticRecord&) const = default;
};

// Whether the test found the GPU at fault: it failed, or the GPU stopped answering.
inline bool FoundFault(const DiagnosticRecord& record) { return record.state == "faulty" || record.state == "hung"; }

// Whether `record` is of the GPU at `index` with `uuid` (empty: unknown): by
// UUID when both have one, since indexes change when boards move; else by index.
inline bool IsRecordOf(const DiagnosticRecord& record, uint32_t index, std::string_view uuid) {
  if (!record.uuid.empty() && !uuid.empty()) return record.uuid == uuid;
  return record.gpu_index == index;
}

}  // namespace gpudoctor
