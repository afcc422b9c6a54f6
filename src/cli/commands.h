// The command-line interface: one Register function per subcommand, each in
// its own file (cmd_<name>.cc). main.cc builds the CLI11 app from them.
//
// A command's callback stores its exit status in `context.exit_code`; the
// codes are documented in docs/exit-codes.md.
#pragma once

#include <chrono>
#include <string>

#include <CLI/CLI.hpp>

#include "assess/history_path.h"
#include "common/exit_codes.h"

namespace gpudoctor {

// Options every command accepts; filled by main.cc before the command runs.
struct GlobalOptions {
  std::string nvml_library;        // --nvml-lib or $GPUDOCTOR_NVML_LIB; empty: libnvidia-ml.so.1
  std::string simulate;            // --simulate SCENARIO: run against the fake NVML library
  double probe_deadline_s = 10.0;  // --probe-timeout
  bool json = false;               // --json
  std::string color = "auto";      // --color auto|always|never
  std::string config_path;         // the config file every command reads (cli/config_file.h); "" when none
  std::string config_label = "--config";  // how messages name it: --config, GPUDOCTOR_CONFIG or config
  std::string config_how;          // why this file: "named by --config", "the default location", ...
};

struct CommandContext {
  GlobalOptions options;
  int exit_code = exit_code::kOk;
  std::string executable_path;  // absolute path of this binary, for the probe helper
};

void RegisterStatusCommand(CLI::App& app, CommandContext& context);
void RegisterLogsCommand(CLI::App& app, CommandContext& context);
void RegisterExplainCommand(CLI::App& app, CommandContext& context);
void RegisterHistoryCommand(CLI::App& app, CommandContext& context);
void RegisterAckCommand(CLI::App& app, CommandContext& context);
void RegisterMaintenanceCommand(CLI::App& app, CommandContext& context);
void RegisterAgentCommand(CLI::App& app, CommandContext& context);
void RegisterCheckCommand(CLI::App& app, CommandContext& context);
void RegisterTriageCommand(CLI::App& app, CommandContext& context);
void RegisterReportCommand(CLI::App& app, CommandContext& context);
void RegisterDiagCommand(CLI::App& app, CommandContext& context);
void RegisterSlurmCommand(CLI::App& app, CommandContext& context);
void RegisterNpdCommand(CLI::App& app, CommandContext& context);
void RegisterFleetCommand(CLI::App& app, CommandContext& context);
void RegisterConfigCommand(CLI::App& app, CommandContext& context);
void RegisterTraceAllocCommand(CLI::App& app, CommandContext& context);

// The hidden `__diag-worker` command: one GPU's diagnostic, run by `diag` (diag/diag_run.h).
int RunDiagWorkerCommandLine(int argc, char** argv);

}  // namespace gpudoctor
