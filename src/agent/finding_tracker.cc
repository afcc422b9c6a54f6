#include "agent/finding_tracker.h"

#include <algorithm>
#include <tuple>

namespace gpudoctor {

std::string FindingKey(const Finding& finding) {
  if (!finding.gpu) return finding.id;
  const GpuRef& gpu = *finding.gpu;
  if (!gpu.uuid.empty()) return finding.id + "@" + gpu.uuid;
  if (!gpu.pci_bus_id.empty()) return finding.id + "@" + gpu.pci_bus_id;
  if (gpu.index) return finding.id + "@" + std::to_string(*gpu.index);
  if (!gpu.serial.empty()) return finding.id + "@" + gpu.serial;
  return finding.id;
}

const char* TransitionKindName(TransitionKind kind) {
  switch (kind) {
    case TransitionKind::kOpened: return "opened";
    case TransitionKind::kSeverityChanged: return "severity_changed";
    case TransitionKind::kResolved: return "resolved";
  }
  return "opened";
}

void FindingTracker::Restore(std::vector<OpenFinding> open) {
  open_.clear();
  for (OpenFinding& f : open) {
    std::string key = FindingKey(f.finding);
    open_.insert_or_assign(std::move(key), std::move(f));
  }
}

std::vector<FindingTransition> FindingTracker::Update(const std::vector<Finding>& current,
                                                      WallTime now) {
  std::map<std::string, const Finding*> reported;
  for (const Finding& f : current) {
    if (f.severity == Severity::kOk) continue;
    // Two reports of one key in one evaluation: keep the worse.
    auto [it, inserted] = reported.try_emplace(FindingKey(f), &f);
    if (!inserted && SeverityRank(f.severity) > SeverityRank(it->second->severity)) it->second = &f;
  }

  std::vector<FindingTransition> resolved, changed, opened;
  for (auto it = open_.begin(); it != open_.end();) {
    if (reported.contains(it->first)) {
      ++it;
      continue;
    }
    resolved.push_back({TransitionKind::kResolved, it->first, std::move(it->second.finding),
                        it->second.opened_at, now});
    it = open_.erase(it);
  }
  for (const auto& [key, finding] : reported) {
    auto it = open_.find(key);
    if (it == open_.end()) {
      open_.emplace(key, OpenFinding{*finding, now});
      opened.push_back({TransitionKind::kOpened, key, *finding, now, now});
      continue;
    }
    const bool severity_changed = it->second.finding.severity != finding->severity;
    it->second.finding = *finding;  // evidence and numbers move on every sample
    if (severity_changed) {
      changed.push_back(
          {TransitionKind::kSeverityChanged, key, *finding, it->second.opened_at, now});
    }
  }

  std::vector<FindingTransition> all = std::move(resolved);
  all.insert(all.end(), std::make_move_iterator(changed.begin()),
             std::make_move_iterator(changed.end()));
  all.insert(all.end(), std::make_move_iterator(opened.begin()),
             std::make_move_iterator(opened.end()));
  return all;
}

std::vector<OpenFinding> FindingTracker::Open() const {
  std::vector<OpenFinding> open;
  open.reserve(open_.size());
  for (const auto& [key, f] : open_) open.push_back(f);
  SortBySeverity(open);
  return open;
}

void SortBySeverity(std::vector<OpenFinding>& findings) {
  auto order = [](const OpenFinding& f) {
    const std::optional<GpuRef>& gpu = f.finding.gpu;
    return std::make_tuple(-SeverityRank(f.finding.severity), f.finding.id,
                           gpu && gpu->index ? static_cast<int64_t>(*gpu->index) : -1);
  };
  std::stable_sort(findings.begin(), findings.end(),
                   [&](const OpenFinding& a, const OpenFinding& b) { return order(a) < order(b); });
}

}  // namespace gpudoctor
