#include "health/detectors/job_watch.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <fstream>

#include "health/detectors/detector_test_support.h"

namespace gpudoctor {
namespace {

using namespace testing;

const GpuStateAtMoment kBusyGpus{{"GPU 0: util 100%, processes python[4242] 30.0 GiB", "Xid 79 on GPU 0 at ..."}, true};

class JobWatchTest : public ::testing::Test {
 protected:
  JobWatchConfig Config() {
    JobWatchConfig config;
    config.name = "llama";
    config.path = dir_.File("train.log");
    config.progress_regex = R"(step \d+)";
    config.loss_regex = R"(loss[=: ]+(\S+))";
    return config;
  }
  TempDir dir_;
};

TEST_F(JobWatchTest, StallFiresAfterThreeMinutesWithoutProgressAndNotBefore) {
  JobWatchConfig config = Config();
  Append(config.path, "");
  JobWatch watch(config);
  WallTime now = Start();
  for (int step = 0; step < 20; ++step, now += 30s) {
    Append(config.path, "step " + std::to_string(step) + " loss=" + std::to_string(2.5 - step * 0.01) + "\n");
    watch.Poll(now);
    EXPECT_TRUE(watch.Evaluate(now, kBusyGpus).empty()) << step;
  }
  const WallTime last_progress = now - 30s;
  Append(config.path, "NCCL INFO some chatter that is not progress\n");
  watch.Poll(last_progress + 2min + 55s);
  EXPECT_TRUE(watch.Evaluate(last_progress + 2min + 55s, kBusyGpus).empty());
  watch.Poll(last_progress + 3min);
  auto findings = watch.Evaluate(last_progress + 3min, kBusyGpus);
  ASSERT_EQ(Ids(findings), std::vector<std::string>{"job_stall"});
  const Finding& stall = findings[0];
  EXPECT_EQ(stall.severity, Severity::kCritical);
  EXPECT_EQ(stall.summary, "Job llama made no progress for 3m 0s");
  EXPECT_NE(stall.evidence[2].find("last progress line: step 19"), std::string::npos) << stall.evidence[2];
  EXPECT_EQ(stall.evidence[3], kBusyGpus.lines[0]);  // the GPUs at that moment
  EXPECT_EQ(stall.evidence[4], kBusyGpus.lines[1]);

  // Progress again clears it.
  Append(config.path, "step 20 loss=2.2\n");
  watch.Poll(last_progress + 4min);
  EXPECT_TRUE(watch.Evaluate(last_progress + 4min, kBusyGpus).empty());
}

TEST_F(JobWatchTest, AFinishedJobWithoutGpuProcessesIsNotStalled) {
  JobWatchConfig config = Config();
  Append(config.path, "");
  JobWatch watch(config);
  watch.Poll(Start());
  EXPECT_TRUE(watch.Evaluate(Start() + 1h, GpuStateAtMoment{{"GPU 0: util 0%, no processes"}, false}).empty());
  EXPECT_EQ(Ids(watch.Evaluate(Start() + 1h, kBusyGpus)), std::vector<std::string>{"job_stall"});
}

TEST_F(JobWatchTest, NoFileNoFinding) {
  JobWatch watch(Config());
  watch.Poll(Start());
  EXPECT_TRUE(watch.Evaluate(Start() + 1h, kBusyGpus).empty());
}

TEST_F(JobWatchTest, NanLossIsAWarningUntilAFiniteLossReturns) {
  JobWatchConfig config = Config();
  Append(config.path, "");
  JobWatch watch(config);
  watch.Poll(Start() - 10s);
  Append(config.path, "step 1 loss=2.5\nstep 2 loss: nan\n");
  watch.Poll(Start());
  auto findings = watch.Evaluate(Start(), kBusyGpus);
  ASSERT_EQ(Ids(findings), std::vector<std::string>{"job_loss_nan"});
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  EXPECT_NE(findings[0].evidence[1].find("step 2 loss: nan"), std::string::npos);
  Append(config.path, "step 3 loss=inf\n");
  watch.Poll(Start() + 10s);
  EXPECT_EQ(Ids(watch.Evaluate(Start() + 10s, kBusyGpus)), std::vector<std::string>{"job_loss_nan"});
  Append(config.path, "step 4 loss=2.4\n");
  watch.Poll(Start() + 20s);
  EXPECT_TRUE(watch.Evaluate(Start() + 20s, kBusyGpus).empty());
}

TEST_F(JobWatchTest, FlatLossIsAWarningNoisyLossIsNot) {
  JobWatchConfig config = Config();
  Append(config.path, "");
  JobWatch flat(config);
  WallTime now = Start();
  for (int step = 0; step <= 40; ++step, now += 15s) {
    Append(config.path, "step " + std::to_string(step) + " loss=2.302585\n");
    flat.Poll(now);
  }
  auto findings = flat.Evaluate(now, kBusyGpus);
  ASSERT_EQ(Ids(findings), std::vector<std::string>{"job_loss_flat"});
  EXPECT_NE(findings[0].summary.find("flat at 2.3025"), std::string::npos) << findings[0].summary;

  JobWatchConfig noisy_config = Config();
  noisy_config.path = dir_.File("noisy.log");
  Append(noisy_config.path, "");
  JobWatch noisy(noisy_config);
  now = Start();
  for (int step = 0; step <= 40; ++step, now += 15s) {
    Append(noisy_config.path, "step " + std::to_string(step) + " loss=" + std::to_string(2.3 + (step % 3) * 0.01) + "\n");
    noisy.Poll(now);
  }
  EXPECT_TRUE(noisy.Evaluate(now, kBusyGpus).empty());
}

TEST_F(JobWatchTest, AnyLineIsProgressWithoutAProgressRegex) {
  JobWatchConfig config = Config();
  config.progress_regex.clear();
  config.loss_regex.clear();
  Append(config.path, "");
  JobWatch watch(config);
  watch.Poll(Start());
  Append(config.path, "anything\n");
  watch.Poll(Start() + 2min);
  EXPECT_TRUE(watch.Evaluate(Start() + 4min, kBusyGpus).empty());
  EXPECT_EQ(Ids(watch.Evaluate(Start() + 5min, kBusyGpus)), std::vector<std::string>{"job_stall"});
}

TEST_F(JobWatchTest, HeartbeatFile) {
  JobWatchConfig config;
  config.name = "bert";
  config.path = dir_.File("heartbeat");
  config.heartbeat = true;
  Append(config.path, "");
  JobWatch watch(config);
  watch.Poll(Start());
  for (int i = 1; i <= 10; ++i) {
    struct timespec times[2] = {{0, UTIME_OMIT}, {1000 + i, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, config.path.c_str(), times, 0), 0);
    watch.Poll(Start() + i * 1min);
    EXPECT_TRUE(watch.Evaluate(Start() + i * 1min, kBusyGpus).empty());
  }
  watch.Poll(Start() + 13min);
  EXPECT_EQ(Ids(watch.Evaluate(Start() + 13min, kBusyGpus)), std::vector<std::string>{"job_stall"});
}

}  // namespace
}  // namespace gpudoctor
