// AgentLoop: one sampling cycle of `gpudoctor agent`, run every interval.
//
// A cycle collects a snapshot (the hang-proof probe), the host signals and
// the kernel-log events that arrived, starts a scheduled diagnostic on the
// idle GPUs when one is due (or takes the end of the one under way), runs the rules, trend detectors and
// escalations over the history, tells one story per incident (the
// correlation step), hands the findings to the HistoryRecorder (which decides
// the incidents at once and writes the history when the disk lets it), sends
// alerts for the incidents that opened, changed or resolved, and publishes
// the new state to the HTTP server.
//
// Events stay in the rules' windows across cycles and, through the history,
// across restarts: an Xid NVML delivered an hour ago is still judged by
// xid_recent (24 h by default), not only in the sample that carried it.
//
//   AgentLoop loop({.source = source, .history = history, .state = state, .alerts = alerts,
//                   .log = follower.get(), .host = host_env, .clock = clock}, config);
//   loop.RunCycle();          // every --interval
//   loop.Reconfigure(config); // on SIGHUP
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/agent_state.h"
#include "agent/alert_config.h"
#include "agent/alert_hub.h"
#include "agent/diag_schedule.h"
#include "agent/history_recorder.h"
#include "agent/kernel_log_follower.h"
#include "common/clock.h"
#include "assess/identity.h"
#include "health/blocked_task_watch.h"
#include "health/catalog_event_grader.h"
#include "health/correlate/escalate.h"
#include "health/detectors/trend_detectors.h"
#include "health/health_config.h"
#include "host/host_env.h"
#include "logs/event_collector.h"
#include "nvml/collector.h"

namespace gpudoctor {

// The one --config file feeds the rules, the detectors, the alerts and the
// diagnostics schedule.
struct AgentConfig {
  HealthConfig health;
  TrendConfig trends;
  AlertConfig alerts;
  DiagScheduleConfig diag;
};

// What a cycle reads from and writes to; everything must outlive the loop.
struct AgentLoopParts {
  SnapshotSource& source;
  HistoryRecorder& history;
  AgentState& state;
  AlertHub& alerts;
  KernelLogFollower* log = nullptr;  // null: no kernel log followed
  HostEnv& host;
  const Clock& clock;
  std::function<void(const std::string&)> note;  // what the agent tells its operator (stderr)
  std::string hostname;  // reported instead of the machine's own name when set (--hostname)
  DiagScheduler* diag = nullptr;  // null: no scheduled diagnostics
};

class AgentLoop {
 public:
  AgentLoop(AgentLoopParts parts, AgentConfig config);

  // The rules read the config afresh every cycle. The trend detectors keep
  // what they have observed and judge it by the new thresholds from the next
  // cycle on, so a reload neither resolves nor re-opens a finding that still holds.
  void Reconfigure(AgentConfig config);

  void RunCycle();

  size_t open_findings() const { return parts_.history.open_incidents().size(); }
  size_t gpu_count() const { return previous_ ? previous_->gpus.size() : 0; }

 private:
  Duration EventWindow() const;
  // The history the escalations read: their lookback, at least the rules' windows.
  Duration HistoryWindow() const;
  // Adds events to the rules' windows (and the escalations' Xids and driver
  // loads to theirs) and drops those older than the windows.
  void AddEvents(RecentEvents events, WallTime now);
  EscalationInput EscalationInputFor(const Snapshot& snapshot, WallTime now) const;
  void NoteStoreChange(const StoreHealth& before, const StoreHealth& after);

  AgentLoopParts parts_;
  AgentConfig config_;
  TrendDetectors detectors_;
  CatalogEventGrader grader_;
  BlockedTaskWatch blocked_tasks_;  // how long the host's tasks have been blocked, across cycles
  IdentityMemory identities_;       // what each GPU answered as, for the one that stops answering
  bool identities_seeded_ = false;  // from the history, once it opens
  std::shared_ptr<Snapshot> previous_;
  std::shared_ptr<Snapshot> spare_;  // the one before previous_, for the next cycle to refill
  EventCollector recent_log_events_;  // over EventWindow()
  std::vector<XidEvent> recent_nvml_xids_;   // over EventWindow()
  EventCollector escalation_log_events_;  // Xids and driver loads over HistoryWindow()
  std::vector<XidEvent> escalation_nvml_xids_;   // over HistoryWindow()
};

}  // namespace gpudoctor
