// What `check`, `triage`, `report`, `status`, `npd` and `slurm` judge: the
// command line's choice of inputs (captured or live, which logs, the agent's
// history) gathered once (assess/gather.h) and judged once (assess/assessment.h).
//
//   CheckOptions options;                       // filled by AddCheckInputOptions
//   CheckRun run = RunChecks(context, options);
//   if (run.error) return Fail(*run.error);
//   int status = run.assessment.ExitStatus();
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "assess/assessment.h"
#include "assess/gather.h"
#include "cli/commands.h"
#include "cli/sources.h"
#include "health/health_config.h"

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

struct CheckRun {
  std::optional<SourceError> error;  // set: nothing below is meaningful
  HealthConfig config;               // with the log window of --since
  Gathered gathered;
  Assessment assessment;
};

CheckRun RunChecks(const CommandContext& context, const CheckOptions& options);

}  // namespace gpudoctor
