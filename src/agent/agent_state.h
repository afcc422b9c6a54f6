// AgentState: the agent's current picture, written by the sampling loop and
// read concurrently by the HTTP server. The one thread-safe AgentView.
//
// Readers get immutable copies (the snapshot is shared, never mutated), so a
// slow HTTP client never blocks sampling and a hung NVML probe never blocks
// /metrics: the server only ever sees the last published state.
//
//   AgentState state(clock.Now());
//   state.PublishSnapshot(std::make_shared<const Snapshot>(std::move(snapshot)));
//   auto transitions = store.UpsertFindings(findings, now);        // durable first
//   state.SetOpenFindings(*store.QueryFindings({.until = now, .open_only = true}));
//   state.SetChecklist(BuildOpenChecklist(open, assessment.checklist, config.checklist).items);
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "agent/agent_view.h"

namespace gpudoctor {

class AgentState final : public AgentView {
 public:
  explicit AgentState(WallTime started_at);

  // Makes `snapshot` the latest one. Counts its probe hangs and the Xids in
  // its xid_events (NVML's event API) toward the status counters.
  void PublishSnapshot(std::shared_ptr<const Snapshot> snapshot);

  // Counts an Xid that did not arrive in a snapshot, e.g. one read from the
  // kernel log. Do not report one Xid through both paths.
  void RecordXid(uint32_t gpu_index, uint64_t xid, WallTime time);

  // Replaces the open findings; resolved incidents in `open` are dropped.
  void SetOpenFindings(std::vector<StoredFinding> open);

  // Replaces the checklist (AgentView::ChecklistItems); the items' `findings` are dropped.
  void SetChecklist(std::vector<ChecklistItem> items);

  // Records how the history store is doing (AgentStatus::store).
  void SetStoreHealth(StoreHealth health);

  std::shared_ptr<const Snapshot> LatestSnapshot() const override;
  std::vector<StoredFinding> OpenFindings() const override;
  std::vector<ChecklistItem> ChecklistItems() const override;
  AgentStatus Status() const override;

 private:
  void CountXidLocked(uint32_t gpu_index, uint64_t xid, WallTime time);

  mutable std::mutex mutex_;
  std::shared_ptr<const Snapshot> snapshot_;
  std::vector<StoredFinding> open_;
  std::vector<ChecklistItem> checklist_;
  AgentStatus status_;
  std::map<uint32_t, GpuXidTally> xids_;
};

// Orders findings worst severity first, then by id, then by GPU index
// (host-wide findings first).
void SortBySeverity(std::vector<StoredFinding>& findings);

}  // namespace gpudoctor
