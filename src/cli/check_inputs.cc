#include "cli/check_inputs.h"

#include <algorithm>

#include <fmt/format.h>

#include "cli/agent_history.h"
#include "cli/diag_history.h"
#include "common/text.h"
#include "health/catalog_event_grader.h"
#include "health/correlate/correlate.h"
#include "health/rules.h"
#include "host/command_runner.h"
#include "host/host_env.h"
#include "host/process_command_line.h"
#include "logs/bug_report.h"
#include "logs/catalog.h"
#include "logs/event_collector.h"
#include "logs/follow.h"
#include "logs/log_reader.h"

namespace gpudoctor {
namespace {

// Reads the captured logs; an error names the first file that cannot be
// opened under the input rule (common/input_file.h).
std::optional<SourceError> ReadCapturedLogs(const std::vector<std::string>& files, EventCollector& events,
                                            std::string& detail) {
  uint64_t lines = 0;
  std::string damaged;
  auto keep = [&](LogEvent&& event) { events.Add(std::move(event)); };
  for (const std::string& file : files) {
    // An nvidia-bug-report.sh log is read for its kernel log sections only.
    auto bug_report = ScanBugReportFile(file, {}, keep);
    if (!bug_report) return SourceError{"--logs: " + bug_report.error().message, exit_code::kNoInput};
    if (*bug_report) {
      lines += (*bug_report)->stats.lines;
      continue;
    }
    Result<ReadStats> stats = ScanLogFile(file, {}, keep);
    if (!stats) return SourceError{"--logs: " + stats.error().message, exit_code::kNoInput};
    lines += stats->lines;
    if (!stats->error.empty()) damaged += "; read only in part: " + stats->error;
  }
  detail = fmt::format("{} file(s), {} lines, {} events{}", files.size(), lines, events.seen(), damaged);
  return std::nullopt;
}

// The newest event time, if any event has one.
std::optional<WallTime> NewestEventTime(const std::vector<LogEvent>& events) {
  std::optional<WallTime> newest;
  for (const LogEvent& event : events)
    if (event.time && (!newest || *event.time > *newest)) newest = event.time;
  return newest;
}

// The agent's history at `path` (none: the inputs are not this machine's now).
void ReadAgentHistory(const std::string& path, CheckRun& run) {
  if (path.empty()) {
    run.sources.push_back({"agent history", "skipped", "captured or simulated input; --db names a history to read"});
    return;
  }
  run.host_history = HostHistory{.maintenance = std::vector<MaintenanceDone>{}};
  run.agent = ReadAgentRecord(path, run.judged_at, &*run.host_history);
  switch (run.agent->state) {
    case AgentRecord::State::kMissing: run.sources.push_back({"agent history", "not available", run.agent->note}); return;
    case AgentRecord::State::kUnreadable:
      run.sources.push_back({"agent history", "not readable", run.agent->note});
      return;
    case AgentRecord::State::kRead: break;
  }
  auto diagnostics = LoadLatestDiagnostics(path);
  if (!diagnostics) {
    run.sources.push_back({"agent history", "read in part",
                           fmt::format("{}, {} open finding(s); diagnostics not read: {}", path,
                                       run.agent->open.size(), diagnostics.error().message)});
    return;
  }
  run.diagnostics = std::move(*diagnostics);
  run.sources.push_back({"agent history", "read",
                         fmt::format("{}, {} open finding(s), {} diagnostic record(s)", path, run.agent->open.size(),
                                     run.diagnostics->size())});
}

}  // namespace

std::string AgentHistoryPath(const CommandContext& context, const CheckOptions& options) {
  if (!options.history_database.empty()) return options.history_database;
  const bool live = context.options.simulate.empty() && options.from_smi.empty() && options.log_files.empty();
  return live ? kDefaultHistoryDatabase : "";
}

void AddCheckInputOptions(CLI::App* command, CheckOptions& options) {
  command->add_option("--from-smi", options.from_smi,
                      "Judge a captured nvidia-smi output (-q -x, -q, table or csv) instead of NVML; implies --no-host");
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
  run.config.thresholds.xid_recent.window = *since;
  run.config.thresholds.log_errors.window = *since;

  auto made = MakeSnapshotSource(context, options.from_smi);
  if (made.error) {
    run.error = made.error;
    return run;
  }
  run.snapshot = made.source->Collect();
  run.snapshot_description = made.description;

  SubprocessRunner runner;
  LinuxHostEnv env("/", runner);
  if (options.no_host || !options.from_smi.empty()) {
    run.sources.push_back({"host signals", "skipped", options.no_host ? "--no-host" : "captured input (--from-smi)"});
  } else {
    run.host = CollectHostSignals(run.config.host, env);
    run.sources.push_back({"host signals", "read",
                           context.options.simulate.empty()
                               ? "this machine"
                               : "this machine; its PCI bus and NVIDIA module are not held against the simulated GPUs"});
  }

  if (options.no_logs) {
    run.sources.push_back({"kernel log", "skipped", "--no-logs"});
  } else if (!options.log_files.empty()) {
    EventCollector events({.keep_span = LogEventSpan(run.config)});
    std::string detail;
    if (auto error = ReadCapturedLogs(options.log_files, events, detail)) {
      run.error = error;
      return run;
    }
    run.events = events.Take();
    run.sources.push_back({"kernel log", "read", detail});
  } else {
    std::vector<std::string> notes;
    auto live = FindLiveLog(&notes);
    if (!live) {
      std::string why = live.error().message;
      for (const std::string& note : notes) why += "; " + note;
      run.sources.push_back({"kernel log", "not available", why});
    } else {
      EventCollector events({.keep_span = LogEventSpan(run.config)});
      ReadStats stats;
      Status status = ReadLiveLog(*live, ReadOptions{}, /*follow=*/false, {},
                                  [&](LogEvent&& event) { events.Add(std::move(event)); },
                                  [] { return false; }, &stats);
      if (!status.ok()) {
        run.sources.push_back({"kernel log", "not available", live->description + ": " + status.error().message});
      } else {
        run.live_log_path = live->path;
        run.sources.push_back({"kernel log", "read",
                               fmt::format("{}, {} lines, {} events", live->description, stats.lines, events.seen())});
        run.events = events.Take();
      }
    }
  }

  run.judged_at = SystemClock::Instance().Now();
  if (run.events && !options.log_files.empty()) {
    // A log copied from a dead machine is judged as of its last event.
    auto newest = NewestEventTime(*run.events);
    if (newest && *newest < run.judged_at - std::chrono::duration_cast<WallTime::duration>(*since)) run.judged_at = *newest;
  }

  ReadAgentHistory(AgentHistoryPath(context, options), run);

  CatalogEventGrader grader(LogCatalog::Builtin());
  HealthInput input;
  input.snapshot = &run.snapshot;
  input.host = run.host ? &*run.host : nullptr;
  input.log_events = run.events ? &*run.events : nullptr;
  input.event_grader = &grader;
  input.now = run.judged_at;
  input.agent = run.agent ? &*run.agent : nullptr;
  input.host_history = run.host_history ? &*run.host_history : nullptr;
  input.diagnostics = run.diagnostics ? &*run.diagnostics : nullptr;
  if (run.host) input.command_lines = CommandLinesFrom(env);  // this machine's processes, as its host signals are
  std::vector<Finding> findings = EvaluateRules(input, run.config, run.unchecked);
  if (run.agent) {
    for (Finding& finding : AgentOpenFindings(*run.agent, findings, input.now, run.config))
      findings.push_back(std::move(finding));
  }
  run.findings = Correlate(std::move(findings), input, run.config);
  return run;
}

}  // namespace gpudoctor
