// The diagnostics of `gpudoctor diag` as the commands show them: "memtest
// passed 2 d ago, burn FAULTY 3 h ago". They are kept in the agent's history
// (assess/agent_history.h: RecordDiagnostics, LoadLatestDiagnostics).
//
// The history is the agent's: a run writes into it only when the file is
// already there, and never creates one.
//
//   auto written = RecordDiagnostics(kDefaultHistoryDatabase, records);
//   if (!written) warn(written.error().message);
//   else if (!*written) note("no agent history here; the results were not kept");
//
//   auto latest = LoadLatestDiagnostics(kDefaultHistoryDatabase);  // empty: no history
//   PrintLastDiagnostics(stdout, style, snapshot, *latest, now);  // status, check
#pragma once

#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "assess/agent_history.h"
#include "cli/terminal.h"
#include "common/clock.h"
#include "common/result.h"
#include "model/diagnostic.h"
#include "model/snapshot.h"

namespace gpudoctor {


// How long ago, in the largest whole unit: "just now", "5 min ago", "3 h ago", "2 d ago".
std::string DescribeAge(WallTime then, WallTime now);

// The newest diagnostics of the GPU at `index` with `uuid`, one per test:
// "memtest passed 2 d ago, burn FAULTY 3 h ago" (a fault in capitals); empty
// when there are none.
std::string DescribeGpuDiagnostics(std::span<const DiagnosticRecord> latest, uint32_t index, std::string_view uuid,
                                   WallTime now);

// "Last diagnostics" and a line per GPU of `snapshot` that has any
// ("  GPU 3  memtest passed 2 d ago"); nothing when none has.
void PrintLastDiagnostics(std::FILE* out, const Style& style, const Snapshot& snapshot,
                          std::span<const DiagnosticRecord> latest, WallTime now);

// The newest diagnostics of a snapshot's GPU, as `status --json` and `check --json` show them.
nlohmann::json GpuDiagnosticsToJson(std::span<const DiagnosticRecord> latest, const GpuSnapshot& gpu);

}  // namespace gpudoctor
