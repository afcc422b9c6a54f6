// HistoryRecorder: the agent's history, kept without ever holding the agent
// back. The store is a record, not a gate.
//
// An IncidentTracker decides which findings are open incidents, so the API
// and the alerts learn of one at once, whatever the disk does. Samples,
// events and incident changes go to the store when it can take them; writes
// that fail wait in bounded queues and are tried again every cycle, oldest
// first. When a queue is full its oldest entries go and are counted as
// dropped. A failing store is itself a finding (history_store_failing) and a
// StoreHealth for /healthz and /metrics. A store that cannot be opened is
// tried again, sooner at first; once open, its open incidents and recent
// events are taken up, so nothing is judged twice after a restart.
//
//   HistoryRecorder history(OpenSqliteHistory(path), {.path = path});
//   RecentEvents restored = history.Connect(now);    // each cycle, before the rules
//   (history.boots() and history.remediations() feed the escalations)
//   std::vector<FindingTransition> changes = history.Record(snapshot, findings, new_events, now);
//   alerts.Submit(changes);
//   state.SetOpenFindings(history.open_incidents());
//   state.SetStoreHealth(history.health());
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent_view.h"
#include "common/clock.h"
#include "common/result.h"
#include "health/finding.h"
#include "health/rule_ids.h"
#include "model/snapshot.h"
#include "model/diagnostic.h"
#include "store/history_store.h"
#include "store/incident_tracker.h"
#include "store/snapshot_samples.h"

namespace gpudoctor {

struct HistoryRecorderOptions {
  std::string path;  // the database, named in messages and in the finding
  // A store that cannot be opened is tried again after 1 s, then twice as
  // long each time, up to `reopen_every`.
  Duration reopen_every = std::chrono::seconds(30);
  Duration maintain_every = std::chrono::minutes(1);
  // How much waits in memory while the store fails (then the oldest go).
  size_t max_queued_rows = 20'000;      // GPU and process samples
  size_t max_queued_events = 20'000;
  size_t max_queued_incidents = 10'000;  // resolved ones go first
  // How far back Connect gives the events a store kept.
  Duration events_window = std::chrono::hours(24);
  // How far back boots and remediations are kept in memory, for escalations.
  Duration remediations_window = std::chrono::hours(24 * 7);
  // This host's boot, recorded once the store opens; a new one marks the
  // critical incidents it found open as remediated by a reboot.
  std::optional<BootRecord> boot;
};

class HistoryRecorder {
 public:
  using StoreOpener = std::function<Result<std::shared_ptr<HistoryStore>>()>;

  HistoryRecorder(StoreOpener open, HistoryRecorderOptions options);

  // Opens the store when it is not open and a try is due. The first time it
  // opens, its open incidents are taken up, this boot is recorded,
  // acknowledgements made while the agent was away are applied, and the
  // events it kept over `events_window` are returned, for the rules'
  // windows; else nothing.
  RecentEvents Connect(WallTime now);

  // One cycle's record: queues the snapshot's samples and `new_events`,
  // writes what the store takes, applies new acknowledgements (gpudoctor
  // ack), judges `findings` (plus history_store_failing while the store
  // fails) into incidents and returns the transitions, which never wait for
  // the store.
  std::vector<FindingTransition> Record(const Snapshot& snapshot, std::vector<Finding> findings,
                                        const RecentEvents& new_events, WallTime now);

  // Tries once more to write everything queued (at shutdown); the number of
  // writes still waiting afterwards.
  size_t Flush(WallTime now);

