#include "assess/gather.h"

#include <fmt/format.h>

#include "assess/agent_history.h"
#include "assess/identity.h"
#include "host/process_command_line.h"
#include "logs/bug_report.h"
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
void ReadAgentHistory(const std::string& path, Gathered& gathered) {
  if (path.empty()) {
    gathered.sources.push_back(
        {"agent history", "skipped", "captured or simulated input; --db names a history to read"});
    return;
  }
  gathered.host_history = HostHistory{.maintenance = std::vector<MaintenanceDone>{}};
  gathered.agent = ReadAgentRecord(path, gathered.judged_at, &*gathered.host_history);
  switch (gathered.agent->state) {
    case AgentRecord::State::kMissing:
      gathered.sources.push_back({"agent history", "not available", gathered.agent->note});
      return;
    case AgentRecord::State::kUnreadable:
      gathered.sources.push_back({"agent history", "not readable", gathered.agent->note});
      return;
    case AgentRecord::State::kRead: break;
  }
  auto diagnostics = LoadLatestDiagnostics(path, gathered.judged_at);
  if (!diagnostics) {
    gathered.sources.push_back({"agent history", "read in part",
                                fmt::format("{}, {} open finding(s); diagnostics not read: {}", path,
                                            gathered.agent->open.size(), diagnostics.error().message)});
    return;
  }
  gathered.diagnostics = std::move(*diagnostics);
  gathered.sources.push_back({"agent history", "read",
                              fmt::format("{}, {} open finding(s), {} diagnostic record(s)", path,
                                          gathered.agent->open.size(), gathered.diagnostics->size())});
}

}  // namespace

AssessInputs Gathered::Inputs() const {
  return AssessInputs{.snapshot = has_snapshot ? &snapshot : nullptr,
                      .host = host ? &*host : nullptr,
                      .log_events = events ? &*events : nullptr,
                      .agent = agent ? &*agent : nullptr,
                      .host_history = host_history ? &*host_history : nullptr,
                      .diagnostics = diagnostics ? &*diagnostics : nullptr,
                      .reported_conditions = reported_conditions.empty() ? nullptr : &reported_conditions,
                      .command_lines = command_lines.empty()
                                           ? ProcessCommandLines()
                                           : [this](uint32_t pid, const std::string&) {
                                               auto it = command_lines.find(pid);
                                               return it == command_lines.end() ? std::vector<std::string>() : it->second;
                                             },
                      .now = judged_at};
}

void ApplyLogWindow(HealthConfig& config, Duration since) {
  config.thresholds.xid_recent.window = since;
  config.thresholds.log_errors.window = since;
}

LiveLogRead ReadThisMachinesKernelLog(EventCollector& events) {
  LiveLogRead read;
  std::vector<std::string> notes;
  auto live = FindLiveLog(&notes);
  if (!live) {
    read.detail = live.error().message;
    for (const std::string& note : notes) read.detail += "; " + note;
    return read;
  }
  ReadStats stats;
  Status status = ReadLiveLog(*live, ReadOptions{}, /*follow=*/false, {},
                              [&](LogEvent&& event) { events.Add(std::move(event)); }, [] { return false; }, &stats);
  if (!status.ok()) {
    read.detail = live->description + ": " + status.error().message;
    return read;
  }
  read.path = live->path;
  read.detail = fmt::format("{}, {} lines, {} events", live->description, stats.lines, events.seen());
  read.events = events.Take();
  return read;
}

ThisMachine::ThisMachine()
    : host_("/", runner_), env_{.clock = SystemClock::Instance(), .host = &host_, .read_live_log = {}} {}

