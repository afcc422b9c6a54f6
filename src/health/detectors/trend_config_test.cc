#include "health/detectors/trend_config.h"

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

using namespace std::chrono_literals;

TEST(TrendConfig, DefaultsWithoutADetectorsTable) {
  auto config = ParseTrendConfig("[agent]\ninterval = \"5s\"\n");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->utilization_stuck.after, 15min);
  EXPECT_EQ(config->memory_leak.window, 30min);
  EXPECT_TRUE(config->jobs.empty());
  EXPECT_EQ(config->LongestWindow(), 30min + 2min);
}

TEST(TrendConfig, OverridesAndJobs) {
  auto config = ParseTrendConfig(R"(
[detectors]
max_sample_gap = 60

[detectors.utilization_stuck]
after = "20m"
busy_wait_power_fraction = 0.4
busy_wait_sm_active = 0.1

[detectors.tensor_cores_idle]
after = "1h"
max_tensor_active = 0.02

[detectors.counter_rates]
pcie_replays_per_min = 12

[[detectors.job]]
name = "llama"
log = "/scratch/llama/train.log"
progress_regex = 'step \d+'
loss_regex = 'loss[=: ]+(\S+)'
stall_after = "2m"

[[detectors.job]]
heartbeat = "/run/job/heartbeat"
require_gpu_processes = false
)");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->max_sample_gap, 60s);
  EXPECT_EQ(config->utilization_stuck.after, 20min);
  EXPECT_DOUBLE_EQ(config->utilization_stuck.busy_wait_power_fraction, 0.4);
  EXPECT_DOUBLE_EQ(config->utilization_stuck.busy_wait_sm_active, 0.1);
  EXPECT_EQ(config->tensor_cores_idle.after, std::chrono::hours(1));
  EXPECT_DOUBLE_EQ(config->tensor_cores_idle.max_tensor_active, 0.02);
  EXPECT_DOUBLE_EQ(config->tensor_cores_idle.min_sm_active, 0.5);
  EXPECT_DOUBLE_EQ(config->counter_rates.pcie_replays_per_min, 12);
  ASSERT_EQ(config->jobs.size(), 2u);
  EXPECT_EQ(config->jobs[0].name, "llama");
  EXPECT_FALSE(config->jobs[0].heartbeat);
  EXPECT_EQ(config->jobs[0].stall_after, 2min);
  EXPECT_EQ(config->jobs[1].name, "/run/job/heartbeat");
  EXPECT_TRUE(config->jobs[1].heartbeat);
  EXPECT_FALSE(config->jobs[1].require_gpu_processes);
  EXPECT_EQ(config->jobs[1].stall_after, 3min);
}

TEST(TrendConfig, MistakesAreNamed) {
  auto error_of = [](const char* text) {
    auto config = ParseTrendConfig(text);
    return config.ok() ? std::string("accepted") : config.error().message;
  };
  EXPECT_EQ(error_of("[detectors.utilization_stuck]\naftr = \"5m\"\n"), "detectors.utilization_stuck.aftr: unknown key");
  EXPECT_EQ(error_of("[detectors.cooling]\n"), "detectors.cooling: unknown key");
  EXPECT_NE(error_of("[detectors.memory_leak]\nwindow = \"soon\"\n").find("detectors.memory_leak.window: expected a duration"),
            std::string::npos);
  EXPECT_EQ(error_of("[detectors.memory_leak]\nphases = 1\n"), "detectors.memory_leak.phases: needs at least 2");
  EXPECT_EQ(error_of("[[detectors.job]]\nname = \"x\"\n"), "detectors.job[0].log: set exactly one of `log` and `heartbeat`");
  EXPECT_NE(error_of("[[detectors.job]]\nlog = \"/x\"\nprogress_regex = \"(\"\n").find("progress_regex: bad regex"),
            std::string::npos);
  EXPECT_EQ(error_of("[[detectors.job]]\nlog = \"/x\"\nloss_regex = \"loss\"\n"),
            "detectors.job[0].loss_regex: needs a capture group around the loss value");
  EXPECT_NE(error_of("[detectors\n").find("config line 1"), std::string::npos);
  EXPECT_EQ(error_of("detectors = 3\n"), "detectors: expected a table");
  EXPECT_EQ(error_of("[[detectors.job]]\nname = \"a\"\nlog = \"/x\"\n[[detectors.job]]\nname = \"a\"\nlog = \"/y\"\n"),
            "detectors.job[1].name: 'a' is already the name of detectors.job[0]");
}

}  // namespace
}  // namespace gpudoctor
