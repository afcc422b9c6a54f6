// AgentRecord: what the agent's history holds now, for the one-shot commands.
//
// `check` and `triage` look once; the agent has watched for hours and judged
// what one look cannot (a GPU stuck at 100%, replay counters rising, a task
// blocked for minutes). The caller reads the history (src/store) into this
// plain record; the rule agent_history says whether it is fresh, and
// AgentOpenFindings brings the agent's open findings into the command's own.
//
//   AgentRecord record = ...;                    // cli: ReadAgentRecord(path, now)
//   input.agent = &record;                       // HealthInput: agent_history judges it
//   std::vector<Finding> findings = EvaluateRules(input, config);
//   for (Finding& f : AgentOpenFindings(record, findings, input.now, config)) findings.push_back(std::move(f));
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "health/finding.h"

namespace gpudoctor {

struct HealthConfig;

// A finding the agent holds open, with its times.
struct AgentFinding {
  Finding finding;
  WallTime opened_at;
  WallTime last_seen;
};

struct AgentRecord {
  enum class State { kMissing, kUnreadable, kRead };
  State state = State::kMissing;
  std::string database;
  std::string note;                     // why there is no record (kMissing, kUnreadable)
  std::optional<WallTime> last_sample;  // newest GPU sample; nullopt: none recorded
  std::vector<AgentFinding> open;

  // When the agent last wrote: its newest sample, or an open finding it
  // refreshed (an agent whose driver is down samples no GPU, yet still judges).
  std::optional<WallTime> LastActive() const;
  // Read, and active within `stale_after` before `now`.
  bool FreshAt(WallTime now, Duration stale_after) const;
};

// The agent's open findings that the command's own `findings` do not already
// hold, when the record is fresh (agent_history, [rules.agent_history]
// stale_after): the trend detectors', and those of rules the agent judges
// better over time (hung tasks, rising counters). Each says its age and the
// agent's last sample. A stale record adds none: agent_history lists them.
std::vector<Finding> AgentOpenFindings(const AgentRecord& record, const std::vector<Finding>& findings, WallTime now,
                                       const HealthConfig& config);

}  // namespace gpudoctor
