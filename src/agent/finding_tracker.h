// FindingTracker: turns each evaluation's list of findings into open/resolve
// transitions, the events that alerts are sent for and incidents recorded.
//
// A finding is identified by its rule id and the GPU it is about (FindingKey),
// so "temperature_high on GPU 3" opens once and stays open across samples
// until an evaluation no longer reports it.
//
//   FindingTracker tracker;
//   for (const FindingTransition& t : tracker.Update(engine.Evaluate(snapshot), clock.Now()))
//     alerts.Submit(t);
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/agent_view.h"
#include "health/finding.h"

namespace gpudoctor {

// "<id>" for host-wide findings, "<id>@<gpu>" otherwise, where <gpu> is the
// UUID when known, else the PCI bus id, else the index.
std::string FindingKey(const Finding& finding);

enum class TransitionKind { kOpened, kSeverityChanged, kResolved };
const char* TransitionKindName(TransitionKind kind);  // "opened", "severity_changed", "resolved"

struct FindingTransition {
  TransitionKind kind = TransitionKind::kOpened;
  std::string key;     // FindingKey(finding)
  Finding finding;     // for kResolved, the finding as it was last reported
  WallTime opened_at;  // when this finding first opened
  WallTime time;       // when the transition happened
  bool operator==(const FindingTransition&) const = default;
};

class FindingTracker {
 public:
  // Seeds the open set, e.g. from the store after a restart, so findings that
  // were already open are not announced again.
  void Restore(std::vector<OpenFinding> open);

  // `current` is everything the latest evaluation reported; findings with
  // severity ok are ignored. Returns the transitions in a stable order:
  // resolved, then severity changes, then opened, each by key.
  std::vector<FindingTransition> Update(const std::vector<Finding>& current, WallTime now);

  // Ordered as SortBySeverity.
  std::vector<OpenFinding> Open() const;

 private:
  std::map<std::string, OpenFinding> open_;  // by FindingKey
};

// Orders open findings worst first, then by id, then by GPU index.
void SortBySeverity(std::vector<OpenFinding>& findings);

}  // namespace gpudoctor
