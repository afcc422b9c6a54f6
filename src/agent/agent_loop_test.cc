#include "agent/agent_loop.h"

#include <gtest/gtest.h>

#include "agent/testing/synthetic_agent.h"
#include "host/command_runner.h"
#include "store/memory_store.h"
#include "store/test_support.h"

namespace gpudoctor {
namespace {

using namespace std::chrono_literals;

// Synthetic GPUs, sampled at the clock's time; the next snapshot carries the
// Xids queued for it, as NVML's event API delivers each Xid once.
class ScriptedSource final : public SnapshotSource {
 public:
  explicit ScriptedSource(const Clock& clock) : clock_(clock) {}
  Snapshot Collect() override {
    Snapshot snapshot = SyntheticSnapshot(2, clock_.Now());
    snapshot.xid_events = std::exchange(next_xids, {});
    if (idle)
      for (GpuSnapshot& gpu : snapshot.gpus) gpu.processes = Field<std::vector<ProcessInfo>>::Value({});
    return snapshot;
  }
  std::vector<XidEvent> next_xids;
  bool idle = false;  // no compute process on any GPU

 private:
  const Clock& clock_;
};

class NoCommands final : public CommandRunner {
 public:
  CommandResult Run(const std::vector<std::string>&, Duration) override {
    return {CommandStatus::kNotInstalled, -1, "", "", "not installed"};
  }
};

AgentConfig XidWindowConfig(Duration window) {
  AgentConfig config{.health = DefaultHealthConfig()};
  config.health.thresholds.xid_recent.window = window;
  config.health.host = HostConfig{.ipmi = false};
  return config;
}

// One agent run over a shared history; a second run is a restart.
struct AgentRun {
  AgentRun(FakeClock& clock, std::shared_ptr<HistoryStore> store, Duration window,
           std::optional<BootRecord> boot = std::nullopt, DiagScheduler* diag = nullptr)
      : source(clock),
        history([store]() -> Result<std::shared_ptr<HistoryStore>> { return store; },
                {.path = "history.db", .boot = std::move(boot)}),
        state(clock.Now()),
        alerts(clock),
        host(scratch.File(""), commands),
        loop({.source = source,
              .history = history,
              .state = state,
              .alerts = alerts,
              .host = host,
              .clock = clock,
              .diag = diag},
             XidWindowConfig(window)) {}

  // The open incident with this id (and subject), or nullopt.
  std::optional<StoredFinding> Open(std::string_view id, std::string_view subject = "") const {
    for (const StoredFinding& open : state.OpenFindings())
      if (open.finding.id == id && (subject.empty() || open.finding.subject == subject)) return open;
    return std::nullopt;
  }

  // The state gpudoctor_checklist_item exports for the item titled `title`; "" when there is none.
  std::string ItemState(std::string_view title) const {
    for (const ChecklistItem& item : state.ChecklistItems())
      if (item.title == title) return std::string(ChecklistStateName(item));
    return "";
  }

  bool XidOpen(uint64_t xid) const {
    for (const StoredFinding& open : state.OpenFindings()) {
      if (open.finding.id == "xid_recent" && open.finding.summary.find("Xid " + std::to_string(xid)) == 0)
        return true;
    }
    return false;
  }

