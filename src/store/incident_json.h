// JSON forms of open findings and their transitions, as the agent publishes
// them in /api/v1/findings, webhook bodies and an exec hook's stdin (fields
// documented in docs/agent.md). A finding itself is health's FindingToJson,
// plus its incident's bookkeeping:
//
//   {"id": "temperature_high", "severity": "warning", "gpu": {"index": 3, ...},
//    "summary": "...", "evidence": [...], "cause": "...", "actions": [...],
//    "subject": null, "key": "temperature_high@GPU-...", "incident_id": 17,
//    "opened_at": "2024-05-01T12:00:00.000Z", "opened_at_ms": 1714564800000,
//    "last_seen": "...", "last_seen_ms": ..., "resolved_at": null, "resolved_at_ms": null}
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "store/history_store.h"

namespace gpudoctor {

nlohmann::json StoredFindingToJson(const StoredFinding& incident);

// When a transition happened: the opening, the resolution, or (for a
// severity change) the sample that showed it.
WallTime TransitionTime(const FindingTransition& transition);

// The alert payload: {"event": "opened", "hostname": ..., "time": ..., "time_ms": ...,
// "suppressed": N, "finding": {...StoredFindingToJson}}. `suppressed` counts
// transitions of this finding not delivered since the previous alert (see
// AlertRateLimiter).
nlohmann::json TransitionToJson(const FindingTransition& transition, std::string_view hostname,
                                uint64_t suppressed);

}  // namespace gpudoctor
