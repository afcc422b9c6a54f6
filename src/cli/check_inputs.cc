#include "cli/check_inputs.h"

#include "capture/capture.h"

#include "common/text.h"
#include "health/catalog_event_grader.h"
#include "logs/catalog.h"

namespace gpudoctor {

std::string AgentHistoryPath(const CommandContext& context, const CheckOptions& options) {
  if (!options.history_database.empty()) return options.history_database;
  const bool live = context.options.simulate.empty() && options.from_smi.empty() && options.log_files.empty();
  return live ? kDefaultHistoryDatabase : "";
}

void AddCheckInputOptions(CLI::App* command, CheckOptions& options) {
  command->add_option("--from,--from-smi", options.from_smi,
                      "Judge a capture instead of NVML, recognised by its content: nvidia-smi's table, -q (or -q -d "
                      "ECC, PAGE_RETIREMENT, ...), -q -x, --query-gpu csv, -L, nvlink -s, nvlink -e, topo -m, its "
                      "messages and warnings; nvidia-debugdump --list; an nvidia-bug-report log (its nvidia-smi -q "
                      "and kernel logs); dcgmi diag or dcgmi health -c output; gpu_burn's output; or a kernel, system "
                      "or fabric manager log alone. Nothing of this machine (host, kernel log, agent history) is "
                      "mixed in");
  command->add_option("--logs", options.log_files,
                      "Captured kernel or system logs (.gz decoded) instead of this machine's kernel log")
      ->expected(1, -1);
  command->add_option("--since", options.since, "How far back log events count (30m, 24h, 7d)")->capture_default_str();
  command->add_flag("--no-host", options.no_host, "Skip this machine's host signals (for captured inputs)");
  command->add_flag("--no-logs", options.no_logs, "Do not read any log");
  command->add_option("--db", options.history_database,
                      std::string("History of `gpudoctor agent`, read-only: its open findings (trends one look cannot "
                                  "see) join this run's. Default: ") +
                          kDefaultHistoryDatabase + " when judging this machine live");
}

CheckRun RunChecks(const CommandContext& context, const CheckOptions& options) {
  CheckRun run;
  auto since = ParseDuration(options.since);
  if (!since || since->count() <= 0) {
    run.error = SourceError{"--since: not a duration: " + options.since, exit_code::kUsage};
    return run;
  }
  CommandConfig config = LoadCommandConfig(context);
  if (config.error) {
    run.error = config.error;
    return run;
  }
  run.config = std::move(config.config);
  ApplyLogWindow(run.config, *since);

  // A capture (--from) is judged on what it holds; else live or simulated NVML.
  std::optional<Capture> capture;
  SnapshotSourceResult made;
  if (!options.from_smi.empty()) {
    bool not_recognised = false;
    auto read = ReadCapture(options.from_smi, &not_recognised);
    if (!read) {
      run.error = SourceError{"--from: " + read.error().message,
                              not_recognised ? exit_code::kDataError : exit_code::kNoInput};
      return run;
    }
    capture = std::move(*read);
    made.description = capture->Description();
    if (capture->snapshot) made.source = std::make_unique<FixedSnapshotSource>(std::move(*capture->snapshot));
  } else {
    made = MakeSnapshotSource(context);
    if (made.error) {
      run.error = made.error;
      return run;
    }
  }
  ThisMachine machine;
  run.gathered = Gather(made.source.get(), made.description,
                        {.origin = capture                               ? SnapshotOrigin::kCapture
                                   : !context.options.simulate.empty() ? SnapshotOrigin::kSimulation
                                                                       : SnapshotOrigin::kThisMachine,
                         .log_files = options.log_files,
                         .since = *since,
                         .no_host = options.no_host,
                         .no_logs = options.no_logs,
                         .history_database = AgentHistoryPath(context, options),
                         .capture = capture ? &*capture : nullptr},
                        run.config, machine.env());
  if (run.gathered.error) {
    run.error = run.gathered.error;
    return run;
  }
  CatalogEventGrader grader(LogCatalog::Builtin());
  run.assessment = Assess(run.gathered.Inputs(), run.config, grader);
  return run;
}

}  // namespace gpudoctor