  testing::ScratchDir scratch;
  NoCommands commands;
  ScriptedSource source;
  HistoryRecorder history;
  AgentState state;
  AlertHub alerts;
  LinuxHostEnv host;
  AgentLoop loop;
};

TEST(AgentLoop, AnNvmlXidStaysInItsWindowAcrossSamplesAndRestarts) {
  FakeClock clock;
  auto store = std::make_shared<MemoryHistoryStore>();
  {
    AgentRun run(clock, store, 1h);
    run.source.next_xids = {{.gpu_index = 1, .xid = 48, .time = clock.Now()}};
    run.loop.RunCycle();
    EXPECT_TRUE(run.XidOpen(48));
    for (int cycle = 0; cycle < 3; ++cycle) {
      clock.Advance(5s);
      run.loop.RunCycle();
      EXPECT_TRUE(run.XidOpen(48)) << "the Xid left the window after " << cycle + 1 << " more samples";
    }
  }
  clock.Advance(30min);
  {
    AgentRun restarted(clock, store, 1h);
    restarted.loop.RunCycle();
    EXPECT_TRUE(restarted.XidOpen(48)) << "the Xid was forgotten by the restart";
    EXPECT_EQ(restarted.state.OpenFindings().size(), restarted.history.open_incidents().size());
    clock.Advance(31min);  // past the hour since the Xid
    restarted.loop.RunCycle();
    EXPECT_FALSE(restarted.XidOpen(48));
  }
}

// The fixture tree holds tasks in D state and the kernel's 120 s hung-task
// timeout. Seen blocked in every cycle, they are hung once blocked that
// long, never before: a single sighting proves nothing.
TEST(AgentLoop, TasksBlockedAcrossCyclesForTheKernelsTimeoutAreHung) {
  FakeClock clock;
  NoCommands commands;
  ScriptedSource source(clock);
  std::shared_ptr<HistoryStore> store = std::make_shared<MemoryHistoryStore>();
  HistoryRecorder history([store]() -> Result<std::shared_ptr<HistoryStore>> { return store; }, {.path = "history.db"});
  AgentState state(clock.Now());
  AlertHub alerts(clock);
  LinuxHostEnv host(std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/host/hung_tasks", commands);
  AgentLoop loop({.source = source, .history = history, .state = state, .alerts = alerts, .host = host, .clock = clock},
                 XidWindowConfig(1h));
  auto open = [&](std::string_view id) {
    const std::vector<StoredFinding> findings = state.OpenFindings();
    return std::any_of(findings.begin(), findings.end(), [&](const StoredFinding& f) { return f.finding.id == id; });
  };
  for (int cycle = 0; cycle < 4; ++cycle) {  // 0 s to 90 s
    loop.RunCycle();
    EXPECT_FALSE(open("driver_hang")) << "after " << cycle * 30 << " s";
    EXPECT_FALSE(open("host_hung_tasks")) << "after " << cycle * 30 << " s";
    clock.Advance(30s);
  }
  loop.RunCycle();  // 120 s
  EXPECT_TRUE(open("driver_hang"));
  EXPECT_TRUE(open("host_hung_tasks"));
}

TEST(AgentLoop, FindingsAndStoreHealthReachTheStateWhenTheHistoryCannotBeOpened) {
  FakeClock clock;
  NoCommands commands;
  testing::ScratchDir scratch;
  ScriptedSource source(clock);
  HistoryRecorder history([]() -> Result<std::shared_ptr<HistoryStore>> { return Error{"unable to open"}; },
                          {.path = "/full/history.db"});
  AgentState state(clock.Now());
  AlertHub alerts(clock);
  LinuxHostEnv host(scratch.File(""), commands);
  std::vector<std::string> notes;
  AgentLoop loop({.source = source,
                  .history = history,
                  .state = state,
                  .alerts = alerts,
                  .host = host,
                  .clock = clock,
                  .note = [&](const std::string& note) { notes.push_back(note); }},
                 XidWindowConfig(1h));
  source.next_xids = {{.gpu_index = 0, .xid = 79, .time = clock.Now()}};
  loop.RunCycle();

  const AgentStatus status = state.Status();
  ASSERT_TRUE(status.store.has_value());
  EXPECT_FALSE(status.store->ok);
  EXPECT_EQ(status.store->path, "/full/history.db");
  std::vector<std::string> open;
  for (const StoredFinding& f : state.OpenFindings()) open.push_back(f.finding.id);
  EXPECT_NE(std::find(open.begin(), open.end(), "xid_recent"), open.end());
  EXPECT_NE(std::find(open.begin(), open.end(), "history_store_failing"), open.end());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("/full/history.db is failing (cannot open it: unable to open)"), std::string::npos)
      << notes[0];
}

// Three boots, each with the same Xid on GPU 1: it outlived two reboots, so
// the agent escalates to a hardware inspection, and the Xid's own finding is
// told as part of it. The reboots that came while it was critical count as
// remediations.
TEST(AgentLoop, AnXidThatComesBackAfterTwoRebootsEscalatesAndLeadsItsStory) {
  FakeClock clock;
  auto store = std::make_shared<MemoryHistoryStore>();
  for (int boot = 0; boot < 3; ++boot) {
    AgentRun run(clock, store, 1h, BootRecord{"boot-" + std::to_string(boot), clock.Now() - 2min});
    run.source.next_xids = {{.gpu_index = 1, .xid = 79, .time = clock.Now()}};
    run.loop.RunCycle();
    if (boot < 2) {
      EXPECT_FALSE(run.Open("xid_recurring")) << "after " << boot << " reboots";
      clock.Advance(3h);  // past the Xid's hour: the next boot starts afresh
      continue;
    }
    std::optional<StoredFinding> recurring = run.Open("xid_recurring", "79");
    ASSERT_TRUE(recurring) << "no escalation after two reboots";
    EXPECT_EQ(recurring->finding.severity, Severity::kCritical);
    EXPECT_EQ(recurring->finding.gpu->index, 1u);
    EXPECT_EQ(recurring->finding.summary, "Xid 79 on GPU 1 came back after 2 restarts: inspect the hardware");
    std::optional<StoredFinding> xid = run.Open("xid_recent", "79");
    ASSERT_TRUE(xid);
    EXPECT_EQ(xid->finding.part_of, recurring->key);
  }
  auto boots = store->QueryBoots(WallTime{}, WallTime::max());
  ASSERT_TRUE(boots.ok());
  EXPECT_EQ(boots->size(), 3u);
  auto remediations = store->QueryRemediations({.from = WallTime{}, .until = WallTime::max()});
  ASSERT_TRUE(remediations.ok());
  // The agent was down when each Xid left its window, so each reboot found the
  // previous boot's Xid still open and critical: a remediation.
  EXPECT_EQ(remediations->size(), 2u);
}

TEST(AgentLoop, ARebootWhileACriticalFindingIsOpenIsARemediation) {
  FakeClock clock;
  auto store = std::make_shared<MemoryHistoryStore>();
  {
    AgentRun run(clock, store, 1h, BootRecord{"boot-0", clock.Now() - 1h});
    run.source.next_xids = {{.gpu_index = 0, .xid = 79, .time = clock.Now()}};
    run.loop.RunCycle();
    ASSERT_TRUE(run.Open("xid_recent", "79"));
  }
  clock.Advance(10min);
  AgentRun rebooted(clock, store, 1h, BootRecord{"boot-1", clock.Now() - 1min});
  rebooted.loop.RunCycle();
  ASSERT_EQ(rebooted.history.remediations().size(), 1u);
  const Remediation& reboot = rebooted.history.remediations().front();
  EXPECT_EQ(reboot.kind, Remediation::Kind::kReboot);
  EXPECT_EQ(reboot.at, clock.Now() - 1min);
  EXPECT_EQ(reboot.gpu->index, 0u);
  EXPECT_EQ(reboot.severity, Severity::kCritical);
}

// gpudoctor ack writes a remediation into the history; the agent resolves
// the incident at its next sample and keeps it quiet until a new Xid.
TEST(AgentLoop, AnAcknowledgementInTheHistoryResolvesTheIncidentUntilTheFaultReturns) {
  FakeClock clock;
  auto store = std::make_shared<MemoryHistoryStore>();
  AgentRun run(clock, store, 1h);
  run.source.next_xids = {{.gpu_index = 1, .xid = 48, .time = clock.Now()}};
  run.loop.RunCycle();
  std::optional<StoredFinding> xid = run.Open("xid_recent", "48");
  ASSERT_TRUE(xid);
  EXPECT_EQ(run.ItemState("No GPU errors in the system log"), SeverityName(xid->finding.severity));
  EXPECT_EQ(run.ItemState("Backups working"), "unchecked");  // nothing configured to judge

  clock.Advance(5s);
  ASSERT_TRUE(store
                  ->RecordRemediation({.kind = Remediation::Kind::kAck,
                                       .at = clock.Now(),
                                       .incident_id = xid->incident_id,
                                       .incident_key = xid->key,
                                       .severity = xid->finding.severity,
                                       .gpu = xid->finding.gpu,
                                       .actor = "alice",
                                       .note = "drained and reset"})
                  .ok());
  clock.Advance(5s);
  run.loop.RunCycle();
  EXPECT_FALSE(run.Open("xid_recent", "48")) << "the acknowledged incident is still open";
  EXPECT_EQ(run.ItemState("No GPU errors in the system log"), "ok") << "acknowledged: checked, and nothing open";
  auto stored = store->QueryFindings({.from = WallTime{}, .until = WallTime::max()});
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ(stored->front().resolved_at, clock.Now() - 5s);
  for (int cycle = 0; cycle < 3; ++cycle) {
    clock.Advance(5s);
    run.loop.RunCycle();
    EXPECT_FALSE(run.Open("xid_recent", "48")) << "it opened again without a new Xid";
  }

  run.source.next_xids = {{.gpu_index = 1, .xid = 48, .time = clock.Now()}};
  run.loop.RunCycle();
  std::optional<StoredFinding> again = run.Open("xid_recent", "48");
  ASSERT_TRUE(again) << "a new Xid after the acknowledgement opens a new incident";
  EXPECT_GT(again->incident_id, xid->incident_id);
}

// A scheduled diag as `gpudoctor diag --db` would run it: GPU 1's burn finds
// a wrong product, and the record lands in the agent's history.
class FaultyBurnLauncher final : public DiagLauncher {
 public:
  FaultyBurnLauncher(std::shared_ptr<HistoryStore> store, const Clock& clock)
      : store_(std::move(store)), clock_(clock) {}
  Status Start(const DiagRequest& request) override {
    requests.push_back(request);
    return {};
  }
  std::optional<DiagRunEnd> Poll() override {
    if (requests.empty() || ended_) return std::nullopt;
    ended_ = true;
    for (int gpu : requests.back().gpus) {
      DiagnosticRecord record{.finished_at = clock_.Now(),
                              .gpu_index = static_cast<uint32_t>(gpu),
                              .test = "burn",
                              .state = gpu == 1 ? "faulty" : "passed",
                              .summary = gpu == 1 ? "1 wrong matrix product" : "TFLOP/s fp64 50",
                              .command = "gpudoctor diag burn --gpu " + std::to_string(gpu)};
      EXPECT_TRUE(store_->RecordDiagnostic(record));
    }
    return DiagRunEnd{.exit_code = 2, .summary = "2 GPUs, 2 results: 1 passed, 1 FAULTY (GPU 1 burn)"};
  }
  void Stop() override {}
  std::vector<DiagRequest> requests;

