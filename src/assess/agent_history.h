// The agent's history file as the one-shot commands (status, check, triage,
// report, diag) read it: read-only, never upgraded, a missing file no error (no agent has
// recorded here) and an unreadable one only a note (the file is the agent's,
// private to its user).
//
//   AgentRecord record = ReadAgentRecord("/var/lib/gpudoctor/history.db", now);
//   input.agent = &record;   // agent_history judges it; AgentOpenFindings adds its open findings
#pragma once

#include <memory>
#include <span>
#include <vector>
#include <string>

#include "common/clock.h"
#include "common/result.h"
#include "health/agent_record.h"
#include "health/maintenance.h"
#include "model/diagnostic.h"
#include "store/sqlite_store.h"

namespace gpudoctor {

struct OpenedHistory {
  AgentRecord::State state = AgentRecord::State::kMissing;
  std::string note;                            // why not kRead
  std::unique_ptr<SqliteHistoryStore> store;   // set when kRead
};

// Opens `database` read-only as of `now`; an empty path is no history (kMissing).
OpenedHistory OpenHistoryReadOnly(const std::string& database, WallTime now);

// The agent's open findings and its last sample; with `host`, also the
// maintenance done and the GPU count the agent learned (left as they are when
// the history cannot be read).
AgentRecord ReadAgentRecord(const std::string& database, WallTime now, HostHistory* host = nullptr);

// Writes `records` into the history at `database_path` when that file
// exists: true when written, false when there is none (nothing is created:
// the history is the agent's). An error names the file: not a history, not
// writable, a newer schema.
Result<bool> RecordDiagnostics(const std::string& database_path, std::span<const DiagnosticRecord> records);

// The newest `gpudoctor diag` record of each GPU and test in the history at
// `database_path`, read-only and never upgraded; empty when the file does not
// exist (or an empty path is given).
Result<std::vector<DiagnosticRecord>> LoadLatestDiagnostics(const std::string& database_path, WallTime now);

}  // namespace gpudoctor
