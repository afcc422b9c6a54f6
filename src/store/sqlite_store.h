// SqliteHistoryStore: the history in one SQLite file, for the agent (writer)
// and `gpudoctor history` / the HTTP API (readers, possibly concurrent).
//
//   SqliteStoreOptions options;
//   options.retention.raw = std::chrono::hours(24 * 3);
//   auto store = SqliteHistoryStore::Open("/var/lib/gpudoctor/history.db", options);
//   if (!store) { log(store.error().message); ... }
//
// Durability: WAL with synchronous=NORMAL for samples (a crash may lose the
// last few, never corrupt the file); findings commit with synchronous=FULL
// before RecordIncidents (and UpsertFindings) returns. Calls may come from several threads; they
// are serialised. Layout and sizes: docs/store.md.
#pragma once

#include <mutex>
#include <memory>
#include <string>

#include "store/history_store.h"

namespace gpudoctor {

class SqliteConnection;

struct SqliteStoreOptions {
  RetentionPolicy retention;
  // Open an existing history for queries only: never creates, migrates or
  // writes the file. An older schema version is read as it is.
  bool read_only = false;
  Duration busy_timeout = std::chrono::seconds(5);
  // The connection's page cache in KiB (PRAGMA cache_size = -N); 0 keeps SQLite's default of 2000 KiB.
  // The agent keeps one connection open for days, and its cache fills up to this bound.
  int cache_kib = 0;
};

class SqliteHistoryStore final : public HistoryStore {
 public:
  // Creates the file (unless read_only) and brings its schema up to date.
  // Fails with a clear message for a file that is not a gpudoctor history.
  static Result<std::unique_ptr<SqliteHistoryStore>> Open(const std::string& path, SqliteStoreOptions options,
                                                          WallTime now = SystemClock::Instance().Now());
  ~SqliteHistoryStore() override;

  Status Append(std::span<const GpuSample> gpus, std::span<const ProcessMemorySample> processes) override;
  Status RecordIncidents(std::span<const StoredFinding> incidents) override;
  Result<std::vector<StoredFinding>> OpenIncidents() const override;
  Result<int64_t> LastIncidentId() const override;
  Status AppendEvents(const RecentEvents& events, WallTime received_at) override;
  Result<RecentEvents> QueryEvents(WallTime from, WallTime until) const override;
  Result<bool> RecordBoot(const BootRecord& boot, WallTime now) override;
  Result<std::vector<BootRecord>> QueryBoots(WallTime from, WallTime until) const override;
  Result<int64_t> RecordRemediation(const Remediation& remediation) override;
  Result<std::vector<Remediation>> QueryRemediations(const RemediationQuery& query) const override;
  Status RecordMaintenance(const MaintenanceDone& done, WallTime recorded_at) override;
  Result<std::vector<MaintenanceDone>> QueryMaintenance() const override;
  Result<bool> LearnGpuCount(uint32_t count, WallTime at) override;
  Result<std::optional<LearnedGpuCount>> QueryLearnedGpuCount() const override;
  Status RecordDiagnostic(const DiagnosticRecord& record) override;
  Result<std::vector<DiagnosticRecord>> LatestDiagnostics() const override;
  Result<MaintenanceReport> Maintain(WallTime now) override;
  Result<std::vector<GpuIdentity>> ListGpus() const override;
  Result<std::optional<WallTime>> NewestSampleTime() const override;
  Result<Series> QuerySeries(const SeriesQuery& query) const override;
  Result<std::vector<ProcessMemorySample>> QueryProcessMemory(std::string_view gpu, WallTime from,
                                                              WallTime until) const override;
  Result<std::vector<StoredFinding>> QueryFindings(const FindingQuery& query) const override;

  // Bytes held by live pages (the file minus its free list).
  Result<uint64_t> UsedBytes() const;
  // "ok", or SQLite's description of the damage.
  Result<std::string> IntegrityCheck() const;

 private:
  SqliteHistoryStore(std::unique_ptr<SqliteConnection> db, SqliteStoreOptions options, int schema_version);

  // The row id of the sample's GPU (index and uuid), made or refreshed with its identity.
  Result<int64_t> GpuId(const GpuSample& sample, int64_t time_ms);
  Result<std::vector<StoredFinding>> OpenIncidentsLocked() const;
  Result<std::optional<GpuIdentity>> FindGpu(std::string_view selector, int64_t* id) const;
  Result<int64_t> Downsample(Resolution resolution, WallTime now, bool& more_work);
  Result<int64_t> Prune(WallTime now);
  Result<int64_t> EnforceSizeLimit();
  Status ReleaseFreePages();
  Result<uint64_t> UsedBytesLocked() const;
  Result<std::optional<int64_t>> DoneUntil(Resolution resolution) const;

  // One connection, used under mutex_ by every method, const ones included:
  // its cached statements are not part of the store's observable state.
  std::unique_ptr<SqliteConnection> db_;
  SqliteStoreOptions options_;
  std::string incident_columns_;  // for the file's schema version (read-only stores read older ones)
  int schema_version_;
  mutable std::mutex mutex_;
};

}  // namespace gpudoctor
