// The data of the correlation step (correlate.h) and of escalation over time
// (escalate.h): which findings tell one story, and when repeated trouble is
// worse news. The defaults are data/correlations.toml, compiled in; a config
// file's [correlations.ID] and [escalation] tables replace the keys they set.
//
//   HealthConfig config = DefaultHealthConfig();        // holds both
//   const CorrelationRule* cooling = config.correlations.Find("facility_cooling");
//   uint32_t restarts = config.escalation.AfterRestarts(79, /*fatal=*/true);  // 2
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "health/finding.h"

namespace gpudoctor {

// The kinds of correlation, in the order the step applies them.
enum class CorrelationKind { kNamedCause, kAbsorb, kEventBurst, kSharedCause };
const char* CorrelationKindName(CorrelationKind kind);  // "named_cause", "absorb", ...

// How an event burst is told when every Xid in it carries `tag` in the event
// catalog (data/events.toml cause tags: application, NVLink, power, ...).
struct BurstCase {
  std::string tag;
  std::string category;
  Remedy remedy;
};

struct CorrelationRule {
  std::string id;  // the root finding's id; for named_cause and absorb, the rule's name
  CorrelationKind kind = CorrelationKind::kSharedCause;
  bool enabled = true;
  std::string title;     // the start of the root's summary: "Room or rack cooling"
  std::string category;  // as a rule's: thermal, power, pcie, ... (triage weighs the root by it)
  Remedy remedy;

  // shared_cause: a GPU counts when a `gpu_rules` finding (warning or worse)
  // is about it; `companion_rules` findings of the GPUs that count and
  // `host_rules` findings join the root as its members.
  std::vector<std::string> gpu_rules;
  std::vector<std::string> companion_rules;
  std::vector<std::string> host_rules;
  // A GPU with a problem finding of one of these counts not: its own fault
  // explains what it shows (a card whose fan stopped is hot for that reason,
  // not because of the room).
  std::vector<std::string> explained_by;
  std::string symptom;     // what those GPUs show, in the root's summary: "past a thermal limit at once"
  double min_share = 0.5;  // of the server's GPUs, unless a host_rules finding is there
  uint32_t min_gpus = 2;   // shared_cause and event_burst

  // event_burst: Xids with times within `within` of the first.
  Duration within = std::chrono::seconds(10);
  std::vector<BurstCase> cases;  // the first whose tag every Xid carries applies

  // named_cause: group 1 of a match in an Xid line is the code of its cause.
  std::string cause_regex;

  // absorb: a `roots` finding takes in the `members` findings of its GPU and
  // subject (of any subject with `any_subject`: a lost GPU takes in its Xids).
  std::vector<std::string> roots;
  std::vector<std::string> members;
  bool any_subject = false;
};

struct CorrelationConfig {
  std::vector<CorrelationRule> rules;  // by kind (CorrelationKind's order), then by id
  const CorrelationRule* Find(std::string_view id) const;
};

// Per-Xid escalation thresholds; unset ones take EscalationConfig's defaults.
struct XidEscalation {
  std::optional<uint32_t> after_restarts;
  std::optional<uint32_t> fatal_count;
  std::optional<uint32_t> diagnose_count;
};

struct EscalationConfig {
  bool enabled = true;
  Duration lookback = std::chrono::hours(24 * 7);
  Duration occurrence_gap = std::chrono::minutes(1);
  uint32_t after_restarts = 2;  // fatal Xids; 0: off
  uint32_t fatal_count = 5;     // fatal Xids; 0: off
  Duration fatal_window = std::chrono::hours(24);
  Duration diagnose_window = std::chrono::hours(24);
  uint32_t remediation_count = 5;  // 0: off
  Duration remediation_window = std::chrono::hours(24 * 7);
  std::map<uint32_t, XidEscalation> xids;
  std::map<std::string, Remedy, std::less<>> remedies;  // by escalation finding id

  // The thresholds for Xid `code`; `fatal` is the event catalog's verdict.
  uint32_t AfterRestarts(uint32_t code, bool fatal) const;
  uint32_t FatalCount(uint32_t code, bool fatal) const;
  uint32_t DiagnoseCount(uint32_t code) const;
  const Remedy& RemedyFor(std::string_view finding_id) const;
};

}  // namespace gpudoctor