Gathered Gather(SnapshotSource* source, std::string description, const GatherRequest& request,
                const HealthConfig& config, GatherEnv& env) {
  Gathered gathered;
  if (source != nullptr) {
    gathered.snapshot = source->Collect();
  } else {
    gathered.has_snapshot = false;
    gathered.snapshot.source = "capture";
  }
  gathered.snapshot_description = std::move(description);
  std::vector<std::string> log_files = request.log_files;
  if (request.capture != nullptr && !request.capture->log_file.empty())
    log_files.insert(log_files.begin(), request.capture->log_file);

  const bool elsewhere = request.origin != SnapshotOrigin::kThisMachine;
  const char* whose = request.origin == SnapshotOrigin::kCapture ? "captured input" : "simulated server";
  if (request.no_host || elsewhere || env.host == nullptr) {
    gathered.sources.push_back(
        {"host signals", "skipped",
         request.no_host ? "--no-host"
         : elsewhere     ? std::string(whose) + ": this machine's host is not the one judged"
                         : "not available here"});
  } else {
    gathered.host = CollectHostSignals(config.host, *env.host);
    gathered.sources.push_back({"host signals", "read", "this machine"});
    for (const GpuSnapshot& gpu : gathered.snapshot.gpus) {
      if (!gpu.processes.has_value()) continue;
      for (const ProcessInfo& process : gpu.processes.value()) {
        std::vector<std::string> argv = ProcessCommandLine(*env.host, process.pid, process.name);
        if (!argv.empty()) gathered.command_lines.emplace(process.pid, std::move(argv));
      }
    }
  }

  if (request.no_logs) {
    gathered.sources.push_back({"kernel log", "skipped", "--no-logs"});
  } else if (!log_files.empty()) {
    EventCollector events({.keep_span = LogEventSpan(config)});
    std::string detail;
    if (auto error = ReadCapturedLogs(log_files, events, detail)) {
      gathered.error = error;
      return gathered;
    }
    gathered.events = events.Take();
    gathered.sources.push_back({"kernel log", "read", detail});
  } else if (elsewhere) {
    // This machine's log says nothing about the machine judged.
    gathered.sources.push_back({"kernel log", "not read",
                                std::string(whose) + ": give its kernel log with --logs FILE to judge that too"});
  } else {
    EventCollector events({.keep_span = LogEventSpan(config)});
    LiveLogRead live = env.read_live_log ? env.read_live_log(events) : ReadThisMachinesKernelLog(events);
    if (!live.events) {
      gathered.sources.push_back({"kernel log", "not available", live.detail});
    } else {
      gathered.live_log_path = live.path;
      gathered.sources.push_back({"kernel log", "read", live.detail});
      gathered.events = std::move(live.events);
    }
  }

  gathered.judged_at = env.clock.Now();
  if (gathered.events && !log_files.empty()) {
    // A log copied from a dead machine is judged as of its last event.
    auto newest = NewestEventTime(*gathered.events);
    if (newest && *newest < gathered.judged_at - std::chrono::duration_cast<WallTime::duration>(request.since))
      gathered.judged_at = *newest;
  }

  ReadAgentHistory(request.history_database, gathered);
  if (request.capture != nullptr) {
    const Capture& capture = *request.capture;
    gathered.reported_conditions = capture.conditions;
    if (!capture.diagnostics.empty()) {
      // A report states no time: its tests count as just run.
      gathered.diagnostics = capture.diagnostics;
      for (DiagnosticRecord& record : *gathered.diagnostics)
        if (record.finished_at == WallTime{}) record.finished_at = gathered.judged_at;
      gathered.sources.push_back({"diagnostics", "read", fmt::format("{} test result(s) of {}", capture.diagnostics.size(),
                                                                     capture.path)});
    }
    if (capture.kind == CaptureKind::kDcgmiHealth)
      gathered.sources.push_back({"health watches", "read",
                                  fmt::format("{} condition(s) reported in {}", capture.conditions.size(), capture.path)});
  }
  RecallIdentities(gathered.snapshot, {.log_events = gathered.events ? &*gathered.events : nullptr,
                                        .history_database = gathered.agent && gathered.agent->state ==
                                                                                  AgentRecord::State::kRead
                                                                ? request.history_database
                                                                : std::string(),
                                        .now = gathered.judged_at});
  return gathered;
}

}  // namespace gpudoctor
