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
    return snapshot;
  }
  std::vector<XidEvent> next_xids;

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
  AgentRun(FakeClock& clock, std::shared_ptr<HistoryStore> store, Duration window)
      : source(clock),
        history([store]() -> Result<std::shared_ptr<HistoryStore>> { return store; }, {.path = "history.db"}),
        state(clock.Now()),
        alerts(clock),
        host(scratch.File(""), commands),
        loop({.source = source, .history = history, .state = state, .alerts = alerts, .host = host, .clock = clock},
             XidWindowConfig(window)) {}

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

}  // namespace
}  // namespace gpudoctor
