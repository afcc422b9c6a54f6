// Assessment: the one judgement of a machine. Everything gathered about it
// (the GPUs now, the host, the kernel log, the agent's history and what it
// watched over time, the last diagnostics) goes through every health rule
// once and is told as one story per incident; the result names each GPU with
// the identity it is known by and its health, folds the findings into the
// weekly checklist, and says what could not be checked and why.
//
// status, check, triage, report, npd, slurm and the agent only render an
// Assessment, so they cannot disagree about the same inputs.
//
//   AssessInputs inputs{.snapshot = &snapshot, .log_events = &events, .now = clock.Now()};
//   Assessment assessment = Assess(inputs, config, grader);
//   for (const GpuVerdict& gpu : assessment.gpus) ... gpu.health ... gpu.identity ...
//   return assessment.ExitStatus();   // Nagios: 0 ok, 1 warning, 2 critical, 3 unknown
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "assess/identity.h"
#include "common/clock.h"
#include "health/agent_record.h"
#include "health/blocked_task_watch.h"
#include "health/checklist.h"
#include "health/event_grader.h"
#include "health/finding.h"
#include "health/health_config.h"
#include "health/maintenance.h"
#include "health/rules.h"
#include "host/host_signals.h"
#include "host/process_command_line.h"
#include "logs/event.h"
#include "model/diagnostic.h"
#include "model/snapshot.h"

namespace gpudoctor {

// What one judgement is made of. Every pointer may be null: that source was
// not read, and the rules that need it judge nothing (Assessment::unchecked).
struct AssessInputs {
  const Snapshot* snapshot = nullptr;
  // An earlier snapshot, for counters seen rising (the agent). Null: levels only.
  const Snapshot* previous = nullptr;
  const HostSignals* host = nullptr;
  const std::vector<LogEvent>* log_events = nullptr;
  // The Xids NVML's event API delivered over the rules' window (the agent).
  const std::vector<XidEvent>* nvml_xid_events = nullptr;
  const BlockedTaskWatch* blocked_task_watch = nullptr;
  // The agent's history as a one-shot command reads it: its open findings join.
  const AgentRecord* agent = nullptr;
  const HostHistory* host_history = nullptr;
  const std::vector<DiagnosticRecord>* diagnostics = nullptr;
  // What another tool's captured report concluded (`dcgmi health -c`); each joins as a finding of its rule.
  const std::vector<ReportedCondition>* reported_conditions = nullptr;
  // What only a watcher over time sees: the agent's trend detectors and
  // escalations, judged with the rest.
  std::vector<Finding> watched;
  // Reads a GPU process's command line (memory_high's trace-alloc advice).
  // Empty: not read, as for a capture from another machine.
  ProcessCommandLines command_lines;
  WallTime now;
};

// One GPU as the assessment names it.
struct GpuVerdict {
  uint32_t index = 0;
  // Uuid, serial and bus id: as read now, or the last known ones for a GPU
  // that no longer answers (from_memory).
  GpuRef identity;
  std::string name;               // the model, "" when not known
  bool identity_from_memory = false;
  // How the identity above is known: last known when remembered, unknown when
  // it holds no uuid, serial or bus id, else read.
  IdentityKnowledge Knowledge() const;
  std::string identity_source;    // where a remembered identity comes from ("the agent's history", "the kernel log")
  Severity health = Severity::kOk;  // the worst finding about it
  std::vector<size_t> findings;     // indices into Assessment::findings, worst first
};

struct Assessment {
  // Correlated (health/correlate): a finding told under a root cause names
  // it in part_of. Ok findings say what was checked and found well.
  std::vector<Finding> findings;
  std::vector<UncheckedRule> unchecked;  // rules that had nothing to judge, and why
  Checklist checklist;                   // the weekly checklist over `findings`
  std::vector<GpuVerdict> gpus;          // one per GPU of the snapshot, by index
  Severity worst = Severity::kOk;

  int ExitStatus() const { return ExitStatusFor(worst); }
  // The problems (warning and critical) worst first; among equals, a root or
  // a finding that stands alone before those told under a root.
  std::vector<const Finding*> Problems() const;
  const GpuVerdict* Gpu(uint32_t index) const;
};

Assessment Assess(const AssessInputs& inputs, const HealthConfig& config, const EventGrader& grader);

}  // namespace gpudoctor
