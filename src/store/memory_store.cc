#include "store/memory_store.h"

#include <algorithm>

#include "store/maintenance_plan.h"

namespace gpudoctor {
namespace {

// min/avg/max of each metric over samples, skipping missing values.
std::array<std::optional<SeriesPoint>, kMetricCount> Aggregate(const std::vector<const GpuSample*>& samples,
                                                               WallTime bucket_start) {
  std::array<std::optional<SeriesPoint>, kMetricCount> bucket;
  for (size_t slot = 0; slot < kMetricCount; ++slot) {
    double sum = 0;
    int count = 0;
    SeriesPoint point{bucket_start, 0, 0, 0};
    for (const GpuSample* sample : samples) {
      const std::optional<double>& value = sample->values[slot];
      if (!value) continue;
      point.min = count == 0 ? *value : std::min(point.min, *value);
      point.max = count == 0 ? *value : std::max(point.max, *value);
      sum += *value;
      ++count;
    }
    if (count == 0) continue;
    point.avg = sum / count;
    bucket[slot] = point;
  }
  return bucket;
}

template <typename Map>
int64_t EraseBefore(Map& by_time, int64_t cutoff_ms) {
  auto end = by_time.lower_bound(cutoff_ms);
  int64_t erased = std::distance(by_time.begin(), end);
  by_time.erase(by_time.begin(), end);
  return erased;
}

}  // namespace

Status MemoryHistoryStore::Append(std::span<const GpuSample> gpus, std::span<const ProcessMemorySample> processes) {
  for (const GpuSample& sample : gpus) {
    raw_[{sample.gpu_index, sample.uuid}][ToUnixMillis(sample.time)] = sample;
    newest_ = std::max(newest_.value_or(sample.time), sample.time);
    GpuIdentity& identity = identities_[{sample.gpu_index, sample.uuid}];
    identity.index = sample.gpu_index;
    identity.uuid = sample.uuid;
    for (auto [kept, now] : {std::pair{&identity.serial, &sample.serial}, {&identity.pci_bus_id, &sample.pci_bus_id},
                             {&identity.name, &sample.name}}) {
      if (!now->empty()) *kept = *now;
    }
    identity.last_seen = std::max(identity.last_seen.value_or(sample.time), sample.time);
  }
  for (const ProcessMemorySample& sample : processes)
    processes_[{{sample.gpu_index, sample.uuid}, ToUnixMillis(sample.time), sample.pid}] = sample;
  return Status::Ok();
}

Status MemoryHistoryStore::RecordIncidents(std::span<const StoredFinding> incidents) {
  for (const StoredFinding& incident : incidents) {
    incidents_[incident.incident_id] = incident;
    last_incident_id_ = std::max(last_incident_id_, incident.incident_id);
  }
  return Status::Ok();
}

Result<std::vector<StoredFinding>> MemoryHistoryStore::OpenIncidents() const {
  std::vector<StoredFinding> open;
  for (const auto& [id, incident] : incidents_)
    if (incident.open()) open.push_back(incident);
  return open;
}

Result<int64_t> MemoryHistoryStore::LastIncidentId() const { return last_incident_id_; }

Status MemoryHistoryStore::AppendEvents(const RecentEvents& events, WallTime received_at) {
  const int64_t t = ToUnixMillis(received_at);
  for (const XidEvent& xid : events.nvml_xids) events_.push_back({t, xid, std::nullopt});
  for (const LogEvent& event : events.log) events_.push_back({t, std::nullopt, event});
  std::stable_sort(events_.begin(), events_.end(),
                   [](const StoredEvent& a, const StoredEvent& b) { return a.received_ms < b.received_ms; });
  return Status::Ok();
}

Result<RecentEvents> MemoryHistoryStore::QueryEvents(WallTime from, WallTime until) const {
  RecentEvents events;
  for (const StoredEvent& stored : events_) {
    if (stored.received_ms < ToUnixMillis(from) || stored.received_ms >= ToUnixMillis(until)) continue;
    if (stored.nvml_xid) events.nvml_xids.push_back(*stored.nvml_xid);
    if (stored.log) events.log.push_back(*stored.log);
  }
  return events;
}

Result<bool> MemoryHistoryStore::RecordBoot(const BootRecord& boot, WallTime) {
  return boots_.try_emplace(boot.boot_id, boot).second;
}

Result<std::vector<BootRecord>> MemoryHistoryStore::QueryBoots(WallTime from, WallTime until) const {
  std::vector<BootRecord> boots;
  for (const auto& [id, boot] : boots_)
    if (boot.booted_at >= from && boot.booted_at < until) boots.push_back(boot);
  std::stable_sort(boots.begin(), boots.end(),
                   [](const BootRecord& a, const BootRecord& b) { return a.booted_at < b.booted_at; });
  return boots;
}

Status MemoryHistoryStore::RecordMaintenance(const MaintenanceDone& done, WallTime) {
  auto later = std::upper_bound(maintenance_.begin(), maintenance_.end(), done.done_at,
                                [](WallTime at, const MaintenanceDone& record) { return at < record.done_at; });
  maintenance_.insert(later, done);
  return Status::Ok();
}

Result<std::vector<MaintenanceDone>> MemoryHistoryStore::QueryMaintenance() const { return maintenance_; }

Result<bool> MemoryHistoryStore::LearnGpuCount(uint32_t count, WallTime at) {
  if (learned_gpu_count_) return false;
  learned_gpu_count_ = LearnedGpuCount{count, at};
  return true;
}

Result<std::optional<LearnedGpuCount>> MemoryHistoryStore::QueryLearnedGpuCount() const { return learned_gpu_count_; }

Status MemoryHistoryStore::RecordDiagnostic(const DiagnosticRecord& record) {
  diagnostics_.push_back(record);
  return Status::Ok();
}

Result<std::vector<DiagnosticRecord>> MemoryHistoryStore::LatestDiagnostics() const {
  // A GPU is its UUID, else its index; a later record as new as another wins.
  using Key = std::tuple<std::string, std::optional<uint32_t>, std::string>;
  std::map<Key, const DiagnosticRecord*> latest;
  for (const DiagnosticRecord& record : diagnostics_) {
    Key key{record.uuid, record.uuid.empty() ? std::optional<uint32_t>(record.gpu_index) : std::nullopt, record.test};
    const DiagnosticRecord*& newest = latest[key];
    if (newest == nullptr || record.finished_at >= newest->finished_at) newest = &record;
  }
  std::vector<DiagnosticRecord> records;
  for (const auto& [key, record] : latest) records.push_back(*record);
  std::sort(records.begin(), records.end(), [](const DiagnosticRecord& a, const DiagnosticRecord& b) {
    return std::tie(a.gpu_index, a.uuid, a.test) < std::tie(b.gpu_index, b.uuid, b.test);
  });
  return records;
}

Result<int64_t> MemoryHistoryStore::RecordRemediation(const Remediation& remediation) {
  Remediation& stored = remediations_.emplace_back(remediation);
  stored.id = ++last_remediation_id_;
  return stored.id;
}

Result<std::vector<Remediation>> MemoryHistoryStore::QueryRemediations(const RemediationQuery& query) const {
  std::vector<Remediation> found;
  for (const Remediation& remediation : remediations_)
    if (remediation.at >= query.from && remediation.at < query.until && remediation.id > query.after_id)
      found.push_back(remediation);
  std::stable_sort(found.begin(), found.end(),
                   [](const Remediation& a, const Remediation& b) { return a.at < b.at; });
  return found;
}

int64_t MemoryHistoryStore::Downsample(Resolution resolution, WallTime now, bool& more_work) {
  auto& buckets = resolution == Resolution::kMinute ? minute_ : hour_;
  std::optional<int64_t> done;
  if (auto it = done_until_ms_.find(resolution); it != done_until_ms_.end()) done = it->second;
  std::optional<int64_t> next_raw;
  for (const auto& [gpu, samples] : raw_) {
    auto it = done ? samples.lower_bound(*done) : samples.begin();
    if (it != samples.end()) next_raw = std::min(next_raw.value_or(it->first), it->first);
  }
  auto step = NextDownsampleStep(resolution, done, next_raw, now);
  if (!step) return 0;

  int64_t written = 0;
  for (const auto& [gpu, samples] : raw_) {
    std::map<int64_t, std::vector<const GpuSample*>> by_bucket;
    for (auto it = samples.lower_bound(step->from_ms); it != samples.end() && it->first < step->until_ms; ++it)
      by_bucket[FloorToBucket(it->first, resolution)].push_back(&it->second);
    for (const auto& [start, members] : by_bucket) {
      buckets[gpu][start] = Aggregate(members, FromUnixMillis(start));
      ++written;
    }
  }
  done_until_ms_[resolution] = step->until_ms;
  more_work = more_work || step->more_after;
  return written;
}

Result<MaintenanceReport> MemoryHistoryStore::Maintain(WallTime now) {
  MaintenanceReport report;
  report.buckets_written += Downsample(Resolution::kMinute, now, report.more_work);
  report.buckets_written += Downsample(Resolution::kHour, now, report.more_work);

  auto done = [&](Resolution r) -> std::optional<int64_t> {
    auto it = done_until_ms_.find(r);
    return it == done_until_ms_.end() ? std::nullopt : std::optional<int64_t>(it->second);
  };
  const int64_t raw_cutoff =
      RawPruneCutoffMs(retention_, now, done(Resolution::kMinute), done(Resolution::kHour));
  for (auto& [gpu, samples] : raw_) report.rows_pruned += EraseBefore(samples, raw_cutoff);
  for (auto& [gpu, rows] : minute_) report.rows_pruned += EraseBefore(rows, ToUnixMillis(now - retention_.minute));
  for (auto& [gpu, rows] : hour_) report.rows_pruned += EraseBefore(rows, ToUnixMillis(now - retention_.hour));
  report.rows_pruned += std::erase_if(processes_, [&](const auto& entry) {
    return std::get<1>(entry.first) < ToUnixMillis(now - retention_.raw);
  });
  report.rows_pruned += std::erase_if(incidents_, [&](const auto& entry) {
    const StoredFinding& incident = entry.second;
    return incident.resolved_at && *incident.resolved_at < now - retention_.resolved_findings;
  });
  report.rows_pruned += std::erase_if(
      events_, [&](const StoredEvent& stored) { return stored.received_ms < ToUnixMillis(now - retention_.raw); });
  const WallTime record_cutoff = now - retention_.resolved_findings;
  report.rows_pruned +=
      std::erase_if(boots_, [&](const auto& entry) { return entry.second.booted_at < record_cutoff; });
  report.rows_pruned +=
      std::erase_if(remediations_, [&](const Remediation& remediation) { return remediation.at < record_cutoff; });
  report.rows_pruned += std::erase_if(
      diagnostics_, [&](const DiagnosticRecord& record) { return record.finished_at < record_cutoff; });
  return report;
}

Result<std::optional<WallTime>> MemoryHistoryStore::NewestSampleTime() const { return newest_; }

Result<std::vector<GpuIdentity>> MemoryHistoryStore::ListGpus() const {
  std::vector<GpuIdentity> gpus;
  for (const auto& [gpu, identity] : identities_) gpus.push_back(identity);
  // Rows that came only in aggregate (a test that fills the minute table) have no identity kept.
  for (const auto& [gpu, rows] : minute_)
    if (!identities_.contains(gpu)) gpus.push_back({gpu.first, gpu.second});
  std::sort(gpus.begin(), gpus.end(), [](const GpuIdentity& a, const GpuIdentity& b) {
    return std::tie(a.index, a.uuid) < std::tie(b.index, b.uuid);
  });
  return gpus;
}

std::optional<MemoryHistoryStore::GpuKey> MemoryHistoryStore::FindGpu(std::string_view selector) const {
  auto gpus = ListGpus();
  // The most recently seen GPU wins when an index was reused by another board.
  std::optional<GpuKey> found;
  std::optional<int64_t> found_newest;
  for (const GpuIdentity& gpu : *gpus) {
    if (!MatchesGpu(gpu, selector)) continue;
    GpuKey key{gpu.index, gpu.uuid};
    int64_t newest = INT64_MIN;
    if (auto it = raw_.find(key); it != raw_.end() && !it->second.empty()) newest = it->second.rbegin()->first;
    if (!found || newest > *found_newest) {
      found = key;
      found_newest = newest;
    }
  }
  return found;
}

Result<Series> MemoryHistoryStore::QuerySeries(const SeriesQuery& query) const {
  auto gpu = FindGpu(query.gpu);
  if (!gpu) return Error{"no GPU '" + query.gpu + "' in the history"};
  Series series;
  series.gpu = {gpu->first, gpu->second};
  series.metric = query.metric;
  series.resolution = query.resolution.value_or(
      ChooseResolution(query.from, query.until, newest_.value_or(query.until), retention_));
  const int64_t from = ToUnixMillis(query.from), until = ToUnixMillis(query.until);
  const size_t slot = MetricSlot(query.metric);
  if (series.resolution == Resolution::kRaw) {
    auto it = raw_.find(*gpu);
    if (it == raw_.end()) return series;
    for (auto row = it->second.lower_bound(from); row != it->second.end() && row->first < until; ++row) {
      if (const auto& value = row->second.values[slot])
        series.points.push_back({row->second.time, *value, *value, *value});
    }
    return series;
  }
  const auto& buckets = series.resolution == Resolution::kMinute ? minute_ : hour_;
  auto it = buckets.find(*gpu);
  if (it == buckets.end()) return series;
  for (auto row = it->second.lower_bound(from); row != it->second.end() && row->first < until; ++row)
    if (const auto& point = row->second[slot]) series.points.push_back(*point);
  return series;
}

Result<std::vector<ProcessMemorySample>> MemoryHistoryStore::QueryProcessMemory(std::string_view gpu, WallTime from,
                                                                                WallTime until) const {
  auto key = FindGpu(gpu);
  if (!key) return Error{"no GPU '" + std::string(gpu) + "' in the history"};
  std::vector<ProcessMemorySample> rows;
  for (const auto& [id, sample] : processes_)
    if (std::get<0>(id) == *key && sample.time >= from && sample.time < until) rows.push_back(sample);
  return rows;
}

Result<std::vector<StoredFinding>> MemoryHistoryStore::QueryFindings(const FindingQuery& query) const {
  std::vector<StoredFinding> rows;
  for (auto it = incidents_.rbegin(); it != incidents_.rend(); ++it) {
    const StoredFinding& incident = it->second;
    if (incident.opened_at >= query.until) continue;
    if (incident.resolved_at && *incident.resolved_at < query.from) continue;
    if (query.open_only && !incident.open()) continue;
    if (!query.gpu.empty()) {
      const std::optional<GpuRef>& ref = incident.finding.gpu;
      if (!ref || !MatchesGpu({ref->index.value_or(UINT32_MAX), ref->uuid}, query.gpu)) continue;
    }
    rows.push_back(incident);
  }
  return rows;
}

}  // namespace gpudoctor