  const std::vector<StoredFinding>& open_incidents() const { return incidents_.open(); }
  // The boots and remediations of the last `remediations_window`, oldest first.
  const std::vector<BootRecord>& boots() const { return boots_; }
  const std::vector<Remediation>& remediations() const { return remediations_; }
  const StoreHealth& health() const { return health_; }
  // Keeps `healthy_count` (HealthyGpuCount of this cycle's sample) as the
  // host's expected GPU count when none is kept yet: the first healthy sample
  // decides, once, and later ones never change it. A write that fails is
  // tried again with the next healthy sample.
  void LearnGpuCount(std::optional<uint32_t> healthy_count, WallTime now);
  // The count kept in the history, once the store has told it.
  const std::optional<LearnedGpuCount>& learned_gpu_count() const { return learned_gpu_count_; }
  // The newest diagnostic of each GPU and test (gpudoctor diag writes them
  // into the history from its own process), read from the store at most once
  // a minute; empty until the store opens, and the last read while it fails.
  const std::vector<DiagnosticRecord>& LatestDiagnostics(WallTime now);
  // A run wrote new diagnostics: the next LatestDiagnostics reads them.
  void DiagnosticsChanged() { diagnostics_read_at_.reset(); }
  // The open store, for readers on other threads (the HTTP history API); null
  // until it opens.
  std::shared_ptr<const HistoryStore> store() const;

  // A reloaded config may widen the rules' windows and the escalations' lookback.
  void set_events_window(Duration window) { options_.events_window = window; }
  void set_remediations_window(Duration window) { options_.remediations_window = window; }

 private:
  struct QueuedSamples {
    SnapshotSamples rows;
    size_t size() const { return rows.gpus.size() + rows.processes.size(); }
  };
  struct QueuedEvents {
    RecentEvents events;
    WallTime received_at;
  };

  // Records this boot, and the reboot of each critical incident in
  // `stored_open` that opened before it.
  void RecordBoot(HistoryStore& store, const std::vector<StoredFinding>& stored_open, WallTime now);
  // Loads the boots and remediations of the window, and resumes the
  // acknowledgements of that window.
  void LoadRemediations(HistoryStore& store, WallTime now);
  // Reads the remediations recorded since the last read and resolves the
  // incidents they acknowledge; the transitions.
  std::vector<FindingTransition> ApplyNewRemediations(HistoryStore& store, WallTime now);
  std::vector<FindingTransition> Acknowledge(const Remediation& ack);
  void ForgetOldRemediations(WallTime now);
  void FlushSamples(HistoryStore& store, WallTime now);
  void FlushEvents(HistoryStore& store, WallTime now);
  void FlushIncidents(HistoryStore& store, WallTime now);
  void QueueIncidents(std::span<const StoredFinding> incidents);
  // Beyond the limits, the oldest queued writes go (resolved incidents before open ones).
  void DropOverflow();
  void Failed(const std::string& what, const Error& error, WallTime now);
  void UpdateQueued();
  Finding FailingFinding() const;

  StoreOpener open_;
  HistoryRecorderOptions options_;
  mutable std::mutex store_mutex_;  // guards store_ for store()
  std::shared_ptr<HistoryStore> store_;
  std::optional<WallTime> last_open_attempt_;
  Duration reopen_delay_ = std::chrono::seconds(1);
  std::optional<WallTime> last_maintained_;
  bool maintain_more_ = false;
  bool failed_this_cycle_ = false;

  IncidentTracker incidents_;
  // Incidents of an earlier run found resolved when the store opened late, for the next Record.
  std::vector<FindingTransition> adopted_transitions_;
  std::deque<QueuedSamples> samples_;
  size_t queued_rows_ = 0;
  std::deque<QueuedEvents> events_;
  size_t queued_events_ = 0;
  std::map<int64_t, StoredFinding> pending_incidents_;  // the latest state of each, by id
  std::vector<BootRecord> boots_;
  std::vector<Remediation> remediations_;
  int64_t last_remediation_id_ = 0;  // the newest one read
  std::optional<LearnedGpuCount> learned_gpu_count_;
  std::vector<DiagnosticRecord> diagnostics_;
  std::optional<WallTime> diagnostics_read_at_;
  StoreHealth health_;
};

// Opens (creating when needed) the SQLite history at `path`, its directory included.
HistoryRecorder::StoreOpener OpenSqliteHistory(std::string path);

}  // namespace gpudoctor
