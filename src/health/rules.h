// The health rules: a snapshot, host signals and log events in, findings out.
//
// Every rule reports each problem it sees as a warning, critical or unknown
// finding with its evidence, probable cause and next steps, or - when it had
// something to judge and found nothing wrong - one ok finding that says what
// it checked ("all 8 GPUs below 75 °C"). A rule with nothing to judge (no
// GPUs readable, nothing configured, a source not available) reports nothing.
// Rule ids and thresholds are documented in docs/findings.md.
//
//   HealthInput input;
//   input.snapshot = &snapshot;
//   input.host = &host_signals;       // optional
//   input.log_events = &events;       // optional
//   input.now = clock.Now();
//   std::vector<Finding> findings = EvaluateRules(input, DefaultHealthConfig());
//   int exit_status = ExitStatusFor(WorstSeverity(findings));
#pragma once

#include <string>
#include <vector>

#include "common/clock.h"
#include "health/agent_record.h"
#include "health/blocked_task_watch.h"
#include "health/event_grader.h"
#include "health/finding.h"
#include "health/health_config.h"
#include "health/maintenance.h"
#include "host/host_signals.h"
#include "host/process_command_line.h"
#include "logs/event.h"
#include "model/diagnostic.h"
#include "model/reported_condition.h"
#include "model/snapshot.h"

namespace gpudoctor {

struct HealthInput {
  const Snapshot* snapshot = nullptr;  // nullptr: no GPU data
  // An earlier snapshot of the same server, for counters that must be seen
  // rising (PCIe replays, NVLink errors). nullptr: those rules judge levels only.
  const Snapshot* previous = nullptr;
  const HostSignals* host = nullptr;                  // nullptr: host signals not collected
  const std::vector<LogEvent>* log_events = nullptr;  // nullptr: logs not read
  // The Xids NVML's event API delivered over the rules' window, when the
  // caller keeps them across snapshots (the agent). nullptr: the snapshot's own.
  const std::vector<XidEvent>* nvml_xid_events = nullptr;
  const EventGrader* event_grader = nullptr;          // nullptr: events graded by their own severity
  // How long the host's blocked tasks have stayed blocked, from a caller that
  // samples again and again (the agent). nullptr: this one sample, which
  // alone never makes a task hung.
  const BlockedTaskWatch* blocked_task_watch = nullptr;
  // The agent's history, for a one-shot command (check, triage). nullptr:
  // not looked for (the agent itself, captured or simulated inputs).
  const AgentRecord* agent = nullptr;
  // What the agent's history keeps about the host (maintenance done, the GPU
  // count it learned). nullptr: no history read.
  const HostHistory* host_history = nullptr;
  // The newest `gpudoctor diag` record of each GPU and test, from the agent's
  // history. nullptr: no history read.
  const std::vector<DiagnosticRecord>* diagnostics = nullptr;
  // What another tool's report in a capture concluded (`dcgmi health -c`), besides the snapshot's own
  // reported_conditions. Each becomes a finding of its rule; nullptr: none.
  const std::vector<ReportedCondition>* reported_conditions = nullptr;
  // Reads a GPU process's command line, for memory_high's `gpudoctor
  // trace-alloc -- COMMAND`. Empty: not read (a capture from another machine).
  ProcessCommandLines command_lines;
  WallTime now;                                       // from the caller's Clock
};

// Runs every enabled rule, in the order of kRuleIds (health/rule_ids.h).
// Never fails: a rule that cannot judge something says so in an unknown
// finding.
std::vector<Finding> EvaluateRules(const HealthInput& input, const HealthConfig& config);

// The finding diagnostic_failed makes of a faulty or hung `record` (its
// severity, evidence, cause and actions), for a caller that judges a run it
// just made (`gpudoctor slurm --diag-level`) as the agent's history will.
Finding DiagnosticFailedFinding(const DiagnosticRecord& record, const HealthConfig& config, WallTime now);

// Why a rule that had nothing to judge judged nothing, where it can say
// ("the GPUs are passively cooled and no chassis fan sensor can be read"):
// `check` shows it on the checklist line that stays unchecked.
struct UncheckedRule {
  std::string rule_id;
  std::string reason;
};

// As above, and adds to `unchecked` the reasons of the rules that judged nothing.
std::vector<Finding> EvaluateRules(const HealthInput& input, const HealthConfig& config,
                                   std::vector<UncheckedRule>& unchecked);

}  // namespace gpudoctor
