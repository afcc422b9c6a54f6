// Escalation over time: what the agent's history makes worse news, as the
// best peers do. Pure logic over what happened (Xids, restarts, remediations),
// with the times it is given; the agent gathers them from its store.
//
//   xid_recurring         the same fatal Xid on the same GPU came back after
//                         `after_restarts` restarts (reboots, driver loads,
//                         recorded resets): inspect the hardware
//   xid_fatal_repeated    a fatal Xid `fatal_count` times in `fatal_window`:
//                         contact support
//   xid_diagnostics_due   an Xid with a `diagnose_count` (13 and 31 by
//                         default) that often on one GPU: run the diagnostics
//   remediation_repeated  `remediation_count` remediations of one GPU (or the
//                         host) in `remediation_window`: contact support
//
// Each finding's evidence lists the occurrences, restarts or remediations
// that led to it. Thresholds: EscalationConfig ([escalation]).
//
//   EscalationInput input{.xids = XidRecordsFrom(snapshot, log_events, nvml_xids),
//                         .restarts = DriverLoads(log_events), .event_grader = &grader, .now = now};
//   for (Finding& finding : Escalate(input, config.escalation)) findings.push_back(std::move(finding));
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "health/correlate/correlation_config.h"
#include "health/event_grader.h"
#include "health/finding.h"
#include "logs/event.h"
#include "model/snapshot.h"

namespace gpudoctor {

// One Xid, on a GPU named as the current snapshot names it.
struct XidRecord {
  GpuRef gpu;
  uint32_t code = 0;
  WallTime time;
  std::string line;  // the log line, or a description of the NVML event
};

// Something that restarted GPUs: a reboot, a driver load, a recorded reset.
struct RestartRecord {
  WallTime time;
  std::optional<GpuRef> gpu;  // nullopt: every GPU
  std::string what;           // "reboot (boot id 3f2a...)"
};

// An operator's acknowledgement, or a reboot after a critical finding.
struct RemediationRecord {
  WallTime time;
  std::optional<GpuRef> gpu;  // nullopt: the host
  std::string what;           // "acknowledged xid_recent@GPU-.../79 by alice: reseated"
};

struct EscalationInput {
  std::vector<XidRecord> xids;
  std::vector<RestartRecord> restarts;
  std::vector<RemediationRecord> remediations;
  const EventGrader* event_grader = nullptr;  // decides which Xids are fatal (catalog: critical)
  WallTime now;
};

// The escalations that hold `now`; none when `config.enabled` is false.
std::vector<Finding> Escalate(const EscalationInput& input, const EscalationConfig& config);

// The Xids of log lines (with a time) and NVML events, each on the GPU of
// `snapshot` it names (by PCI bus id, UUID or index).
std::vector<XidRecord> XidRecordsFrom(const Snapshot& snapshot, const std::vector<LogEvent>& log,
                                      const std::vector<XidEvent>& nvml);
// The NVIDIA driver loads the log shows (driver_loaded events): every GPU restarts.
std::vector<RestartRecord> DriverLoads(const std::vector<LogEvent>& log);

}  // namespace gpudoctor
