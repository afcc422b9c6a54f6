#include "health/detectors/memory_leak.h"

#include <gtest/gtest.h>

#include <cmath>

#include "health/detectors/detector_test_support.h"

namespace gpudoctor {
namespace {

using namespace testing;

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;

// A track whose single process uses `bytes(seconds)`, sampled every 5 s for `length`.
GpuTrack ProcessTrack(Duration length, const std::function<double(double)>& bytes) {
  GpuTrack track = TrackOf(length, 5s, [](double) { return Busy(); });
  auto& series = track.process_memory[{4242, "python"}];
  for (const GpuPoint& point : track.points)
    series.push_back({point.time(), bytes(std::chrono::duration<double>(point.time() - Start()).count())});
  track.memory_total_bytes = 80 * kGiB;
  track.memory_used_bytes = series.back().used_bytes;
  return track;
}

TEST(MemoryLeak, SteadyGrowthIsALeakWithRatePeakAndTimeToFull) {
  // 10 GiB held, growing 12 MiB/min.
  GpuTrack track = ProcessTrack(40min, [](double s) { return 10 * kGiB + 12 * kMiB * s / 60; });
  auto growth = AnalyzeGrowth(track.process_memory.begin()->second, {}, End(track));
  ASSERT_TRUE(growth);
  EXPECT_NEAR(growth->rate_bytes_per_min / kMiB, 12, 0.01);
  EXPECT_TRUE(growth->troughs_rising);
  EXPECT_NEAR(growth->unreleased_bytes / kMiB, 12 * 30 * 3 / 4, 5);  // troughs span three quarters of 30 min

  auto finding = DetectMemoryLeak(track, {}, End(track));
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->id, "memory_leak");
  EXPECT_EQ(finding->severity, Severity::kWarning);
  EXPECT_NE(finding->summary.find("python (pid 4242)"), std::string::npos) << finding->summary;
  EXPECT_NE(finding->summary.find("12.0 MiB/min"), std::string::npos) << finding->summary;
  EXPECT_NE(finding->evidence[0].find("peak 10.5 GiB"), std::string::npos) << finding->evidence[0];
  EXPECT_NE(finding->evidence[0].find("unreleased between phases"), std::string::npos);
  // (80 - 10.47) GiB at 12 MiB/min is about 99 hours.
  EXPECT_NE(finding->evidence[1].find("time to exhaustion: ~4d"), std::string::npos) << finding->evidence[1];
}

TEST(MemoryLeak, SawToothWithRisingTroughsIsALeak) {
  // Each 2-minute request allocates 2 GiB and frees all but 40 MiB of it.
  GpuTrack track = ProcessTrack(30min, [](double s) {
    const double phase = std::fmod(s, 120) / 120;
    return 4 * kGiB + std::floor(s / 120) * 40 * kMiB + (phase < 0.5 ? 2 * kGiB * phase * 2 : 0);
  });
  auto finding = DetectMemoryLeak(track, {}, End(track));
  ASSERT_TRUE(finding);
  EXPECT_NE(finding->evidence[0].find("peak 6.4 GiB"), std::string::npos) << finding->evidence[0];
}

TEST(MemoryLeak, HealthyPatternsAreNotLeaks) {
  MemoryLeakConfig config;
  auto check_quiet = [&](const char* name, Duration length, const std::function<double(double)>& bytes) {
    GpuTrack track = ProcessTrack(length, bytes);
    EXPECT_FALSE(DetectMemoryLeak(track, config, End(track))) << name;
  };
  check_quiet("flat", 1h, [](double) { return 20 * kGiB; });
  check_quiet("steady saw-tooth", 1h, [](double s) { return 4 * kGiB + (std::fmod(s, 120) < 60 ? 2 * kGiB : 0); });
  // One allocation of 6 GiB: a rise, then flat. The slope is positive but nothing keeps growing.
  check_quiet("single rise", 30min, [](double s) { return s < 700 ? 4 * kGiB : 10 * kGiB; });
  // The caching allocator warms up for 10 minutes and levels off.
  check_quiet("warm-up", 30min, [](double s) { return 4 * kGiB + 8 * kGiB * (1 - std::exp(-s / 150)); });
  check_quiet("too short to judge", 10min, [](double s) { return 4 * kGiB + 100 * kMiB * s / 60; });
  check_quiet("slow creep under the rate", 1h, [](double s) { return 4 * kGiB + 0.5 * kMiB * s / 60; });
}

TEST(MemoryLeak, CloseToFullIsCritical) {
  GpuTrack track = ProcessTrack(30min, [](double s) { return 70 * kGiB + 1 * kGiB * s / 60 / 10; });  // 102 MiB/min
  track.memory_used_bytes = 79.5 * kGiB;
  auto finding = DetectMemoryLeak(track, {}, End(track));
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->severity, Severity::kCritical);
}

TEST(MemoryLeak, EveryLeakingProcessOfTheGpuIsListedFastestFirst) {
  GpuTrack track = ProcessTrack(30min, [](double s) { return 1 * kGiB + 5 * kMiB * s / 60; });
  auto& other = track.process_memory[{777, "server"}];
  auto& healthy = track.process_memory[{888, "idle"}];
  for (const MemoryPoint& p : track.process_memory[{4242, "python"}]) {
    const double s = std::chrono::duration<double>(p.time - Start()).count();
    other.push_back({p.time, 2 * kGiB + 20 * kMiB * s / 60});
    healthy.push_back({p.time, 1 * kGiB});
  }
  auto finding = DetectMemoryLeak(track, {}, End(track));
  ASSERT_TRUE(finding);
  EXPECT_NE(finding->summary.find("server (pid 777)"), std::string::npos) << finding->summary;
  EXPECT_NE(finding->summary.find("2 processes growing"), std::string::npos);
  EXPECT_EQ(finding->evidence.size(), 2u + 2u);  // two processes, time to full, GPU memory
}

TEST(MemoryLeak, SuggestsTheTraceAllocCommandOfTheFastestProcess) {
  GpuTrack track = ProcessTrack(40min, [](double s) { return 1 * kGiB + 12 * kMiB * s / 60; });
  const ProcessCommandLines command_lines = [](uint32_t pid, const std::string& name) {
    EXPECT_EQ(pid, 4242u);
    EXPECT_EQ(name, "python");
    return std::vector<std::string>{"python", "train.py", "--run", "my run"};
  };
  auto finding = DetectMemoryLeak(track, {}, End(track), command_lines);
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->actions.front(),
            "Find the call that allocates what is never freed: gpudoctor trace-alloc -- python train.py --run 'my run'");
  EXPECT_EQ(finding->evidence[1], "pid 4242 command line: python train.py --run 'my run'");
  // Unreadable (the process is gone, or another pid namespace): the action says how, with the pid.
  auto unknown = DetectMemoryLeak(track, {}, End(track), [](uint32_t, const std::string&) {
    return std::vector<std::string>{};
  });
  ASSERT_TRUE(unknown);
  EXPECT_NE(unknown->actions.front().find("start pid 4242's program again as `gpudoctor trace-alloc -- COMMAND`"),
            std::string::npos)
      << unknown->actions.front();
}

}  // namespace
}  // namespace gpudoctor
