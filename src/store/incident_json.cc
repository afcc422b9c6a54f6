#include "store/incident_json.h"

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "health/finding_json.h"

namespace gpudoctor {

using nlohmann::json;

namespace {

void PutTime(json& out, const char* key, std::optional<WallTime> time) {
  out[key] = time ? json(FormatIsoUtc(*time)) : json(nullptr);
  out[std::string(key) + "_ms"] = time ? json(ToUnixMillis(*time)) : json(nullptr);
}

}  // namespace

json StoredFindingToJson(const StoredFinding& incident) {
  json out = FindingToJson(incident.finding);
  out["subject"] = incident.finding.subject.empty() ? json(nullptr) : json(incident.finding.subject);
  out["key"] = incident.key;
  out["incident_id"] = incident.incident_id;
  PutTime(out, "opened_at", incident.opened_at);
  PutTime(out, "last_seen", incident.last_seen);
  PutTime(out, "resolved_at", incident.resolved_at);
  return out;
}

WallTime TransitionTime(const FindingTransition& transition) {
  const StoredFinding& incident = transition.incident;
  switch (transition.kind) {
    case FindingTransition::Kind::kOpened:
      return incident.opened_at;
    case FindingTransition::Kind::kResolved:
    case FindingTransition::Kind::kAcknowledged:
      return incident.resolved_at.value_or(incident.last_seen);
    case FindingTransition::Kind::kSeverityChanged:
      return incident.last_seen;
  }
  return incident.last_seen;
}

json TransitionToJson(const FindingTransition& transition, std::string_view hostname, uint64_t suppressed) {
  json out = json::object();
  out["event"] = TransitionName(transition.kind);
  out["hostname"] = hostname;
  PutTime(out, "time", TransitionTime(transition));
  out["suppressed"] = suppressed;
  out["finding"] = StoredFindingToJson(transition.incident);
  return out;
}

}  // namespace gpudoctor