 private:
  std::shared_ptr<HistoryStore> store_;
  const Clock& clock_;
  bool ended_ = false;
};

// The loop starts a scheduled diag on the idle GPUs and judges, in the cycle
// the run ends, what it kept in the history.
TEST(AgentLoop, AScheduledDiagsFaultIsJudgedFromTheHistoryInTheCycleItEnds) {
  FakeClock clock;
  auto store = std::make_shared<MemoryHistoryStore>();
  FaultyBurnLauncher launcher(store, clock);
  DiagScheduler scheduler(*ParseDiagSchedule("24h"), launcher, clock.Now(), [](const std::string&) {});
  AgentRun run(clock, store, 1h, std::nullopt, &scheduler);
  run.source.idle = true;
  run.loop.RunCycle();  // starts the run
  ASSERT_EQ(launcher.requests.size(), 1u);
  EXPECT_EQ(launcher.requests[0].gpus, (std::vector<int>{0, 1}));
  EXPECT_FALSE(run.Open("diagnostic_failed"));
  clock.Advance(5s);
  run.loop.RunCycle();  // the run ended
  std::optional<StoredFinding> failed = run.Open("diagnostic_failed", "burn");
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->finding.gpu->index, 1u);
  EXPECT_EQ(failed->finding.severity, Severity::kCritical);
  EXPECT_EQ(launcher.requests.size(), 1u) << "the next run is a day away";
}

}  // namespace
}  // namespace gpudoctor
