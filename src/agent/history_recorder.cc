#include "agent/history_recorder.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "common/text.h"
#include "store/sqlite_store.h"

namespace gpudoctor {

HistoryRecorder::HistoryRecorder(StoreOpener open, HistoryRecorderOptions options)
    : open_(std::move(open)), options_(std::move(options)) {
  health_.path = options_.path;
  if (options_.boot) boots_.push_back(*options_.boot);
}

RecentEvents HistoryRecorder::Connect(WallTime now) {
  if (store_) return {};
  if (last_open_attempt_ && now - *last_open_attempt_ < reopen_delay_) return {};
  if (last_open_attempt_) reopen_delay_ = std::min<Duration>(2 * reopen_delay_, options_.reopen_every);
  last_open_attempt_ = now;
  auto opened = open_();
  if (!opened) {
    Failed("cannot open it", opened.error(), now);
    return {};
  }
  std::shared_ptr<HistoryStore> store = std::move(*opened);
  auto open = store->OpenIncidents();
  if (!open) {
    Failed("cannot read its open incidents", open.error(), now);
    return {};
  }
  auto last_id = store->LastIncidentId();
  if (!last_id) {
    Failed("cannot read its incident ids", last_id.error(), now);
    return {};
  }
  // Events are evidence, not state: without them the window starts empty.
  auto restored = store->QueryEvents(now - options_.events_window, now + std::chrono::milliseconds(1));
  if (!restored) Failed("cannot read its recent events", restored.error(), now);

  RecordBoot(*store, *open, now);
  IncidentTracker::Adoption adoption = incidents_.Adopt(std::move(*open), *last_id, now);
  for (const auto& [provisional, id] : adoption.renumbered) {
    auto node = pending_incidents_.extract(provisional);
    if (node.empty()) continue;
    node.key() = id;
    node.mapped().incident_id = id;
    pending_incidents_.insert(std::move(node));
  }
  QueueIncidents(incidents_.Touched());
  for (FindingTransition& transition : adoption.resolved) adopted_transitions_.push_back(std::move(transition));
  LoadRemediations(*store, now);
  if (auto learned = store->QueryLearnedGpuCount()) learned_gpu_count_ = *learned;
  else Failed("cannot read the learned GPU count", learned.error(), now);
  {
    std::lock_guard lock(store_mutex_);
    store_ = std::move(store);
  }
  return restored ? std::move(*restored) : RecentEvents{};
}

std::vector<FindingTransition> HistoryRecorder::Record(const Snapshot& snapshot, std::vector<Finding> findings,
                                                       const RecentEvents& new_events, WallTime now) {
  failed_this_cycle_ = false;
  QueuedSamples rows{SamplesFromSnapshot(snapshot)};
  queued_rows_ += rows.size();
  samples_.push_back(std::move(rows));
  if (!new_events.empty()) {
    queued_events_ += new_events.size();
    events_.push_back({new_events, now});
  }
  if (store_) {
    FlushSamples(*store_, now);
    FlushEvents(*store_, now);
  }
  DropOverflow();
  if (store_ && !failed_this_cycle_) {
    health_.ok = true;
    health_.last_error.clear();
    health_.failing_since.reset();
  }
  if (!health_.ok) findings.push_back(FailingFinding());

  std::vector<FindingTransition> transitions = std::exchange(adopted_transitions_, {});
  if (store_) {
    for (FindingTransition& transition : ApplyNewRemediations(*store_, now)) transitions.push_back(std::move(transition));
  }
  ForgetOldRemediations(now);
  for (FindingTransition& transition : incidents_.Update(findings, now)) transitions.push_back(std::move(transition));
  QueueIncidents(incidents_.Touched());
  if (store_) FlushIncidents(*store_, now);
  DropOverflow();

  if (store_ && !failed_this_cycle_ &&
      (!last_maintained_ || now - *last_maintained_ >= options_.maintain_every || maintain_more_)) {
    auto report = store_->Maintain(now);
    if (report) maintain_more_ = report->more_work;
    else Failed("maintenance failed", report.error(), now);
    last_maintained_ = now;
  }
  UpdateQueued();
  return transitions;
}

size_t HistoryRecorder::Flush(WallTime now) {
  if (store_) {
    FlushSamples(*store_, now);
    FlushEvents(*store_, now);
    FlushIncidents(*store_, now);
  }
  UpdateQueued();
  return health_.queued;
}

void HistoryRecorder::LearnGpuCount(std::optional<uint32_t> healthy_count, WallTime now) {
  if (!store_ || learned_gpu_count_ || !healthy_count) return;
  auto kept = store_->LearnGpuCount(*healthy_count, now);
  if (!kept) {
    Failed("cannot keep the learned GPU count", kept.error(), now);
    return;
  }
  // Not kept now: another writer kept one first; that one stands.
  auto learned = store_->QueryLearnedGpuCount();
  if (learned) learned_gpu_count_ = *learned;
  else Failed("cannot read the learned GPU count", learned.error(), now);
}

const std::vector<DiagnosticRecord>& HistoryRecorder::LatestDiagnostics(WallTime now) {
  if (!store_ || (diagnostics_read_at_ && now - *diagnostics_read_at_ < std::chrono::minutes(1))) return diagnostics_;
  diagnostics_read_at_ = now;
  auto latest = store_->LatestDiagnostics();
  if (latest) diagnostics_ = std::move(*latest);
  else Failed("cannot read the diagnostics", latest.error(), now);
  return diagnostics_;
}

std::shared_ptr<const HistoryStore> HistoryRecorder::store() const {
  std::lock_guard lock(store_mutex_);
  return store_;
}

void HistoryRecorder::RecordBoot(HistoryStore& store, const std::vector<StoredFinding>& stored_open, WallTime now) {
  if (!options_.boot) return;
  const BootRecord& boot = *options_.boot;
  auto recorded = store.RecordBoot(boot, now);
  if (!recorded) return Failed("cannot record this boot", recorded.error(), now);
  if (!*recorded) return;  // an earlier run of this boot saw it
  for (const StoredFinding& incident : stored_open) {
    if (incident.finding.severity != Severity::kCritical || incident.opened_at >= boot.booted_at) continue;
    Remediation reboot{.kind = Remediation::Kind::kReboot,
                       .at = boot.booted_at,
                       .incident_id = incident.incident_id,
                       .incident_key = incident.key,
                       .severity = incident.finding.severity,
                       .gpu = incident.finding.gpu};
    if (auto id = store.RecordRemediation(reboot); !id) return Failed("cannot record a reboot", id.error(), now);
  }
}

void HistoryRecorder::LoadRemediations(HistoryStore& store, WallTime now) {
  const WallTime from = now - options_.remediations_window, until = now + std::chrono::milliseconds(1);
  auto boots = store.QueryBoots(from, until);
  auto remediations = store.QueryRemediations({.from = from, .until = until});
  if (!boots) return Failed("cannot read its boots", boots.error(), now);
  if (!remediations) return Failed("cannot read its remediations", remediations.error(), now);
  boots_ = std::move(*boots);
  if (options_.boot && std::find(boots_.begin(), boots_.end(), *options_.boot) == boots_.end())
    boots_.push_back(*options_.boot);
  remediations_.clear();
  for (Remediation& remediation : *remediations) {
    last_remediation_id_ = std::max(last_remediation_id_, remediation.id);
    std::vector<FindingTransition> acknowledged = Acknowledge(remediation);
    // An acknowledgement of an incident no longer open still quiets its
    // finding for the events window, as it did before the restart.
    if (acknowledged.empty() && remediation.kind == Remediation::Kind::kAck &&
        remediation.at >= now - options_.events_window)
      incidents_.RestoreAcknowledgement(remediation.incident_key, remediation.severity, remediation.at);
    for (FindingTransition& transition : acknowledged) adopted_transitions_.push_back(std::move(transition));
    remediations_.push_back(std::move(remediation));
  }
}

std::vector<FindingTransition> HistoryRecorder::ApplyNewRemediations(HistoryStore& store, WallTime now) {
  auto fresh = store.QueryRemediations({.from = WallTime{}, .until = WallTime::max(), .after_id = last_remediation_id_});
  if (!fresh) {
    Failed("cannot read new acknowledgements", fresh.error(), now);
    return {};
  }
  std::vector<FindingTransition> transitions;
  for (Remediation& remediation : *fresh) {
    last_remediation_id_ = std::max(last_remediation_id_, remediation.id);
    for (FindingTransition& transition : Acknowledge(remediation)) transitions.push_back(std::move(transition));
    remediations_.push_back(std::move(remediation));
  }
  return transitions;
}

std::vector<FindingTransition> HistoryRecorder::Acknowledge(const Remediation& ack) {
  if (ack.kind != Remediation::Kind::kAck) return {};
  std::vector<FindingTransition> transitions = incidents_.Acknowledge(ack.incident_id, ack.at);
  QueueIncidents(incidents_.Touched());
  return transitions;
}

void HistoryRecorder::ForgetOldRemediations(WallTime now) {
  const WallTime oldest = now - options_.remediations_window;
  std::erase_if(remediations_, [&](const Remediation& remediation) { return remediation.at < oldest; });
  std::erase_if(boots_, [&](const BootRecord& boot) { return boot.booted_at < oldest; });
}

void HistoryRecorder::FlushSamples(HistoryStore& store, WallTime now) {
  while (!samples_.empty()) {
    const SnapshotSamples& rows = samples_.front().rows;
    if (Status written = store.Append(rows.gpus, rows.processes); !written) {
      Failed("cannot write samples", written.error(), now);
      return;
    }
    queued_rows_ -= samples_.front().size();
    samples_.pop_front();
  }
}

void HistoryRecorder::FlushEvents(HistoryStore& store, WallTime now) {
  while (!events_.empty()) {
    if (Status written = store.AppendEvents(events_.front().events, events_.front().received_at); !written) {
      Failed("cannot write events", written.error(), now);
      return;
    }
    queued_events_ -= events_.front().events.size();
    events_.pop_front();
  }
}

void HistoryRecorder::FlushIncidents(HistoryStore& store, WallTime now) {
  if (pending_incidents_.empty()) return;
  // Resolved ones first: a key may have only one open incident at a time.
  std::vector<StoredFinding> batch;
  batch.reserve(pending_incidents_.size());
  for (const auto& [id, incident] : pending_incidents_)
    if (!incident.open()) batch.push_back(incident);
  for (const auto& [id, incident] : pending_incidents_)
    if (incident.open()) batch.push_back(incident);
  if (Status written = store.RecordIncidents(batch); !written) {
    Failed("cannot write incidents", written.error(), now);
    return;
  }
  pending_incidents_.clear();
}

void HistoryRecorder::DropOverflow() {
  while (queued_rows_ > options_.max_queued_rows && !samples_.empty()) {
    health_.dropped_total += samples_.front().size();
    queued_rows_ -= samples_.front().size();
    samples_.pop_front();
  }
  while (queued_events_ > options_.max_queued_events && !events_.empty()) {
    health_.dropped_total += events_.front().events.size();
    queued_events_ -= events_.front().events.size();
    events_.pop_front();
  }
  while (pending_incidents_.size() > options_.max_queued_incidents) {
    auto oldest_resolved = std::find_if(pending_incidents_.begin(), pending_incidents_.end(),
                                        [](const auto& entry) { return !entry.second.open(); });
    pending_incidents_.erase(oldest_resolved != pending_incidents_.end() ? oldest_resolved
                                                                          : pending_incidents_.begin());
    ++health_.dropped_total;
  }
}

void HistoryRecorder::QueueIncidents(std::span<const StoredFinding> incidents) {
  for (const StoredFinding& incident : incidents) pending_incidents_[incident.incident_id] = incident;
}

void HistoryRecorder::Failed(const std::string& what, const Error& error, WallTime now) {
  failed_this_cycle_ = true;
  health_.ok = false;
  ++health_.errors_total;
  health_.last_error = what + ": " + error.message;
  if (!health_.failing_since) health_.failing_since = now;
}

void HistoryRecorder::UpdateQueued() { health_.queued = queued_rows_ + queued_events_ + pending_incidents_.size(); }

Finding HistoryRecorder::FailingFinding() const {
  Finding finding;
  finding.id = std::string(kHistoryStoreFailingId);
  finding.severity = Severity::kWarning;
  finding.summary = fmt::format("The history database cannot be written ({})", health_.last_error);
  finding.evidence = {
      "database: " + options_.path,
      "last error: " + health_.last_error,
      fmt::format("failing since {}; {} failed store operations since the agent started",
                  health_.failing_since ? FormatIsoUtc(*health_.failing_since) : std::string("start"),
                  health_.errors_total),
      fmt::format("{} writes wait in memory; {} dropped so far (at most {} samples, {} events and {} incident "
                  "updates wait)",
                  health_.queued, health_.dropped_total, options_.max_queued_rows, options_.max_queued_events,
                  options_.max_queued_incidents),
  };
  finding.cause =
      "The agent cannot write its history database: the file system is full or read-only, the device is failing, "
      "or the file is damaged or not writable by the agent. Sampling, findings, alerts and metrics go on; the "
      "history has a gap, and writes wait in memory until the database takes them again.";
  finding.actions = {
      "Check free space and inodes on the file system of the database (df -h, df -i) and free some.",
      "If the file system went read-only, read the kernel log for I/O errors on its device, fix them and remount "
      "it read-write.",
      "If SQLite calls the file malformed or not a database, stop the agent, move the file and its -wal and -shm "
      "files aside as evidence, and start the agent again: it creates a new history.",
      "Nothing else is needed: the agent writes what waits as soon as it can, without a restart.",
  };
  return finding;
}

HistoryRecorder::StoreOpener OpenSqliteHistory(std::string path) {
  return [path = std::move(path)]() -> Result<std::shared_ptr<HistoryStore>> {
    std::error_code error;
    const auto directory = std::filesystem::path(path).parent_path();
    if (!directory.empty()) std::filesystem::create_directories(directory, error);
    if (error) return Error{fmt::format("cannot create {}: {}", directory.string(), error.message())};
    // A small page cache: the agent writes a few pages a second and reads recent ones back, and the
    // file's pages stay in the kernel's cache; SQLite's default (2000 KiB) would grow the agent by as
    // much over its first hours (docs/benchmarks.md, the agent's memory with GPM).
    auto store = SqliteHistoryStore::Open(path, SqliteStoreOptions{.cache_kib = 256});
    if (!store) return store.error();
    return std::shared_ptr<HistoryStore>(std::move(*store));
  };
}

}  // namespace gpudoctor
