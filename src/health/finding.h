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

#include "common/clock.h"

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

// Whether two references name the same GPU: by UUID, else PCI bus id, else index.
bool SameGpu(const GpuRef& a, const GpuRef& b);
// "GPU 3", or "GPU at 0000:3b:00.0" for a GPU known only on the bus.
std::string GpuName(const GpuRef& gpu);

struct Finding {
  std::string id;  // stable rule id, e.g. "temperature_high"
  Severity severity = Severity::kOk;
  std::optional<GpuRef> gpu;
  std::string summary;                // one line
  std::vector<std::string> evidence;  // values and log lines that fired it
  std::string cause;                  // probable cause
  std::vector<std::string> actions;   // next steps for a person at the machine
  // What the finding is about besides the GPU, when one rule can fire for
  // several things at once (a training job's name, an Xid code); part of its
  // identity.
  std::string subject;
  // The FindingKey of the root-cause finding this one is evidence of, set by
  // the correlation step (health/correlate/correlate.h); empty when the
  // finding stands alone. Presenters show it under its root, and alerts page
  // for the root alone.
  std::string part_of;
  // When the newest event behind the finding happened (an Xid, a log line);
  // nullopt for findings about the present state. An acknowledged finding
  // opens again when it shows a newer event.
  std::optional<WallTime> newest_event_at;
  bool operator==(const Finding&) const = default;
};

// The probable cause and the operator's next steps for a finding.
struct Remedy {
  std::string cause;
  std::vector<std::string> actions;
  bool operator==(const Remedy&) const = default;
};

// Remedy actions may name a gpudoctor command for the finding's GPUs as
// "--gpu {gpu}" ("gpudoctor diag memtest --gpu {gpu}"): filled with their
// indexes ("--gpu 3", "--gpu 0,2"), or left out when none is known, so that
// the command covers every GPU. Any other "{gpu}" ("nvidia-smi -r -i {gpu}")
// is filled the same way, or becomes "<index>" for the operator to fill.
std::vector<std::string> FillGpuPlaceholder(const std::vector<std::string>& actions,
                                            const std::vector<uint32_t>& gpu_indexes);
// The same for one finding's GPU.
std::vector<std::string> FillGpuPlaceholder(const std::vector<std::string>& actions, const std::optional<GpuRef>& gpu);

// What makes two findings "the same incident": the rule id, the GPU (UUID,
// else bus id, else index) and the subject, e.g. "memory_leak@GPU-1234...",
// "job_stall/llama-70b", "xid_recent@0000:3b:00.0/79".
std::string FindingKey(const Finding& finding);

// The worst severity among `findings` by SeverityRank; ok when empty.
Severity WorstSeverity(const std::vector<Finding>& findings);

}  // namespace gpudoctor
