// The agent's scheduled diagnostics on the injected clock: when a run is due,
// and that it takes only idle GPUs and one run at a time (agent_loop_test.cc
// has the loop judging a run's results). The child launcher runs a script
// standing in for gpudoctor.
#include "agent/diag_schedule.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/testing/synthetic_agent.h"
#include "common/scratch_dir.h"

namespace gpudoctor {
namespace {

using namespace std::chrono_literals;

// Starts nothing: records what was asked and ends a run when the test says.
class ScriptedLauncher final : public DiagLauncher {
 public:
  Status Start(const DiagRequest& request) override {
    requests.push_back(request);
    running = true;
    return {};
  }
  std::optional<DiagRunEnd> Poll() override {
    if (!running || !end) return std::nullopt;
    running = false;
    return std::exchange(end, std::nullopt);
  }
  void Stop() override { running = false; }

  std::vector<DiagRequest> requests;
  bool running = false;
  std::optional<DiagRunEnd> end;  // set by the test: the run under way ends
};

// Four GPUs; those in `busy` run a compute process.
Snapshot Gpus(WallTime at, std::vector<uint32_t> busy = {}) {
  Snapshot snapshot = SyntheticSnapshot(4, at);
  for (GpuSnapshot& gpu : snapshot.gpus) {
    if (std::find(busy.begin(), busy.end(), gpu.index) == busy.end())
      gpu.processes = Field<std::vector<ProcessInfo>>::Value({});
  }
  return snapshot;
}

DiagScheduleConfig Schedule(std::string_view text, int level = 1) {
  auto config = ParseDiagSchedule(text);
  EXPECT_TRUE(config) << config.error().message;
  config->level = level;
  return *config;
}

// A local time on a day of the test's choosing, whatever the machine's time zone.
WallTime LocalTime(int day, int hour, int minute) {
  std::tm local{};
  local.tm_year = 2025 - 1900;
  local.tm_mon = 2;
  local.tm_mday = day;
  local.tm_hour = hour;
  local.tm_min = minute;
  local.tm_isdst = -1;
  return std::chrono::system_clock::from_time_t(std::mktime(&local));
}

TEST(DiagSchedule, TheScheduleIsOffADailyTimeOrAnInterval) {
  EXPECT_EQ(ParseDiagSchedule("off")->kind, DiagScheduleConfig::Kind::kOff);
  auto daily = ParseDiagSchedule("daily 03:30");
  ASSERT_TRUE(daily);
  EXPECT_EQ(daily->kind, DiagScheduleConfig::Kind::kDaily);
  EXPECT_EQ(daily->minute_of_day, 3 * 60 + 30);
  EXPECT_EQ(DescribeDiagSchedule(*daily), "daily at 03:30");
  auto every = ParseDiagSchedule("24h");
  ASSERT_TRUE(every);
  EXPECT_EQ(every->every, 24h);
  for (const char* bad : {"daily 25:00", "daily 3", "daily 03:5", "weekly", "", "5m"}) {
    auto parsed = ParseDiagSchedule(bad);
    EXPECT_FALSE(parsed) << bad;
  }
  EXPECT_NE(ParseDiagSchedule("5m").error().message.find("at least 10m"), std::string::npos);
}

TEST(DiagSchedule, TheDiagTableIsCheckedLikeTheRestOfTheConfig) {
  auto config = [](const char* text) { return ParseDiagScheduleConfig(text); };
  EXPECT_EQ(config("")->kind, DiagScheduleConfig::Kind::kOff);  // off unless asked for
  auto set = config("[diag]\nschedule = \"12h\"\nlevel = 2\n");
  ASSERT_TRUE(set) << set.error().message;
  EXPECT_EQ(set->every, 12h);
  EXPECT_EQ(set->level, 2);
  auto typo = config("[diag]\nschedul = \"12h\"\n");
  ASSERT_FALSE(typo);
  EXPECT_NE(typo.error().message.find("diag.schedul"), std::string::npos) << typo.error().message;
  auto level = config("[diag]\nschedule = \"12h\"\nlevel = 4\n");
  ASSERT_FALSE(level);
  EXPECT_NE(level.error().message.find("diag.level: 4"), std::string::npos) << level.error().message;
  auto schedule = config("[diag]\nschedule = \"often\"\n");
  ASSERT_FALSE(schedule);
  EXPECT_NE(schedule.error().message.find("diag.schedule"), std::string::npos) << schedule.error().message;
}

TEST(DiagScheduler, AnIntervalRunsOnTheIdleGpusOneRunAtATime) {
  FakeClock clock;
  ScriptedLauncher launcher;
  std::vector<std::string> notes;
  DiagScheduler scheduler(Schedule("6h", 2), launcher, clock.Now(), [&](const std::string& n) { notes.push_back(n); });
  // No diagnostic in the history: the first run is due at once, on the GPUs without a process.
  EXPECT_FALSE(scheduler.Tick(Gpus(clock.Now(), {2}), clock.Now(), {}));
  ASSERT_EQ(launcher.requests.size(), 1u);
  EXPECT_EQ(launcher.requests[0].level, 2);
  EXPECT_EQ(launcher.requests[0].gpus, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(launcher.requests[0].deadline, 20min);  // level 2's (diag/diag_levels.h)
  EXPECT_NE(notes.back().find("started on GPU 0,1,3 (1 GPU busy or unreadable, not tested)"), std::string::npos)
      << notes.back();
  // Still running 7 h later: no second run beside it.
  clock.Advance(7h);
  EXPECT_FALSE(scheduler.Tick(Gpus(clock.Now()), clock.Now(), {}));
  EXPECT_EQ(launcher.requests.size(), 1u);
  // It ends; the next is due 6 h after the last started, which has passed.
  launcher.end = DiagRunEnd{.exit_code = 2, .summary = "3 GPUs, 9 results: 8 passed, 1 FAULTY (GPU 1 burn)"};
  EXPECT_TRUE(scheduler.Tick(Gpus(clock.Now()), clock.Now(), {}));
  EXPECT_NE(notes[notes.size() - 2].find("scheduled diag --level 2 on GPU 0,1,3: 3 GPUs, 9 results"),
            std::string::npos);
  EXPECT_EQ(launcher.requests.size(), 2u);
  launcher.end = DiagRunEnd{.timed_out = true, .error = "timed out after 20m 0s"};
  clock.Advance(1min);
  EXPECT_TRUE(scheduler.Tick(Gpus(clock.Now()), clock.Now(), {}));
  EXPECT_NE(notes.back().find("gave no result: timed out"), std::string::npos) << notes.back();
  clock.Advance(5h);
  scheduler.Tick(Gpus(clock.Now()), clock.Now(), {});
  EXPECT_EQ(launcher.requests.size(), 2u) << "due 6 h after the last run, not before";
  clock.Advance(1h);
  scheduler.Tick(Gpus(clock.Now()), clock.Now(), {});
  EXPECT_EQ(launcher.requests.size(), 3u);
}

TEST(DiagScheduler, ARunInTheHistoryCountsAsTheLastOne) {
  FakeClock clock;
  ScriptedLauncher launcher;
  DiagScheduler scheduler(Schedule("24h"), launcher, clock.Now(), [](const std::string&) {});
  const std::vector<DiagnosticRecord> history{
      {.finished_at = clock.Now() - 23h, .gpu_index = 0, .test = "memtest", .state = "passed"}};
  scheduler.Tick(Gpus(clock.Now()), clock.Now(), history);
  EXPECT_TRUE(launcher.requests.empty()) << "an agent restart must not run the diag again";
  clock.Advance(1h);
  scheduler.Tick(Gpus(clock.Now()), clock.Now(), history);
  EXPECT_EQ(launcher.requests.size(), 1u);
}

TEST(DiagScheduler, WhenEveryGpuIsBusyTheRunWaitsAndSaysSoOnce) {
  FakeClock clock;
  ScriptedLauncher launcher;
  std::vector<std::string> notes;
  DiagScheduler scheduler(Schedule("24h"), launcher, clock.Now(), [&](const std::string& n) { notes.push_back(n); });
  for (int cycle = 0; cycle < 3; ++cycle) {
    scheduler.Tick(Gpus(clock.Now(), {0, 1, 2, 3}), clock.Now(), {});
    clock.Advance(5s);
  }
  EXPECT_TRUE(launcher.requests.empty());
  EXPECT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("no GPU is idle"), std::string::npos);
  scheduler.Tick(Gpus(clock.Now(), {0, 1}), clock.Now(), {});
  ASSERT_EQ(launcher.requests.size(), 1u);
  EXPECT_EQ(launcher.requests[0].gpus, (std::vector<int>{2, 3}));
}

TEST(DiagScheduler, ADailyTimeRunsOnceADayAndATimeMissedBeforeTheAgentStartedIsNotMadeUp) {
  ScriptedLauncher launcher;
  FakeClock clock(LocalTime(10, 2, 0));
  DiagScheduler scheduler(Schedule("daily 03:00"), launcher, clock.Now(), [](const std::string&) {});
  auto tick_at = [&](int day, int hour, int minute) {
    clock.Set(LocalTime(day, hour, minute));
    scheduler.Tick(Gpus(clock.Now()), clock.Now(), {});
    if (launcher.running) launcher.end = DiagRunEnd{.exit_code = 0, .summary = "4 GPUs, 12 results: 12 passed"};
  };
  tick_at(10, 2, 59);
  EXPECT_EQ(launcher.requests.size(), 0u);
  tick_at(10, 3, 0);
  EXPECT_EQ(launcher.requests.size(), 1u);
  tick_at(10, 3, 1);  // takes the end
  tick_at(10, 23, 0);
  EXPECT_EQ(launcher.requests.size(), 1u);
  tick_at(11, 3, 5);
  EXPECT_EQ(launcher.requests.size(), 2u);

  ScriptedLauncher late_launcher;
  DiagScheduler late(Schedule("daily 03:00"), late_launcher, LocalTime(10, 14, 0), [](const std::string&) {});
  late.Tick(Gpus(LocalTime(10, 14, 1)), LocalTime(10, 14, 1), {});
  EXPECT_TRUE(late_launcher.requests.empty()) << "03:00 passed before the agent started";
  late.Tick(Gpus(LocalTime(11, 3, 0)), LocalTime(11, 3, 0), {});
  EXPECT_EQ(late_launcher.requests.size(), 1u);
}

// ---- the child ----

class ChildLauncher : public ::testing::Test {
 protected:
  // A stand-in for gpudoctor that runs `script` with the arguments it was given.
  std::vector<std::string> Program(const std::string& script) {
    const std::string path = dir_.Write("gpudoctor.sh", "#!/bin/sh\n" + script);
    chmod(path.c_str(), 0755);
    return {path, "--simulate", "s.toml"};
  }

