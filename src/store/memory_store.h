// MemoryHistoryStore: the in-memory twin of SqliteHistoryStore, for tests of
// code that needs a history. It keeps the same contract (retention,
// downsampling, incidents) except the byte-size guard, which has no meaning
// without a file.
//
//   MemoryHistoryStore store;
//   AppendSnapshot(store, snapshot);
#pragma once

#include <map>
#include <optional>
#include <tuple>

#include "store/history_store.h"

namespace gpudoctor {

class MemoryHistoryStore final : public HistoryStore {
 public:
  explicit MemoryHistoryStore(RetentionPolicy retention = {}) : retention_(retention) {}

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

 private:
  using GpuKey = std::pair<uint32_t, std::string>;  // index, uuid
  using Bucket = std::array<std::optional<SeriesPoint>, kMetricCount>;

  int64_t Downsample(Resolution resolution, WallTime now, bool& more_work);
  std::optional<GpuKey> FindGpu(std::string_view selector) const;

  RetentionPolicy retention_;
  std::map<GpuKey, std::map<int64_t, GpuSample>> raw_;  // per GPU, by time (ms)
  std::map<GpuKey, GpuIdentity> identities_;             // every GPU ever sampled, as last seen (never pruned)
  std::map<GpuKey, std::map<int64_t, Bucket>> minute_;
  std::map<GpuKey, std::map<int64_t, Bucket>> hour_;
  std::map<std::tuple<GpuKey, int64_t, uint32_t>, ProcessMemorySample> processes_;  // GPU, time, pid
  std::map<Resolution, int64_t> done_until_ms_;
  struct StoredEvent {
    int64_t received_ms = 0;
    std::optional<XidEvent> nvml_xid;
    std::optional<LogEvent> log;
  };

  std::map<int64_t, StoredFinding> incidents_;  // by incident id
  int64_t last_incident_id_ = 0;
  std::vector<StoredEvent> events_;  // oldest first
  std::map<std::string, BootRecord> boots_;  // by boot id
  std::vector<MaintenanceDone> maintenance_;  // oldest first
  std::optional<LearnedGpuCount> learned_gpu_count_;
  std::vector<DiagnosticRecord> diagnostics_;  // in the order recorded
  std::vector<Remediation> remediations_;    // by id
  int64_t last_remediation_id_ = 0;          // ids are never given twice
  std::optional<WallTime> newest_;
};

}  // namespace gpudoctor
