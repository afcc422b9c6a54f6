#include "agent/agent_state.h"

#include <algorithm>
#include <tuple>

namespace gpudoctor {

AgentState::AgentState(WallTime started_at) { status_.started_at = started_at; }

void AgentState::PublishSnapshot(std::shared_ptr<const Snapshot> snapshot) {
  if (!snapshot) return;
  std::lock_guard lock(mutex_);
  status_.last_sample_at = snapshot->taken_at;
  ++status_.samples_total;
  status_.probe_hangs_total += snapshot->hangs.size();
  for (const XidEvent& xid : snapshot->xid_events) CountXidLocked(xid.gpu_index, xid.xid, xid.time);
  snapshot_ = std::move(snapshot);
  ++status_.generation;
}

void AgentState::RecordXid(uint32_t gpu_index, uint64_t xid, WallTime time) {
  std::lock_guard lock(mutex_);
  CountXidLocked(gpu_index, xid, time);
  ++status_.generation;
}

void AgentState::CountXidLocked(uint32_t gpu_index, uint64_t xid, WallTime time) {
  GpuXidTally& tally = xids_[gpu_index];
  tally.gpu_index = gpu_index;
  ++tally.count;
  if (tally.count == 1 || time >= tally.last_seen) {
    tally.last_xid = xid;
    tally.last_seen = time;
  }
}

void AgentState::SetOpenFindings(std::vector<StoredFinding> open) {
  std::erase_if(open, [](const StoredFinding& f) { return !f.open(); });
  SortBySeverity(open);
  std::lock_guard lock(mutex_);
  open_ = std::move(open);
  ++status_.generation;
}

void AgentState::SetChecklist(std::vector<ChecklistItem> items) {
  for (ChecklistItem& item : items) item.findings.clear();  // indices into findings the state does not hold
  std::lock_guard lock(mutex_);
  checklist_ = std::move(items);
  ++status_.generation;
}

void AgentState::SetStoreHealth(StoreHealth health) {
  std::lock_guard lock(mutex_);
  if (status_.store == health) return;
  status_.store = std::move(health);
  ++status_.generation;
}

std::shared_ptr<const Snapshot> AgentState::LatestSnapshot() const {
  std::lock_guard lock(mutex_);
  return snapshot_;
}

std::vector<StoredFinding> AgentState::OpenFindings() const {
  std::lock_guard lock(mutex_);
  return open_;
}

std::vector<ChecklistItem> AgentState::ChecklistItems() const {
  std::lock_guard lock(mutex_);
  return checklist_;
}

AgentStatus AgentState::Status() const {
  std::lock_guard lock(mutex_);
  AgentStatus status = status_;
  status.xids.reserve(xids_.size());
  for (const auto& [index, tally] : xids_) status.xids.push_back(tally);
  return status;
}

void SortBySeverity(std::vector<StoredFinding>& findings) {
  auto order = [](const StoredFinding& f) {
    const std::optional<GpuRef>& gpu = f.finding.gpu;
    return std::make_tuple(-SeverityRank(f.finding.severity), std::string_view(f.finding.id),
                           gpu && gpu->index ? static_cast<int64_t>(*gpu->index) : -1);
  };
  std::stable_sort(findings.begin(), findings.end(),
                   [&](const StoredFinding& a, const StoredFinding& b) { return order(a) < order(b); });
}

}  // namespace gpudoctor
