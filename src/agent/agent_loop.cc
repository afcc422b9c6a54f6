#include "agent/agent_loop.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "assess/assessment.h"
#include "health/correlate/correlate.h"
#include "health/maintenance.h"
#include "health/rules.h"
#include "host/host_signals.h"
#include "host/process_command_line.h"
#include "logs/catalog.h"

namespace gpudoctor {

AgentLoop::AgentLoop(AgentLoopParts parts, AgentConfig config)
    : parts_(std::move(parts)),
      config_(std::move(config)),
      detectors_(config_.trends),
      grader_(LogCatalog::Builtin()) {
  parts_.history.set_events_window(HistoryWindow());
  parts_.history.set_remediations_window(HistoryWindow());
  detectors_.set_command_lines(CommandLinesFrom(parts_.host));
}

void AgentLoop::Reconfigure(AgentConfig config) {
  config_ = std::move(config);
  detectors_.Reconfigure(config_.trends);
  if (parts_.diag) parts_.diag->Reconfigure(config_.diag);
  parts_.history.set_events_window(HistoryWindow());
  parts_.history.set_remediations_window(HistoryWindow());
}

Duration AgentLoop::EventWindow() const {
  return std::max(config_.health.thresholds.xid_recent.window, config_.health.thresholds.log_errors.window);
}

Duration AgentLoop::HistoryWindow() const {
  const EscalationConfig& escalation = config_.health.escalation;
  return std::max({EventWindow(), escalation.lookback, escalation.remediation_window});
}

void AgentLoop::RunCycle() {
  // The snapshot before the last is refilled in place when nothing else
  // holds it any more (the dashboard may, while it answers a request).
  std::shared_ptr<Snapshot> snapshot =
      spare_ && spare_.use_count() == 1 ? std::move(spare_) : std::make_shared<Snapshot>();
  spare_.reset();
  parts_.source.CollectInto(*snapshot);
  if (!parts_.hostname.empty()) snapshot->hostname = parts_.hostname;
  const WallTime now = parts_.clock.Now();
  HostSignals host = CollectHostSignals(config_.health.host, parts_.host);
  blocked_tasks_.Observe(host, now);

  // What an earlier run kept comes back once, when the history opens.
  const StoreHealth before = parts_.history.health();
  AddEvents(parts_.history.Connect(now), now);
  // A GPU lost before this agent started is named by what the history kept of it.
  if (!identities_seeded_) {
    if (std::shared_ptr<const HistoryStore> store = parts_.history.store()) {
      if (Result<std::vector<GpuIdentity>> gpus = store->ListGpus()) identities_.Seed(*gpus);
      identities_seeded_ = true;
    }
  }
  identities_.Observe(*snapshot);
  identities_.Recall(*snapshot);
  // A scheduled run's results are in the history by the time the rules read it.
  if (parts_.diag && parts_.diag->Tick(*snapshot, now, parts_.history.LatestDiagnostics(now)))
    parts_.history.DiagnosticsChanged();
  RecentEvents arrived;
  arrived.nvml_xids = snapshot->xid_events;
  if (parts_.log) {
    arrived.log = parts_.log->TakeEvents();
    // Xids from the log count against the GPU on their bus (NVML's own are
    // counted when the snapshot is published).
    for (const LogEvent& event : arrived.log) {
      if (!event.xid) continue;
      auto bus = NormalizePciBusId(event.pci_bus_id);
      for (const GpuSnapshot& gpu : snapshot->gpus) {
        if (bus && gpu.pci_bus_id.has_value() && NormalizePciBusId(gpu.pci_bus_id.value()) == bus)
          parts_.state.RecordXid(gpu.index, *event.xid, now);
      }
    }
  }
  AddEvents(arrived, now);

  // The agent judges the GPU count it learned; overdue upkeep is check's matter.
  HostHistory host_history;
  if (const auto& learned = parts_.history.learned_gpu_count()) {
    host_history.learned_gpu_count = learned->count;
    host_history.gpu_count_learned_at = learned->learned_at;
  }
  // What only watching over time sees joins the rules' judgement of this sample.
  detectors_.Observe(*snapshot, now);
  AssessInputs inputs{.snapshot = snapshot.get(),
                      .previous = previous_.get(),
                      .host = &host,
                      .log_events = parts_.log ? &recent_log_events_.events() : nullptr,
                      .nvml_xid_events = &recent_nvml_xids_,
                      .blocked_task_watch = &blocked_tasks_,
                      .host_history = &host_history,
                      .diagnostics = &parts_.history.LatestDiagnostics(now),
                      .watched = detectors_.Evaluate(now),
                      .command_lines = CommandLinesFrom(parts_.host),
                      .now = now};
  for (Finding& finding : Escalate(EscalationInputFor(*snapshot, now), config_.health.escalation))
    inputs.watched.push_back(std::move(finding));
  Assessment assessment = Assess(inputs, config_.health, grader_);
  std::vector<Finding> findings = std::move(assessment.findings);
  std::erase_if(findings, [](const Finding& f) { return f.severity == Severity::kOk; });

  // Incidents are decided now, whether or not the store takes them.
  std::vector<FindingTransition> transitions =
      parts_.history.Record(*snapshot, std::move(findings), arrived, now);
  parts_.history.LearnGpuCount(HealthyGpuCount(*snapshot, host), now);
  NoteStoreChange(before, parts_.history.health());
  parts_.alerts.Submit(transitions, parts_.history.open_incidents());

  parts_.state.PublishSnapshot(snapshot);
  parts_.state.SetOpenFindings(parts_.history.open_incidents());
  // The checklist tells what was checked from this round's judgement, and how it stands from the open incidents.
  std::vector<Finding> open;
  for (const StoredFinding& incident : parts_.history.open_incidents()) open.push_back(incident.finding);
  parts_.state.SetChecklist(BuildOpenChecklist(open, assessment.checklist, config_.health.checklist).items);
  parts_.state.SetStoreHealth(parts_.history.health());
  spare_ = std::move(previous_);
  previous_ = std::move(snapshot);
}

void AgentLoop::AddEvents(RecentEvents events, WallTime now) {
  for (XidEvent& xid : events.nvml_xids) {
    escalation_nvml_xids_.push_back(xid);
    recent_nvml_xids_.push_back(xid);
  }
  // A storm of identical lines is held as a few events and a count (logs/event_collector.h).
  for (LogEvent& event : events.log) {
    if (event.time && (event.kind == "xid" || event.kind == "driver_loaded")) {
      LogEvent copy = event;
      escalation_log_events_.Add(std::move(copy));
    }
    recent_log_events_.Add(std::move(event));
  }
  const WallTime oldest = now - EventWindow(), oldest_kept = now - HistoryWindow();
  std::erase_if(recent_nvml_xids_, [&](const XidEvent& e) { return e.time < oldest; });
  recent_log_events_.DropOlderThan(oldest);
  std::erase_if(escalation_nvml_xids_, [&](const XidEvent& e) { return e.time < oldest_kept; });
  escalation_log_events_.DropOlderThan(oldest_kept);
}

EscalationInput AgentLoop::EscalationInputFor(const Snapshot& snapshot, WallTime now) const {
  EscalationInput input{.xids = XidRecordsFrom(snapshot, escalation_log_events_.events(), escalation_nvml_xids_),
                        .restarts = DriverLoads(escalation_log_events_.events()),
                        .event_grader = &grader_,
                        .now = now};
  for (const BootRecord& boot : parts_.history.boots())
    input.restarts.push_back({boot.booted_at, std::nullopt, "reboot (boot id " + boot.boot_id + ")"});
  for (const Remediation& remediation : parts_.history.remediations()) {
    input.remediations.push_back({remediation.at, remediation.gpu, DescribeRemediation(remediation)});
    if (remediation.gpu_reset && remediation.gpu) {
      input.restarts.push_back(
          {remediation.at, remediation.gpu, fmt::format("GPU reset recorded with acknowledgement {}", remediation.id)});
    }
  }
  return input;
}

void AgentLoop::NoteStoreChange(const StoreHealth& before, const StoreHealth& after) {
  if (!parts_.note) return;
  if (before.ok && !after.ok) {
    parts_.note(fmt::format("history {} is failing ({}); findings, alerts and metrics go on, writes wait in memory",
                            after.path, after.last_error));
  } else if (!before.ok && after.ok) {
    parts_.note(fmt::format("history {} works again; {} writes that waited are stored", after.path,
                            before.queued));
  }
}

}  // namespace gpudoctor
