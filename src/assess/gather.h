// Gathering what the one-shot commands judge: the snapshot they were given,
// this machine's host signals, the kernel log (this machine's, or captured
// files), and the agent's history (its open findings, maintenance and last
// diagnostics). Each source that cannot be used is a note, never a failure,
// except a file the command line names.
//
// A capture (nvidia-smi output from another machine) or a simulated server is
// judged on what was captured or simulated and the logs given with it:
// nothing of the machine running the command (its host signals, its kernel
// log, its agent's history) is mixed in.
//
//   GatherEnv env{.clock = SystemClock::Instance(), .host = &linux_host};
//   Gathered gathered = Gather(*source, "simulated: x.toml", request, config, env);
//   if (gathered.error) return Fail(*gathered.error);
//   Assessment assessment = Assess(gathered.Inputs(), config, grader);
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "assess/assessment.h"
#include "capture/capture.h"
#include "common/clock.h"
#include "common/exit_codes.h"
#include "health/agent_record.h"
#include "health/health_config.h"
#include "health/maintenance.h"
#include "host/command_runner.h"
#include "host/host_env.h"
#include "host/host_signals.h"
#include "logs/event.h"
#include "logs/event_collector.h"
#include "model/diagnostic.h"
#include "model/snapshot.h"
#include "nvml/collector.h"

namespace gpudoctor {

// Whose the snapshot is: this machine's GPUs now, or another machine's.
enum class SnapshotOrigin { kThisMachine, kCapture, kSimulation };

struct GatherRequest {
  SnapshotOrigin origin = SnapshotOrigin::kThisMachine;
  std::vector<std::string> log_files;   // captured logs; empty: this machine's kernel log
  Duration since = std::chrono::hours(24);  // how far back log events count
  bool no_host = false;                 // skip this machine's host signals
  bool no_logs = false;                 // read no log at all
  std::string history_database;         // the agent's history to read; empty: none
  // The capture judged (origin kCapture): its diagnostics and reported conditions join, and its own log is
  // read with the log_files. Null: none.
  const Capture* capture = nullptr;
};

// One input and what became of it: "read", "not available", "skipped".
struct SourceNote {
  std::string source;  // "host signals", "kernel log", "agent history"
  std::string status;
  std::string detail;  // what was read, or why not
};

// This machine's kernel log as gathering reads it: the events, or why not.
struct LiveLogRead {
  std::optional<std::vector<LogEvent>> events;  // nullopt: not read
  std::string path;                             // the log read, when one was
  std::string detail;                           // what was read, or why not
};

// What gathering reads besides the snapshot; tests replace every part.
struct GatherEnv {
  const Clock& clock;
  HostEnv* host = nullptr;  // null: host signals cannot be read here
  // Reads this machine's kernel log into `events`; default: /dev/kmsg,
  // journald or the syslog files (logs/follow.h).
  std::function<LiveLogRead(EventCollector& events)> read_live_log;
};

struct Gathered {
  std::optional<SourceError> error;  // a named input cannot be used: nothing below is meaningful
  Snapshot snapshot;
  bool has_snapshot = true;  // false: no GPU readings (a captured log or dcgmi report alone)
  std::vector<ReportedCondition> reported_conditions;  // a captured report's (dcgmi health -c)
  std::string snapshot_description;
  std::optional<HostSignals> host;              // nullopt: not collected
  std::optional<std::vector<LogEvent>> events;  // nullopt: no log read
  std::string live_log_path;                    // the live log read, when one was
  std::vector<SourceNote> sources;
  // The time the rules judge against: now, or the end of captured logs that
  // ended more than the --since window ago (a dead machine's log).
  WallTime judged_at;
  std::optional<AgentRecord> agent;  // nullopt: no history looked for
  std::optional<HostHistory> host_history;
  std::optional<std::vector<DiagnosticRecord>> diagnostics;
  // The command lines of the GPU processes, by pid, read from this machine's
  // /proc with its host signals (never for a capture or a simulation).
  std::map<uint32_t, std::vector<std::string>> command_lines;

  // The assessment's inputs, pointing into this.
  AssessInputs Inputs() const;
};

// The log window the rules judge: events of the last `since` count.
void ApplyLogWindow(HealthConfig& config, Duration since);

// `source` null: no GPU readings to judge (a capture that holds none).
Gathered Gather(SnapshotSource* source, std::string description, const GatherRequest& request,
                const HealthConfig& config, GatherEnv& env);

// The default live-log reader (GatherEnv::read_live_log).
LiveLogRead ReadThisMachinesKernelLog(EventCollector& events);

// The environment of a command run on this machine: the system clock, the
// host under "/" with real commands, and the live kernel log.
class ThisMachine {
 public:
  ThisMachine();
  GatherEnv& env() { return env_; }

 private:
  SubprocessRunner runner_;
  LinuxHostEnv host_;
  GatherEnv env_;
};

}  // namespace gpudoctor
