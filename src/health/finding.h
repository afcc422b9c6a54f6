// Finding: one conclusion about the server, with the evidence behind it, the
// probable cause and what the operator should do next.
//
// Rule ids are a stable interface (docs/findings.md). Severities follow the
// Nagios/NHC convention so `check` can map them straight to an exit status.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudoctor {

enum class Severity { kOk = 0, kWarning = 1, kCritical = 2, kUnknown = 3 };

const char* SeverityName(Severity severity);  // "ok", "warning", "critical", "unknown"
std::optional<Severity> SeverityFromName(std::string_view name);
// Orders severities by how bad they are: ok < unknown < warning < critical.
int SeverityRank(Severity severity);
// The Nagios/NHC exit status for the worst of a set of findings:
// critical 2, else warning 1, else unknown 3, else 0.
int ExitStatusFor(Severity worst);

// Which GPU a finding is about, as far as it is known.
struct GpuRef {
  std::optional<uint32_t> index;
  std::string uuid;
  std::string pci_bus_id;
  std::string serial;
  bool operator==(const GpuRef&) const = default;
};

struct Finding {
  std::string id;  // stable rule id, e.g. "temperature_high"
  Severity severity = Severity::kOk;
  std::optional<GpuRef> gpu;
  std::string summary;                // one line
  std::vector<std::string> evidence;  // values and log lines that fired it
  std::string cause;                  // probable cause
  std::vector<std::string> actions;   // next steps for a person at the machine
  // What the finding is about besides the GPU, when one rule can fire for
  // several things at once (a training job's name); part of its identity.
  std::string subject;
  bool operator==(const Finding&) const = default;
};

// The worst severity among `findings` by SeverityRank; ok when empty.
Severity WorstSeverity(const std::vector<Finding>& findings);

}  // namespace gpudoctor
