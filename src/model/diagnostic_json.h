// JSON form of the diagnostics the history keeps, as `status --json`,
// `check --json` and the agent's API show them: a GPU's newest record of
// each test, with its time in RFC 3339 like the rest of the JSON.
//
//   {"test": "memtest", "state": "faulty", "finished_at": "2024-05-01T12:00:00.000Z",
//    "summary": "...", "command": "gpudoctor diag memtest --gpu 3"}
#pragma once

#include <span>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "model/diagnostic.h"

namespace gpudoctor {

nlohmann::json DiagnosticToJson(const DiagnosticRecord& record);

// The records of `latest` that are of the GPU at `index` with `uuid` (IsRecordOf), in their order.
nlohmann::json GpuDiagnosticsToJson(std::span<const DiagnosticRecord> latest, uint32_t index, std::string_view uuid);

}  // namespace gpudoctor
