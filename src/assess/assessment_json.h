// The JSON every command prints of an assessment, so that `status --json`,
// `check --json` and `triage --json` say the same thing the same way:
//
//   "status": "critical",
//   "gpus": [{"index": 3, "uuid": "GPU-...", "serial": "...", "pci_bus_id": "0000:61:00.0",
//             "name": "NVIDIA H100 80GB HBM3", "identity": "last_known", "identity_source":
//             "the agent's history", "health": "critical", "findings": ["gpu_lost", "xid_recent"],
//             "diagnostics": [...]}],
//   "sources": [{"source": "kernel log", "status": "read", "detail": "..."}],
//   "not_checked": [{"rule": "fan_failure", "reason": "..."}]
//
// "identity" is "read" (from the card now), "last_known" (remembered: the card
// no longer answers) or "unknown" (nothing names the card: no UUID, serial or
// PCI address was ever read, and no history or log line recalls one).
#pragma once

#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "assess/assessment.h"
#include "assess/gather.h"
#include "model/diagnostic.h"

namespace gpudoctor {

nlohmann::json GpuVerdictsToJson(const Assessment& assessment, const std::vector<DiagnosticRecord>* diagnostics);
nlohmann::json SourcesToJson(const std::vector<SourceNote>& sources);
nlohmann::json NotCheckedToJson(const std::vector<UncheckedRule>& unchecked);

}  // namespace gpudoctor
