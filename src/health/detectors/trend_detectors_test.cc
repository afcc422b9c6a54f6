// TrendDetectors end to end: snapshots in, findings out, on simulated hours.
#include "health/detectors/trend_detectors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "common/clock.h"
#include "health/detectors/detector_test_support.h"

namespace gpudoctor {
namespace {

using namespace testing;

std::vector<std::string> IdsAtGpus(const std::vector<Finding>& findings) {
  std::vector<std::string> ids;
  for (const Finding& f : findings) ids.push_back(f.id + "@" + (f.gpu ? std::to_string(*f.gpu->index) : "host"));
  return ids;
}

// An 8-GPU data-parallel job; `tweak` changes GPUs at a given second.
Snapshot TrainingSnapshot(WallTime now, double seconds, const std::function<void(GpuSnapshot&, double)>& tweak) {
  Snapshot snapshot;
  snapshot.taken_at = now;
  for (uint32_t i = 0; i < 8; ++i) {
    const uint32_t util = 95 + static_cast<uint32_t>(std::lround(4 * std::sin(seconds / 13 + i)));
    GpuSnapshot gpu = GpuAt(i, util, {Process(4000 + i, "python", (30ull << 30) + (i << 20))});
    gpu.temperature_c = Field<uint32_t>::Value(66 + i % 3);
    tweak(gpu, seconds);
    snapshot.gpus.push_back(gpu);
  }
  return snapshot;
}

// Runs `length` of 5-second samples; returns the first time each finding appeared.
std::map<std::string, Duration> RunScenario(TrendDetectors& detectors, Duration length,
                                    const std::function<void(GpuSnapshot&, double)>& tweak) {
  FakeClock clock(Start());
  std::map<std::string, Duration> first_seen;
  for (Duration t{0}; t <= length; t += 5s) {
    clock.Set(Start() + t);
    detectors.Observe(TrainingSnapshot(clock.Now(), std::chrono::duration<double>(t).count(), tweak), clock.Now());
    for (const std::string& id : IdsAtGpus(detectors.Evaluate(clock.Now()))) first_seen.emplace(id, t);
  }
  return first_seen;
}

TEST(TrendDetectors, TwoHoursOfHealthyTrainingRaiseNothing) {
  TrendDetectors detectors({});
  auto seen = RunScenario(detectors, 2h, [](GpuSnapshot&, double) {});
  EXPECT_TRUE(seen.empty()) << seen.begin()->first;
}

TEST(TrendDetectors, OneHungRankIsAStragglerWithinItsWindow) {
  TrendDetectors detectors({});
  // Rank 3 hangs at 20 minutes: its GPU goes idle, the others keep spinning.
  auto seen = RunScenario(detectors, 40min, [](GpuSnapshot& gpu, double s) {
    if (gpu.index == 3 && s >= 1200) gpu.utilization_gpu_percent = Field<uint32_t>::Value(0);
  });
  ASSERT_TRUE(seen.contains("gpu_straggler@3"));
  // 5 minutes after, not before; and after 15 idle minutes with its process, stuck as well.
  EXPECT_EQ(seen, (std::map<std::string, Duration>{{"gpu_straggler@3", 25min}, {"utilization_stuck@3", 35min}}));
}

TEST(TrendDetectors, LeakingProcessAndCountersThroughSnapshots) {
  TrendDetectors detectors({});
  auto seen = RunScenario(detectors, 45min, [](GpuSnapshot& gpu, double s) {
    if (gpu.index == 5) {
      gpu.processes.value()[0].used_memory_bytes = Field<uint64_t>::Value((20ull << 30) + static_cast<uint64_t>(s / 60 * (16 << 20)));
    }
    if (gpu.index == 6) gpu.pcie_replay_count = Field<uint64_t>::Value(static_cast<uint64_t>(s));  // 60/min
  });
  ASSERT_TRUE(seen.contains("memory_leak@5"));
  EXPECT_EQ(seen["memory_leak@5"], 20min);  // as soon as min_span of history exists
  ASSERT_TRUE(seen.contains("pcie_replay_rate@6"));
  EXPECT_EQ(seen["pcie_replay_rate@6"], 1min);
  EXPECT_EQ(seen.size(), 2u);
}

TEST(TrendDetectors, StaleDataIsNotJudged) {
  TrendDetectors detectors({});
  auto seen = RunScenario(detectors, 30min, [](GpuSnapshot& gpu, double) {
    if (gpu.index == 0) gpu.processes = Field<std::vector<ProcessInfo>>::Value({});
    if (gpu.index == 0) gpu.utilization_gpu_percent = Field<uint32_t>::Value(100);
    if (gpu.index == 0) gpu.power_draw_w = Field<double>::Value(60);
  });
  ASSERT_TRUE(seen.contains("utilization_stuck@0"));
  EXPECT_FALSE(detectors.Evaluate(Start() + 30min).empty());
  EXPECT_TRUE(detectors.Evaluate(Start() + 35min).empty());  // no sample for 5 minutes
  ASSERT_NE(detectors.Track(0), nullptr);
}

TEST(TrendDetectors, JobStallCarriesTheGpuStateOfThatMoment) {
  TempDir dir;
  TrendConfig config;
  JobWatchConfig job;
  job.name = "llama";
  job.path = dir.File("train.log");
  job.progress_regex = R"(step \d+)";
  config.jobs.push_back(job);
  std::ofstream(job.path) << "";
  TrendDetectors detectors(config);

  FakeClock clock(Start());
  std::optional<Duration> fired;
  Finding stall;
  for (Duration t{0}; t <= 15min; t += 5s) {
    clock.Set(Start() + t);
    if (t < 5min && t % 30s == 0s) std::ofstream(job.path, std::ios::app) << "step " << t.count() << "\n";
    Snapshot snapshot = TrainingSnapshot(clock.Now(), 0, [&](GpuSnapshot& gpu, double) {
      if (t >= 5min) gpu.utilization_gpu_percent = Field<uint32_t>::Value(gpu.index == 2 ? 0 : 100);
    });
    if (t == 5min) snapshot.xid_events.push_back({.gpu_index = 2, .xid = 79, .time = clock.Now()});
    detectors.Observe(snapshot, clock.Now());
    for (const Finding& f : detectors.Evaluate(clock.Now())) {
      if (f.id == "job_stall" && !fired) {
        fired = t;
        stall = f;
      }
    }
  }
  ASSERT_TRUE(fired);
  EXPECT_EQ(*fired, 4min + 30s + 3min);  // last progress at 4:30
  EXPECT_EQ(stall.severity, Severity::kCritical);
  auto has = [&](const std::string& text) {
    return std::any_of(stall.evidence.begin(), stall.evidence.end(),
                       [&](const std::string& line) { return line.find(text) != std::string::npos; });
  };
  EXPECT_TRUE(has("GPU 2: util 0%, processes python[4002]"));
  EXPECT_TRUE(has("GPU 0: util 100%"));
  EXPECT_TRUE(has("Xid 79 on GPU 2"));
}

TEST(TrendDetectors, EachStalledJobIsItsOwnFinding) {
  TempDir dir;
  TrendConfig config;
  for (const char* name : {"llama", "mixtral"}) {
    JobWatchConfig job;
    job.name = name;
    job.path = dir.File(std::string(name) + ".log");
    std::ofstream(job.path) << "";
    config.jobs.push_back(job);
  }
  TrendDetectors detectors(config);
  RunScenario(detectors, 5min, [](GpuSnapshot&, double) {});

  std::vector<std::string> stalled;
  for (const Finding& f : detectors.Evaluate(Start() + 5min))
    if (f.id == "job_stall") stalled.push_back(f.subject);
  EXPECT_EQ(stalled, (std::vector<std::string>{"llama", "mixtral"}));
}

TEST(TrendDetectors, ReconfigureJudgesTheKeptHistoryByTheNewThresholds) {
  TrendDetectors detectors({});
  // GPU 0 spins at 100% with no process for 10 minutes: under the 15-minute default.
  auto seen = RunScenario(detectors, 10min, [](GpuSnapshot& gpu, double) {
    if (gpu.index != 0) return;
    gpu.processes = Field<std::vector<ProcessInfo>>::Value({});
    gpu.utilization_gpu_percent = Field<uint32_t>::Value(100);
    gpu.power_draw_w = Field<double>::Value(60);
  });
  EXPECT_TRUE(seen.empty()) << seen.begin()->first;

  TrendConfig shorter;
  shorter.utilization_stuck.after = 5min;
  detectors.Reconfigure(shorter);
  EXPECT_EQ(IdsAtGpus(detectors.Evaluate(Start() + 10min)), std::vector<std::string>{"utilization_stuck@0"});

  detectors.Reconfigure({});
  EXPECT_TRUE(detectors.Evaluate(Start() + 10min).empty());
}

TEST(TrendDetectors, ReconfigureJudgesStragglersAgain) {
  TrendConfig strict;
  strict.gpu_straggler.min_busy_peers = 8;  // more peers than an 8-GPU job has
  TrendDetectors detectors(strict);
  auto seen = RunScenario(detectors, 10min, [](GpuSnapshot& gpu, double) {
    if (gpu.index == 3) gpu.utilization_gpu_percent = Field<uint32_t>::Value(0);
  });
  EXPECT_TRUE(seen.empty()) << seen.begin()->first;

  detectors.Reconfigure({});  // min_busy_peers = 2: rank 3 has been a straggler all along
  EXPECT_EQ(IdsAtGpus(detectors.Evaluate(Start() + 10min)), std::vector<std::string>{"gpu_straggler@3"});
}

TEST(TrendDetectors, ReconfigureKeepsAJobReadTheSameWayAndRestartsOneReadDifferently) {
  TempDir dir;
  TrendConfig config;
  JobWatchConfig job;
  job.name = "llama";
  job.path = dir.File("train.log");
  job.progress_regex = R"(step \d+)";
  job.stall_after = 10min;
  config.jobs.push_back(job);
  std::ofstream(job.path) << "step 1\n";
  TrendDetectors detectors(config);
  RunScenario(detectors, 5min, [](GpuSnapshot&, double) {});  // no progress since the start
  EXPECT_TRUE(detectors.Evaluate(Start() + 5min).empty());

  config.jobs[0].stall_after = 3min;  // a threshold: what was read still holds
  detectors.Reconfigure(config);
  auto findings = detectors.Evaluate(Start() + 5min);
  ASSERT_EQ(IdsAtGpus(findings), std::vector<std::string>{"job_stall@host"});
  EXPECT_EQ(findings[0].subject, "llama");

  config.jobs[0].progress_regex = R"(iteration \d+)";  // read differently: watching starts over
  detectors.Reconfigure(config);
  detectors.Observe(TrainingSnapshot(Start() + 5min + 5s, 0, [](GpuSnapshot&, double) {}), Start() + 5min + 5s);
  EXPECT_TRUE(detectors.Evaluate(Start() + 5min + 5s).empty());
}

}  // namespace
}  // namespace gpudoctor
