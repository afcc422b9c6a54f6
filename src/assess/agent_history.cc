#include "assess/agent_history.h"

#include "common/input_file.h"

namespace gpudoctor {

OpenedHistory OpenHistoryReadOnly(const std::string& database, WallTime now) {
  OpenedHistory opened;
  if (database.empty()) {
    opened.note = "not read: the input is captured or simulated (--db names a history to read)";
    return opened;
  }
  InputFailure failure{};
  if (auto file = InputFile::Open(database, &failure); !file) {
    opened.state = failure == InputFailure::kMissing ? AgentRecord::State::kMissing : AgentRecord::State::kUnreadable;
    opened.note = failure == InputFailure::kMissing
                      ? database + " does not exist: no agent has recorded here (--db names another file)"
                      : file.error().message;
    return opened;
  }
  SqliteStoreOptions options;
  options.read_only = true;
  auto store = SqliteHistoryStore::Open(database, options, now);
  if (!store) {
    opened.state = AgentRecord::State::kUnreadable;
    opened.note = store.error().message;
    return opened;
  }
  opened.state = AgentRecord::State::kRead;
  opened.store = std::move(*store);
  return opened;
}

AgentRecord ReadAgentRecord(const std::string& database, WallTime now, HostHistory* host) {
  AgentRecord record;
  record.database = database;
  OpenedHistory opened = OpenHistoryReadOnly(database, now);
  record.state = opened.state;
  record.note = std::move(opened.note);
  if (record.state != AgentRecord::State::kRead) return record;
  auto unreadable = [&](const Error& error) {
    record.state = AgentRecord::State::kUnreadable;
    record.note = database + ": " + error.message;
    return record;
  };
  auto last_sample = opened.store->NewestSampleTime();
  if (!last_sample) return unreadable(last_sample.error());
  auto open = opened.store->OpenIncidents();
  if (!open) return unreadable(open.error());
  std::optional<std::vector<MaintenanceDone>> maintenance;
  std::optional<LearnedGpuCount> learned;
  if (host != nullptr) {
    auto done = opened.store->QueryMaintenance();
    if (!done) return unreadable(done.error());
    auto count = opened.store->QueryLearnedGpuCount();
    if (!count) return unreadable(count.error());
    maintenance = std::move(*done);
    learned = *count;
  }
  record.last_sample = *last_sample;
  for (StoredFinding& incident : *open)
    record.open.push_back({std::move(incident.finding), incident.opened_at, incident.last_seen});
  if (host != nullptr) {
    host->maintenance = std::move(maintenance);
    if (learned) {
      host->learned_gpu_count = learned->count;
      host->gpu_count_learned_at = learned->learned_at;
    }
  }
  return record;
}

Result<bool> RecordDiagnostics(const std::string& database_path, std::span<const DiagnosticRecord> records) {
  InputFailure failure{};
  if (auto file = InputFile::Open(database_path, &failure); !file) {
    if (failure == InputFailure::kMissing) return false;
    return file.error();
  }
  // Opened for writing, the store would create a missing file; the check
  // above leaves only a file that vanishes in between, which the agent does not do.
  auto store = SqliteHistoryStore::Open(database_path, SqliteStoreOptions{});
  if (!store) return store.error();
  for (const DiagnosticRecord& record : records) {
    if (Status status = (*store)->RecordDiagnostic(record); !status)
      return Error{database_path + ": cannot record the diagnostic: " + status.error().message};
  }
  return true;
}

Result<std::vector<DiagnosticRecord>> LoadLatestDiagnostics(const std::string& database_path, WallTime now) {
  OpenedHistory opened = OpenHistoryReadOnly(database_path, now);
  switch (opened.state) {
    case AgentRecord::State::kMissing: return std::vector<DiagnosticRecord>{};
    case AgentRecord::State::kUnreadable: return Error{opened.note};
    case AgentRecord::State::kRead: break;
  }
  auto latest = opened.store->LatestDiagnostics();
  if (!latest) return Error{database_path + ": " + latest.error().message};
  return latest;
}

}  // namespace gpudoctor
