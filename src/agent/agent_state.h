// AgentState: the agent's current picture, written by the sampling loop and
// read concurrently by the HTTP server. The one thread-safe AgentView.
//
// Readers get immutable copies (the snapshot is shared, never mutated), so a
// slow HTTP client never blocks sampling and a hung NVML probe never blocks
// /metrics: the server only ever sees the last published state.
//
//   AgentState state(clock.Now());
//   state.PublishSnapshot(std::make_shared<const Snapshot>(std::move(snapshot)));
//   for (const FindingTransition& t : state.UpdateFindings(findings, clock.Now()))
//     alerts.Submit(t);
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "agent/agent_view.h"
#include "agent/finding_tracker.h"

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

  // Replaces the open set with what the latest evaluation reported and
  // returns the transitions (see FindingTracker::Update).
  std::vector<FindingTransition> UpdateFindings(const std::vector<Finding>& current,
                                                WallTime now);
  // Seeds the open set after a restart (see FindingTracker::Restore).
  void RestoreFindings(std::vector<OpenFinding> open);

  std::shared_ptr<const Snapshot> LatestSnapshot() const override;
  std::vector<OpenFinding> OpenFindings() const override;
  AgentStatus Status() const override;

 private:
  void CountXidLocked(uint32_t gpu_index, uint64_t xid, WallTime time);

  mutable std::mutex mutex_;
  std::shared_ptr<const Snapshot> snapshot_;
  FindingTracker tracker_;
  std::vector<OpenFinding> open_;  // tracker_.Open(), cached for readers
  AgentStatus status_;
  std::map<uint32_t, GpuXidTally> xids_;
};

}  // namespace gpudoctor
