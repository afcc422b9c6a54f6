// driver_hang and host_hung_tasks: a task is hung only when the kernel's log
// or the agent's samples show it blocked for the hung-task timeout.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "health/health_test_support.h"
#include "host/host_env.h"

namespace gpudoctor {
namespace {

using namespace testing_support;
using std::chrono::minutes;
using std::chrono::seconds;

BlockedTask Task(uint32_t pid, std::string name, std::vector<std::string> nvidia_ties = {}) {
  return {.pid = pid, .start_time_ticks = 1000 + pid, .context_switches = 42, .name = std::move(name),
          .wait_channel = "folio_wait_bit_common", .nvidia_ties = std::move(nvidia_ties)};
}

HostSignals HostWith(std::vector<BlockedTask> tasks) {
  HostSignals host = HealthyHost();
  host.blocked_tasks = Field<std::vector<BlockedTask>>::Value(std::move(tasks));
  host.hung_task_timeout_seconds = Field<uint64_t>::Value(120);
  return host;
}

// The kernel's report of a hung task, with the nvidia frames of its call trace when given.
LogEvent HungTaskReport(uint32_t pid, std::string process, std::string driver_frames = "") {
  LogEvent event;
  event.kind = "hung_task";
  event.severity = driver_frames.empty() ? EventSeverity::kWarning : EventSeverity::kCritical;
  event.pid = pid;
  event.process = process;
  event.raw = fmt::format("INFO: task {}:{} blocked for more than 120 seconds.", process, pid);
  event.time = kNow - minutes(30);
  if (!driver_frames.empty()) event.fields.push_back({"driver_frames", driver_frames});
  return event;
}

// The agent: one sample every 30 s from `first` to kNow, the same tasks blocked in each.
std::vector<Finding> EvaluateAsAgent(const HostSignals& host, WallTime first) {
  BlockedTaskWatch watch;
  for (WallTime t = first; t <= kNow; t += seconds(30)) watch.Observe(host, t);
  HealthInput input;
  input.host = &host;
  input.blocked_task_watch = &watch;
  input.now = kNow;
  return EvaluateRules(input, DefaultHealthConfig());
}

// The flapping case: one check saw tasks in D state for an instant and
// warned (a GPU tool among them: critical); the next check said ok.
TEST(HostHungTasks, TasksBlockedInOneSampleAreNeverAProblem) {
  std::vector<BlockedTask> tasks{Task(2001, "nvidia-smi")};
  for (uint32_t pid = 100; pid < 110; ++pid) tasks.push_back(Task(pid, "dd"));
  HostSignals host = HostWith(tasks);
  std::vector<Finding> findings = Evaluate(nullptr, &host);

  Finding hung = Single(findings, "host_hung_tasks");
  EXPECT_EQ(hung.severity, Severity::kOk);
  EXPECT_EQ(hung.summary, "No task hung in the kernel (11 tasks in D state in this sample only)");
  EXPECT_TRUE(EvidenceHas(hung, "pid 2001 (nvidia-smi) in D state, waiting in folio_wait_bit_common: one sighting, "
                                "not a hang unless it stays blocked for 2m"));
  EXPECT_EQ(Single(findings, "driver_hang").severity, Severity::kOk);
}

TEST(HostHungTasks, TheKernelsReportIsAHang) {
  HostSignals host = HostWith({});
  std::vector<LogEvent> events{HungTaskReport(123, "kworker/u8:2")};
  std::vector<Finding> findings = Evaluate(nullptr, &host, &events);
  Finding finding = Single(findings, "host_hung_tasks");
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_EQ(finding.summary, "kworker/u8:2 (pid 123) hung in the kernel");
  EXPECT_TRUE(EvidenceHas(finding, "INFO: task kworker/u8:2:123 blocked for more than 120 seconds."));
  EXPECT_EQ(Single(findings, "driver_hang").severity, Severity::kOk);

  events[0].time = kNow - std::chrono::hours(25);  // outside the 24 h window
  EXPECT_EQ(Single(Evaluate(nullptr, &host, &events), "host_hung_tasks").severity, Severity::kOk);
}

TEST(DriverHang, AReportWithNvidiaFramesIsCritical) {
  HostSignals host = HostWith({});
  std::vector<LogEvent> events{HungTaskReport(4242, "python3", "nvidia")};
  std::vector<Finding> findings = Evaluate(nullptr, &host, &events);
  Finding finding = Single(findings, "driver_hang");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.summary, "python3 (pid 4242) hung in the NVIDIA driver");
  EXPECT_TRUE(EvidenceHas(finding, "its kernel stack runs in nvidia"));
  EXPECT_FALSE(finding.cause.empty());
  EXPECT_FALSE(finding.actions.empty());
  EXPECT_EQ(Single(findings, "host_hung_tasks").severity, Severity::kOk);  // reported once, where it hangs
}

TEST(DriverHang, AReportedTaskStillBlockedWithADeviceOpenIsInTheDriver) {
  HostSignals host = HostWith({Task(4200, "python3", {"/dev/nvidia0 open"})});
  std::vector<LogEvent> events{HungTaskReport(4200, "python3")};
  Finding finding = Single(Evaluate(nullptr, &host, &events), "driver_hang");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_TRUE(EvidenceHas(finding, "pid 4200 (python3) in D state, waiting in folio_wait_bit_common now"));
  EXPECT_TRUE(EvidenceHas(finding, "/dev/nvidia0 open"));
}

TEST(DriverHang, AHungGpuToolIsInTheDriver) {
  HostSignals host = HostWith({});
  std::vector<LogEvent> events{HungTaskReport(812, "nvidia-persiste")};  // the kernel keeps 15 characters
  Finding finding = Single(Evaluate(nullptr, &host, &events), "driver_hang");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_TRUE(EvidenceHas(finding, "is a GPU tool"));
}

TEST(HostHungTasks, GpudoctorsOwnTasksAreNeverJudged) {
  HostSignals host = HostWith({});
  std::vector<LogEvent> events{HungTaskReport(3000, "gpudoctor")};
  std::vector<Finding> findings = Evaluate(nullptr, &host, &events);
  EXPECT_TRUE(Problems(findings).empty()) << Problems(findings).front().summary;
}

TEST(HostHungTasks, TheAgentJudgesATaskBlockedForTheKernelsTimeout) {
  HostSignals host = HostWith({Task(4100, "rsync"), Task(4200, "python3", {"/dev/nvidia0 open"})});
  // Blocked in every sample of the last 90 s: not yet the 120 s timeout.
  std::vector<Finding> early = EvaluateAsAgent(host, kNow - seconds(90));
  EXPECT_TRUE(Problems(early).empty()) << Problems(early).front().summary;

  std::vector<Finding> findings = EvaluateAsAgent(host, kNow - seconds(150));
  Finding storage = Single(findings, "host_hung_tasks");
  EXPECT_EQ(storage.severity, Severity::kWarning);
  EXPECT_EQ(storage.summary, "rsync (pid 4100) hung in the kernel");
  EXPECT_TRUE(EvidenceHas(storage, "blocked without being scheduled for 2m 30s"));
  Finding driver = Single(findings, "driver_hang");
  EXPECT_EQ(driver.severity, Severity::kCritical);
  EXPECT_EQ(driver.summary, "python3 (pid 4200) hung in the NVIDIA driver");
  EXPECT_TRUE(EvidenceHas(driver, "/dev/nvidia0 open"));
}

TEST(HostHungTasks, TheConfiguredTimeoutAppliesWhenTheKernelsDetectorIsOff) {
  HostSignals host = HostWith({Task(4100, "rsync")});
  host.hung_task_timeout_seconds = Field<uint64_t>::Value(0);
  Finding finding = Single(EvaluateAsAgent(host, kNow - seconds(150)), "host_hung_tasks");
  EXPECT_EQ(finding.severity, Severity::kWarning);  // blocked_for: 120 s

  Finding one_check = Single(Evaluate(nullptr, &host), "host_hung_tasks");
  EXPECT_EQ(one_check.severity, Severity::kOk);
  EXPECT_TRUE(EvidenceHas(one_check, "the kernel's hung-task detector is off"));
}

class NoCommands final : public CommandRunner {
 public:
  CommandResult Run(const std::vector<std::string>&, Duration) override {
    return {CommandStatus::kNotInstalled, -1, "", "", "not installed"};
  }
};

// The fixture tree: gpudoctor and its probe in D state next to five other
// tasks. One check judges nothing hung; the agent, seeing them blocked for
// 150 s, finds the storage waits and the driver hangs.
TEST(HungTasksOfAHost, FromTheFixtureTree) {
  NoCommands commands;
  LinuxHostEnv env(std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/host/hung_tasks", commands);
  HostConfig config;
  config.ipmi = false;
  HostSignals host = CollectHostSignals(config, env);
  std::vector<Finding> once = Evaluate(nullptr, &host);
  EXPECT_EQ(Single(once, "host_hung_tasks").severity, Severity::kOk);
  EXPECT_EQ(Single(once, "driver_hang").severity, Severity::kOk);

  std::vector<Finding> agent = EvaluateAsAgent(host, kNow - seconds(150));
  EXPECT_EQ(Single(agent, "host_hung_tasks").summary, "2 tasks hung in the kernel: rsync (pid 4100) and nvme_poll (pid 4500)");
  EXPECT_EQ(Single(agent, "driver_hang").summary,
            "3 tasks hung in the NVIDIA driver: python3 (pid 4200), nvidia-smi (pid 4300) and kworker/u64:3 (pid 4400)");
}

}  // namespace
}  // namespace gpudoctor
