#include "store/incident_tracker.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "store/maintenance_plan.h"

namespace gpudoctor {

IncidentTracker::Adoption IncidentTracker::Adopt(std::vector<StoredFinding> stored_open, int64_t last_stored_id,
                                                 WallTime now) {
  Adoption adoption;
  last_id_ = std::max(last_id_, last_stored_id);
  for (const StoredFinding& incident : stored_open) last_id_ = std::max(last_id_, incident.incident_id);
  const bool first_adoption = !adopted_;
  adopted_ = true;
  if (!updated_) {
    // Nothing judged yet: the store's picture is the current one.
    open_ = std::move(stored_open);
    touched_.clear();
    return adoption;
  }

  std::map<std::string, StoredFinding*> stored_by_key;
  for (StoredFinding& incident : stored_open) stored_by_key[incident.key] = &incident;
  std::map<int64_t, int64_t> new_ids;
  for (StoredFinding& incident : open_) {
    auto match = stored_by_key.find(incident.key);
    if (match == stored_by_key.end()) continue;
    StoredFinding& stored = *match->second;
    if (incident.incident_id != stored.incident_id) new_ids[incident.incident_id] = stored.incident_id;
    incident.incident_id = stored.incident_id;
    incident.opened_at = std::min(incident.opened_at, stored.opened_at);
    stored_by_key.erase(match);
  }
  if (first_adoption) {
    // provisional_ids_ is newest last, so ids keep the order incidents opened in.
    for (int64_t provisional : provisional_ids_) {
      if (!new_ids.contains(provisional)) new_ids[provisional] = ++last_id_;
    }
    for (StoredFinding& incident : open_) {
      if (auto it = new_ids.find(incident.incident_id); it != new_ids.end()) incident.incident_id = it->second;
    }
    provisional_ids_.clear();
  }
  adoption.renumbered.assign(new_ids.begin(), new_ids.end());

  std::vector<StoredFinding> resolved;
  for (StoredFinding& stored : stored_open) {
    if (!stored_by_key.contains(stored.key)) continue;  // matched above
    stored.resolved_at = now;
    adoption.resolved.push_back({FindingTransition::Kind::kResolved, stored});
    resolved.push_back(std::move(stored));
  }
  SetTouched(std::move(resolved));
  return adoption;
}

std::vector<FindingTransition> IncidentTracker::Update(std::span<const Finding> findings, WallTime now) {
  updated_ = true;
  const std::vector<Finding> judged = WithoutAcknowledged(findings);
  const FindingPlan plan = PlanFindingUpdate(open_, judged);
  std::vector<FindingTransition> transitions;
  std::vector<StoredFinding> still_open;
  std::vector<StoredFinding> resolved;
  for (const auto& [incident, finding] : plan.to_refresh) {
    StoredFinding row = *incident;
    const bool severity_changed = row.finding.severity != finding->severity;
    row.finding = *finding;
    row.last_seen = now;
    if (severity_changed) transitions.push_back({FindingTransition::Kind::kSeverityChanged, row});
    still_open.push_back(std::move(row));
  }
  for (const StoredFinding* incident : plan.to_resolve) {
    StoredFinding row = *incident;
    row.resolved_at = now;
    transitions.push_back({FindingTransition::Kind::kResolved, row});
    resolved.push_back(std::move(row));
  }
  for (const Finding* finding : plan.to_open) {
    StoredFinding row;
    row.incident_id = NewId();
    if (!adopted_) provisional_ids_.push_back(row.incident_id);
    row.key = FindingKey(*finding);
    row.finding = *finding;
    row.opened_at = row.last_seen = now;
    transitions.push_back({FindingTransition::Kind::kOpened, row});
    still_open.push_back(std::move(row));
  }
  // Still in the order they opened: refreshed ones keep theirs, new ones follow.
  open_ = std::move(still_open);
  SetTouched(std::move(resolved));
  return transitions;
}

std::vector<FindingTransition> IncidentTracker::Acknowledge(int64_t incident_id, WallTime at) {
  auto acked = std::find_if(open_.begin(), open_.end(),
                            [&](const StoredFinding& incident) { return incident.incident_id == incident_id; });
  if (acked == open_.end()) return {};
  const std::string root_key = acked->key;
  std::vector<FindingTransition> transitions;
  std::vector<StoredFinding> resolved;
  std::erase_if(open_, [&](const StoredFinding& incident) {
    if (incident.key != root_key && incident.finding.part_of != root_key) return false;
    StoredFinding row = incident;
    row.resolved_at = std::max(at, row.opened_at);
    acknowledged_[row.key] = {row.finding.severity, at};
    transitions.push_back({FindingTransition::Kind::kAcknowledged, row});
    resolved.push_back(std::move(row));
    return true;
  });
  SetTouched(std::move(resolved));
  return transitions;
}

void IncidentTracker::RestoreAcknowledgement(const std::string& key, Severity severity, WallTime at) {
  acknowledged_[key] = {severity, at};
}

std::vector<Finding> IncidentTracker::WithoutAcknowledged(std::span<const Finding> findings) {
  if (acknowledged_.empty()) return {findings.begin(), findings.end()};
  std::set<std::string> still_quiet;
  std::set<std::string> came_back;
  for (const Finding& finding : findings) {
    const std::string key = FindingKey(finding);
    auto it = acknowledged_.find(key);
    if (it == acknowledged_.end()) continue;
    const bool worse = SeverityRank(finding.severity) > SeverityRank(it->second.severity);
    const bool newer = finding.newest_event_at && *finding.newest_event_at > it->second.at;
    (worse || newer ? came_back : still_quiet).insert(key);
  }
  // Cleared or back: the acknowledgement is spent, and the next finding opens a new incident.
  std::erase_if(acknowledged_, [&](const auto& entry) {
    return !still_quiet.contains(entry.first) || came_back.contains(entry.first);
  });
  std::vector<Finding> kept;
  for (const Finding& finding : findings)
    if (!acknowledged_.contains(FindingKey(finding))) kept.push_back(finding);
  return kept;
}

void IncidentTracker::SetTouched(std::vector<StoredFinding> resolved) {
  touched_ = std::move(resolved);
  touched_.insert(touched_.end(), open_.begin(), open_.end());
}

}  // namespace gpudoctor