  // Polls until the run ends (every 20 ms, at most about a minute).
  static std::optional<DiagRunEnd> Wait(DiagLauncher& launcher) {
    for (int i = 0; i < 3000; ++i) {
      if (auto end = launcher.Poll()) return end;
      std::this_thread::sleep_for(20ms);
    }
    return std::nullopt;
  }

  testing::ScratchDir dir_;
};

TEST_F(ChildLauncher, RunsDiagAtTheLevelOnTheGpusIntoTheHistoryAndReadsItsSummary) {
  ChildDiagLauncher launcher(
      Program("echo \"$@\" > \"$(dirname \"$0\")/args\"\n"
              "echo '{\"event\":\"summary\",\"exit_code\":2,\"line\":\"2 GPUs, 6 results: 5 passed, 1 FAULTY "
              "(GPU 3 burn)\",\"results\":[]}'\nexit 2\n"),
      "/var/lib/gpudoctor/history.db");
  const DiagRequest request{.level = 1, .gpus = {0, 3}, .deadline = 1min};
  EXPECT_EQ(launcher.Command(request).back(), "/var/lib/gpudoctor/history.db");
  ASSERT_TRUE(launcher.Start(request));
  std::optional<DiagRunEnd> end = Wait(launcher);
  ASSERT_TRUE(end);
  EXPECT_FALSE(end->timed_out);
  EXPECT_EQ(end->exit_code, 2);
  EXPECT_EQ(end->summary, "2 GPUs, 6 results: 5 passed, 1 FAULTY (GPU 3 burn)");
  std::ifstream args_file(dir_.File("args"));
  std::stringstream args;
  args << args_file.rdbuf();
  EXPECT_EQ(args.str(),
            "--simulate s.toml diag --level 1 --json --quiet --gpu 0,3 --db /var/lib/gpudoctor/history.db\n");
  EXPECT_FALSE(launcher.Poll()) << "an end is told once";
}

TEST_F(ChildLauncher, ARunPastItsDeadlineIsEndedAndOneWithoutASummarySaysWhy) {
  ChildDiagLauncher slow(Program("exec sleep 600\n"), "");
  ASSERT_TRUE(slow.Start({.level = 1, .gpus = {0}, .deadline = 200ms}));
  std::optional<DiagRunEnd> end = Wait(slow);
  ASSERT_TRUE(end);
  EXPECT_TRUE(end->timed_out);
  EXPECT_NE(end->error.find("timed out"), std::string::npos) << end->error;

  ChildDiagLauncher broken(Program("echo 'gpudoctor diag: NVML cannot list the GPUs' >&2; exit 69\n"), "");
  ASSERT_TRUE(broken.Start({.level = 1, .gpus = {0}, .deadline = 1min}));
  end = Wait(broken);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->exit_code, 69);
  EXPECT_TRUE(end->summary.empty());
  EXPECT_NE(end->error.find("NVML cannot list the GPUs"), std::string::npos) << end->error;
}

TEST_F(ChildLauncher, StoppingTheAgentEndsTheRunUnderWay) {
  ChildDiagLauncher launcher(Program("exec sleep 600\n"), "");
  ASSERT_TRUE(launcher.Start({.level = 3, .gpus = {0}, .deadline = 2h}));
  launcher.Stop();  // returns once the child is gone (SIGTERM ends sleep)
  EXPECT_FALSE(launcher.Poll());
}

}  // namespace
}  // namespace gpudoctor
