#include "store/history_store.h"

#include "common/text.h"
#include "store/incident_tracker.h"

namespace gpudoctor {

const char* ResolutionName(Resolution resolution) {
  switch (resolution) {
    case Resolution::kRaw: return "raw";
    case Resolution::kMinute: return "1m";
    case Resolution::kHour: return "1h";
  }
  return "raw";
}

Duration BucketWidth(Resolution resolution) {
  switch (resolution) {
    case Resolution::kRaw: return Duration{0};
    case Resolution::kMinute: return std::chrono::minutes(1);
    case Resolution::kHour: return std::chrono::hours(1);
  }
  return Duration{0};
}

const char* TransitionName(FindingTransition::Kind kind) {
  switch (kind) {
    case FindingTransition::Kind::kOpened: return "opened";
    case FindingTransition::Kind::kResolved: return "resolved";
    case FindingTransition::Kind::kSeverityChanged: return "severity_changed";
    case FindingTransition::Kind::kAcknowledged: return "acknowledged";
  }
  return "opened";
}

bool ClosesIncident(FindingTransition::Kind kind) {
  return kind == FindingTransition::Kind::kResolved || kind == FindingTransition::Kind::kAcknowledged;
}

const char* RemediationKindName(Remediation::Kind kind) {
  return kind == Remediation::Kind::kReboot ? "reboot" : "ack";
}

std::string DescribeRemediation(const Remediation& remediation) {
  const std::string incident =
      "incident " + std::to_string(remediation.incident_id) + " (" + remediation.incident_key + ")";
  if (remediation.kind == Remediation::Kind::kReboot)
    return "reboot while " + incident + " was " + SeverityName(remediation.severity);
  std::string line = "acknowledged " + incident;
  if (!remediation.actor.empty()) line += " by " + remediation.actor;
  if (remediation.gpu_reset) line += ", GPU reset";
  if (!remediation.note.empty()) line += ": " + remediation.note;
  return line;
}

Result<std::vector<FindingTransition>> HistoryStore::UpsertFindings(std::span<const Finding> findings,
                                                                   WallTime now) {
  auto open = OpenIncidents();
  if (!open) return open.error();
  auto last_id = LastIncidentId();
  if (!last_id) return last_id.error();
  IncidentTracker incidents;
  incidents.Adopt(std::move(*open), *last_id, now);
  std::vector<FindingTransition> transitions = incidents.Update(findings, now);
  if (Status recorded = RecordIncidents(incidents.Touched()); !recorded) return recorded.error();
  return transitions;
}

Resolution ChooseResolution(WallTime from, WallTime until, WallTime newest, const RetentionPolicy& retention) {
  const Duration span = until - from;
  Resolution choice = span <= std::chrono::hours(6)        ? Resolution::kRaw
                      : span <= std::chrono::hours(24 * 7) ? Resolution::kMinute
                                                           : Resolution::kHour;
  if (choice == Resolution::kRaw && from < newest - retention.raw) choice = Resolution::kMinute;
  if (choice == Resolution::kMinute && from < newest - retention.minute) choice = Resolution::kHour;
  return choice;
}

bool MatchesGpu(const GpuIdentity& gpu, std::string_view selector) {
  if (auto index = ParseInt<uint32_t>(selector)) return gpu.index == *index;
  return !gpu.uuid.empty() && gpu.uuid == selector;
}

}  // namespace gpudoctor
