// What `check`, `triage` and `report` judge: one snapshot, the host signals,
// the kernel log and the agent's open findings and diagnostics
// (cli/agent_history.h, cli/diag_history.h), run through every health rule
// once and told as one story per incident (health/correlate/correlate.h).
//
//   CheckOptions options;                       // filled by AddCheckInputOptions
//   CheckRun run = RunChecks(context, options);
//   if (run.error) return Fail(*run.error);
//   int status = ExitStatusFor(WorstSeverity(run.findings));
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/sources.h"
#include "common/clock.h"
#include "health/agent_record.h"
#include "health/maintenance.h"
#include "health/finding.h"
#include "health/health_config.h"
#include "health/rules.h"
#include "host/host_signals.h"
#include "logs/event.h"
#include "model/diagnostic.h"
#include "model/snapshot.h"

namespace gpudoctor {

struct CheckOptions {
  std::string from_smi;                // captured nvidia-smi output; empty: NVML (live or --simulate)
  std::vector<std::string> log_files;  // captured logs; empty: this machine's kernel log
  std::string since = "24h";           // how far back log events count
  bool no_host = false;                // skip host signals (implied by --from-smi)
  bool no_logs = false;                // skip the kernel log entirely
  std::string history_database;        // --db; empty: the agent's default path, on a live run only
};

// The agent history a run reads: --db, else the agent's default path when the
// run judges this machine live; empty when the inputs are captured or simulated.
std::string AgentHistoryPath(const CommandContext& context, const CheckOptions& options);

// Adds --from-smi, --logs, --since, --no-host, --no-logs and --db to `command`.
void AddCheckInputOptions(CLI::App* command, CheckOptions& options);

// One input that could not be used; the run goes on without it.
struct SourceNote {
  std::string source;  // "host signals", "kernel log"
  std::string status;  // "read", "not available", "skipped"
  std::string detail;  // what was read, or why not
};

struct CheckRun {
  std::optional<SourceError> error;  // set: nothing below is meaningful
  HealthConfig config;
  Snapshot snapshot;
  std::string snapshot_description;
  std::optional<HostSignals> host;              // nullopt: not collected
  std::optional<std::vector<LogEvent>> events;  // nullopt: no log read
  std::string live_log_path;                    // the live log read, when one was
  std::vector<SourceNote> sources;
  // The time the rules judged against: now, or the end of captured logs that
  // ended more than the --since window ago (a dead machine's log).
  WallTime judged_at;
  std::vector<Finding> findings;
  std::vector<UncheckedRule> unchecked;  // why rules with nothing to judge judged nothing
  std::optional<AgentRecord> agent;      // the agent's history; nullopt: not looked for
  // Maintenance done and the learned GPU count, for a run on this machine
  // now (empty when no history holds them); nullopt: not this machine's now.
  std::optional<HostHistory> host_history;
  // The newest gpudoctor diag record of each GPU and test in the agent's
  // history (diagnostic_failed judges them); nullopt: no history read.
  std::optional<std::vector<DiagnosticRecord>> diagnostics;
};

CheckRun RunChecks(const CommandContext& context, const CheckOptions& options);

}  // namespace gpudoctor
