// JSON forms of findings as the agent publishes them: in /api/v1/findings,
// in webhook bodies and on an exec hook's stdin. Field names are a documented
// interface (docs/agent.md).
//
//   {"id": "temperature_high", "severity": "warning",
//    "gpu": {"index": 3, "uuid": "GPU-...", "pci_bus_id": "0000:3b:00.0", "serial": "..."},
//    "summary": "...", "evidence": [...], "cause": "...", "actions": [...],
//    "opened_at": "2024-05-01T12:00:00.000Z", "opened_at_ms": 1714564800000}
#pragma once

#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "agent/agent_view.h"
#include "agent/finding_tracker.h"
#include "health/finding.h"

namespace gpudoctor {

nlohmann::json FindingToJson(const Finding& finding);
nlohmann::json OpenFindingToJson(const OpenFinding& open);

// The alert payload: {"event": "opened", "hostname": ..., "time": ..., "time_ms": ...,
// "key": ..., "suppressed": N, "finding": {...FindingToJson, "opened_at"...}}.
// `suppressed` counts transitions of this finding not delivered since the
// previous alert (see AlertRateLimiter).
nlohmann::json TransitionToJson(const FindingTransition& transition, std::string_view hostname,
                                uint64_t suppressed);

}  // namespace gpudoctor
