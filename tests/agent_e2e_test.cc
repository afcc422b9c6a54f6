// End-to-end tests of `gpudoctor agent`: the real binary against the fake
// NVML library, queried over HTTP, stopped with SIGTERM.

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/scratch_dir.h"
#include "store/sqlite_store.h"
#include "tests/run_binary.h"
#include "tests/running_agent.h"

namespace gpudoctor::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool Has(const json& findings, const std::string& id, std::optional<int> gpu = std::nullopt) {
  return std::any_of(findings.begin(), findings.end(),
                     [&](const json& f) { return f["id"] == id && (!gpu || GpuOf(f) == gpu); });
}


// The agent stops cleanly on SIGTERM: the end of every test that started one.
void ExpectCleanStop(RunningAgent& agent) {
  auto code = agent.Terminate(10s);
  ASSERT_TRUE(code) << "the agent did not stop within 10 s of SIGTERM\n" << agent.log();
  EXPECT_EQ(*code, 0) << agent.log();
}

TEST(AgentE2E, ServesMetricsAndFindingsAndStopsCleanlyOnSigterm) {
  RunningAgent agent("healthy-8xh100.toml");
  ASSERT_TRUE(agent.WaitUntilHealthy()) << agent.log();

  auto metrics = agent.client().Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  for (int gpu = 0; gpu < 8; ++gpu) {
    std::regex sample("gpudoctor_gpu_temperature_celsius\\{[^}]*gpu=\"" + std::to_string(gpu) + "\"[^}]*\\} ");
    EXPECT_TRUE(std::regex_search(metrics->body, sample)) << "GPU " << gpu << "\n" << metrics->body;
  }

  auto findings = agent.client().Get("/api/v1/findings");
  ASSERT_TRUE(findings);
  EXPECT_EQ(findings->status, 200);
  EXPECT_FALSE(json::parse(findings->body, nullptr, false).is_discarded()) << findings->body;

  auto code = agent.Terminate(5s);
  ASSERT_TRUE(code) << "the agent did not stop within 5 s of SIGTERM\n" << agent.log();
  EXPECT_EQ(*code, 0) << agent.log();

  SqliteStoreOptions read_only;
  read_only.read_only = true;
  auto store = SqliteHistoryStore::Open(agent.db_path(), read_only);
  ASSERT_TRUE(store) << store.error().message;
  auto integrity = (*store)->IntegrityCheck();
  ASSERT_TRUE(integrity);
  EXPECT_EQ(*integrity, "ok");
  auto gpus = (*store)->ListGpus();
  ASSERT_TRUE(gpus);
  EXPECT_EQ(gpus->size(), 8u);
}

TEST(AgentE2E, KeepsServingWhileNvmlHangs) {
  RunningAgent agent("nvml-hang.toml");
  ASSERT_TRUE(agent.WaitUntilHealthy()) << agent.log();
  EXPECT_TRUE(agent.WaitForFinding("nvml_hang", std::nullopt, 20s)) << agent.log();

  // Several cycles later, still answering and still current.
  const int64_t samples = agent.SamplesTaken();
  ASSERT_TRUE(Eventually([&] { return agent.SamplesTaken() >= samples + 3; }, 20s)) << agent.log();
  auto health = agent.client().Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto metrics = agent.client().Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  ExpectCleanStop(agent);
}

// A probe stuck in NVML is killed by its agent, later; an agent killed outright leaves nobody to do it, so the
// probe ends itself once its parent is gone.
TEST(AgentE2E, AProbeStuckInNvmlEndsWithItsAgent) {
  RunningAgent agent("nvml-hang.toml");
  ASSERT_TRUE(agent.WaitUntilHealthy()) << agent.log();
  ASSERT_TRUE(agent.WaitForFinding("nvml_hang", std::nullopt, 20s)) << agent.log();
  const std::vector<pid_t> probes = agent.Children();
  ASSERT_FALSE(probes.empty());
  agent.Signal(SIGKILL);
  // Orphans are reaped by init (or the nearest subreaper); a process that is gone has no /proc entry, a zombie
  // waiting to be reaped has state Z.
  auto gone = [](pid_t pid) {
    const std::string status = ReadAll("/proc/" + std::to_string(pid) + "/stat");
    const size_t close = status.rfind(')');
    return status.empty() || (close != std::string::npos && close + 2 < status.size() && status[close + 2] == 'Z');
  };
  EXPECT_TRUE(Eventually([&] { return std::all_of(probes.begin(), probes.end(), gone); }, 10s));
}

TEST(AgentE2E, OnceRunsOneCycleAndExits) {
  ScratchDir dir;
  auto result = RunGpudoctor("--simulate " + Example("healthy-8xh100.toml") + " agent --once --log none --db " +
                             dir.File("a/b/history.db"));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(dir.File("a/b/history.db")));
}

TEST(AgentE2E, UncreatableDatabaseExits73) {
  auto result = RunGpudoctor("--simulate " + Example("healthy-8xh100.toml") +
                             " agent --once --log none --db /proc/no-such-dir/history.db");
  EXPECT_EQ(result.exit_code, 73);
}

TEST(AgentE2E, IntervalBelowOneSecondIsAUsageError) {
  auto result = RunGpudoctor("--simulate " + Example("healthy-8xh100.toml") + " agent --once --interval 500ms");
  EXPECT_EQ(result.exit_code, 64);
}

// ---- --token-file ----------------------------------------------------------

TEST(AgentE2E, TokenFileProtectsTheApi) {
  ScratchDir dir;
  const std::string token = dir.Write("token", "  s3cret-from-a-file \n");
  RunningAgent agent({.args = {"--token-file", token}});
  ASSERT_TRUE(agent.WaitUntilHealthy()) << agent.log();  // /healthz needs no token

  auto refused = agent.client().Get("/api/v1/status");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  auto accepted = agent.client().Get("/api/v1/status", {{"Authorization", "Bearer s3cret-from-a-file"}});
  ASSERT_TRUE(accepted);
  EXPECT_EQ(accepted->status, 200);
  ExpectCleanStop(agent);
}

TEST(AgentE2E, TokenFileMistakesHaveClearMessagesAndExitCodes) {
  ScratchDir dir;
  const std::string base = "--simulate " + Example("healthy-8xh100.toml") + " agent --once --log none --db " +
                           dir.File("h.db") + " ";
  auto missing = RunGpudoctor(base + "--token-file " + dir.File("missing"), Stderr::kCapture);
  EXPECT_EQ(missing.exit_code, 66);
  EXPECT_NE(missing.output.find("--token-file: cannot read " + dir.File("missing")), std::string::npos)
      << missing.output;

  auto empty = RunGpudoctor(base + "--token-file " + dir.Write("empty", "\n"), Stderr::kCapture);
  EXPECT_EQ(empty.exit_code, 65);
  EXPECT_NE(empty.output.find("is empty"), std::string::npos) << empty.output;

  auto directory = RunGpudoctor(base + "--token-file " + dir.File(""), Stderr::kCapture);
  EXPECT_EQ(directory.exit_code, 66);
  EXPECT_NE(directory.output.find("is a directory"), std::string::npos) << directory.output;

  auto both = RunGpudoctor(base + "--token x --token-file " + dir.Write("token", "y\n"), Stderr::kCapture);
  EXPECT_EQ(both.exit_code, 64);
  EXPECT_NE(both.output.find("--token"), std::string::npos) << both.output;
}

// ---- SIGHUP ----------------------------------------------------------------

TEST(AgentE2E, SighupAppliesNewRuleAndDetectorThresholdsAndKeepsTheOldConfigWhenBroken) {
  ScratchDir dir;
  // GPUs 0-5 run at about 63 C; GPU 6 spins at 100% on low power and GPU 7
  // idles with a process, but utilization_stuck waits an hour here.
  const std::string config = dir.Write("agent.toml", "[detectors.utilization_stuck]\nafter = \"1h\"\n");
  RunningAgent agent({.scenario = "utilization-stuck.toml", .args = {"--config", config}});
  ASSERT_TRUE(agent.WaitUntilHealthy()) << agent.log();
  const int64_t samples = agent.SamplesTaken();
  ASSERT_TRUE(Eventually([&] { return agent.SamplesTaken() >= samples + 2; }, 20s)) << agent.log();
  EXPECT_FALSE(Has(agent.Findings(), "temperature_high")) << agent.Findings().dump(2);
  EXPECT_FALSE(Has(agent.Findings(), "utilization_stuck")) << agent.Findings().dump(2);

  dir.Write("agent.toml",
            "[rules.temperature_high]\nuse_gpu_limits = false\nwarning_c = 50\n"
            "[detectors.utilization_stuck]\nafter = \"2s\"\n");
  agent.Signal(SIGHUP);
  ASSERT_TRUE(agent.LogShows("config reloaded from " + config)) << agent.log();
  EXPECT_TRUE(agent.WaitForFinding("temperature_high", 0, 10s)) << agent.log();
  // The detectors kept the history they had: GPU 6 has spun for longer than 2 s already.
  EXPECT_TRUE(agent.WaitForFinding("utilization_stuck", 6, 10s)) << agent.log();
  EXPECT_TRUE(agent.WaitForFinding("utilization_stuck", 7, 10s)) << agent.log();

  dir.Write("agent.toml", "[rules.temperature_high]\nwarning_c = \"warm\"\n");
  agent.Signal(SIGHUP);
  ASSERT_TRUE(agent.LogShows("config not reloaded, keeping the old one")) << agent.log();
  const int64_t after_refusal = agent.SamplesTaken();
  ASSERT_TRUE(Eventually([&] { return agent.SamplesTaken() >= after_refusal + 2; }, 20s)) << agent.log();
  EXPECT_TRUE(agent.WaitForFinding("temperature_high", 0, 1s)) << agent.log();
  EXPECT_TRUE(agent.WaitForFinding("utilization_stuck", 6, 1s)) << agent.log();
  ExpectCleanStop(agent);
}

// ---- Jobs ------------------------------------------------------------------

TEST(AgentE2E, TwoStalledJobsAreTwoIncidents) {
  ScratchDir dir;
  const std::string config = dir.Write(
      "agent.toml", "[[detectors.job]]\nname = \"llama\"\nlog = \"" + dir.Write("llama.log", "") +
                        "\"\nstall_after = \"2s\"\n"
                        "[[detectors.job]]\nname = \"mixtral\"\nlog = \"" + dir.Write("mixtral.log", "") +
                        "\"\nstall_after = \"2s\"\n");
  RunningAgent agent({.args = {"--config", config}});
  ASSERT_TRUE(agent.WaitUntilHealthy()) << agent.log();
  std::vector<std::string> keys;
  ASSERT_TRUE(Eventually(
      [&] {
        keys.clear();
        for (const json& f : agent.Findings())
          if (f["id"] == "job_stall") keys.push_back(f["key"].get<std::string>() + " " + f["subject"].dump());
        std::sort(keys.begin(), keys.end());
        return keys.size() == 2;
      },
      15s))
      << agent.log();
  EXPECT_EQ(keys, (std::vector<std::string>{"job_stall/llama \"llama\"", "job_stall/mixtral \"mixtral\""}));
  ExpectCleanStop(agent);
}

// ---- Alerts ----------------------------------------------------------------

// An HTTP server on 127.0.0.1 that records the POSTs it gets.
class WebhookReceiver {
 public:
  WebhookReceiver() {
    server_.Post("/hook", [this](const httplib::Request& request, httplib::Response& response) {
      std::lock_guard lock(mutex_);
      bodies_.push_back(json::parse(request.body, nullptr, false));
      content_types_.push_back(request.get_header_value("Content-Type"));
      response.status = 204;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~WebhookReceiver() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }
  std::vector<json> bodies() {
    std::lock_guard lock(mutex_);
    return bodies_;
  }
  std::vector<std::string> content_types() {
    std::lock_guard lock(mutex_);
    return content_types_;
  }

 private:
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  std::mutex mutex_;
  std::vector<json> bodies_;
  std::vector<std::string> content_types_;
};

TEST(AgentE2E, AlertsReachAWebhookAndAnExecHook) {
  ScratchDir dir;
  WebhookReceiver receiver;
  const std::string hook_output = dir.File("hook.txt");
  const std::string config = dir.Write("agent.toml", "[alerts]\nmin_interval = \"0s\"\ngroup_wait = \"0s\"\n"
                                                     "[[alerts.webhook]]\nurl = \"" + receiver.url() + "\"\n"
                                                     "[[alerts.exec]]\nargv = [\"/bin/sh\", \"-c\", "
                                                     "'echo \"$GPUDOCTOR_EVENT $GPUDOCTOR_FINDING_KEY\" >> \"$1\"', "
                                                     "\"hook\", \"" + hook_output + "\"]\n");
  // GPU 4 has overheated into thermal slowdown.
  RunningAgent agent({.scenario = "overheating.toml", .args = {"--config", config}});
  ASSERT_TRUE(agent.WaitUntilHealthy()) << agent.log();
  std::optional<json> hot = agent.WaitForFinding("temperature_high", 4, 10s);
  ASSERT_TRUE(hot) << agent.log();

  std::optional<json> alert;
  ASSERT_TRUE(Eventually(
      [&] {
        for (const json& body : receiver.bodies()) {
          if (body.is_object() && body.contains("finding") && body["finding"]["key"] == (*hot)["key"]) alert = body;
        }
        return alert.has_value();
      },
      10s))
      << agent.log();
  EXPECT_EQ((*alert)["event"], "opened");
  EXPECT_EQ((*alert)["finding"]["id"], "temperature_high");
  EXPECT_EQ((*alert)["finding"]["incident_id"], (*hot)["incident_id"]);
  EXPECT_EQ((*alert)["finding"]["gpu"]["index"], 4);
  EXPECT_EQ(receiver.content_types().front(), "application/json");

  const std::string expected_line = "opened " + (*hot)["key"].get<std::string>() + "\n";
  EXPECT_TRUE(Eventually([&] { return ReadAll(hook_output).find(expected_line) != std::string::npos; }, 10s))
      << ReadAll(hook_output) << agent.log();
  ExpectCleanStop(agent);
}

// ---- The kernel log ----------------------------------------------------------

// A kernel log line as journalctl -o short-iso writes it, stamped now.
std::string KernelLine(const std::string& message) {
  const time_t now = time(nullptr);
  struct tm utc {};
  gmtime_r(&now, &utc);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S+0000", &utc);
  return std::string(stamp) + " gpu-node kernel: " + message + "\n";
}

TEST(AgentE2E, AnXidAppendedToTheKernelLogBecomesAFindingAndACount) {
  ScratchDir dir;
  const std::string kernel_log = dir.Write("kern.log", KernelLine("usb 1-1: new high-speed USB device"));
  RunningAgent agent({.args = {"--log", kernel_log}});
  ASSERT_TRUE(agent.WaitUntilHealthy()) << agent.log();
  ASSERT_TRUE(agent.LogShows("following " + kernel_log)) << agent.log();  // from here on no line is missed
  EXPECT_FALSE(Has(agent.Findings(), "xid_recent")) << agent.Findings().dump(2);

  // GPU 0 of the simulated HGX board sits on bus 1b.
  std::ofstream(kernel_log, std::ios::app)
      << KernelLine("NVRM: Xid (PCI:0000:1b:00): 79, pid=1173, GPU has fallen off the bus.");
  std::optional<json> xid = agent.WaitForFinding("xid_recent", 0, 15s);
  ASSERT_TRUE(xid) << agent.log();
  EXPECT_EQ((*xid)["severity"], "critical");

  auto metrics = agent.client().Get("/metrics");
  ASSERT_TRUE(metrics);
  auto gpu0_sample = [&](const std::string& family, const std::string& value) {
    return std::regex_search(metrics->body, std::regex(family + R"(\{[^}]*gpu="0"[^}]*\} )" + value + "\n"));
  };
  EXPECT_TRUE(gpu0_sample("gpudoctor_gpu_xid_errors_total", "1")) << metrics->body;
  EXPECT_TRUE(gpu0_sample("gpudoctor_gpu_last_xid_code", "79")) << metrics->body;
  ExpectCleanStop(agent);
}

// ---- Trend detectors on an accelerated scenario clock --------------------------
//
// Under --simulate the agent keeps the scenario's time (cli/sources.h): the
// fake NVML plays the scenario faster (GPUDOCTOR_FAKE_TIME_SCALE, or the
// file's time_scale) and the detectors' windows, the findings' times and the
// agent's start are measured on that same clock. At 60x a wall second is a
// scenario minute, so shorter windows in --config keep each test to seconds.
// Each test checks that the finding opened, and that it did not open before
// its window had passed since the agent started: it needs that much history.
// A larger max_sample_gap keeps a slow cycle (a second is a minute here) from
// breaking a condition that must hold for a while.

constexpr int64_t kScenarioMinuteMs = 60'000;

// The agent's start, from /api/v1/status.
int64_t StartedAtMs(RunningAgent& agent) { return agent.GetJson("/api/v1/status").value("started_at_ms", int64_t{0}); }

TEST(AgentE2E, UtilizationStuckOpensOnceItsWindowHasPassed) {
  ScratchDir dir;
  const std::string config =
      dir.Write("agent.toml", "[detectors]\nmax_sample_gap = \"10m\"\n[detectors.utilization_stuck]\nafter = \"4m\"\n");
  RunningAgent agent({.scenario = "utilization-stuck.toml",
                      .args = {"--config", config},
                      .env = {{"GPUDOCTOR_FAKE_TIME_SCALE", "60"}}});
  ASSERT_TRUE(agent.WaitUntilHealthy()) << agent.log();
  const int64_t started = StartedAtMs(agent);
  for (int gpu : {6, 7}) {  // 6 spins at 100% on low power, 7 idles at 0% with a process
    std::optional<json> stuck = agent.WaitForFinding("utilization_stuck", gpu, 15s);
    ASSERT_TRUE(stuck) << "GPU " << gpu << "\n" << agent.log();
    EXPECT_GE((*stuck)["opened_at_ms"].get<int64_t>() - started, 4 * kScenarioMinuteMs) << stuck->dump(2);
  }
  for (const json& f : agent.Findings()) {
    if (f["id"] != "utilization_stuck") continue;
    EXPECT_TRUE(GpuOf(f) == 6 || GpuOf(f) == 7) << f.dump(2);  // the busy GPUs are fine
  }
  ExpectCleanStop(agent);
}

TEST(AgentE2E, GpuStragglerOpensOnceItsWindowHasPassed) {
  ScratchDir dir;
  const std::string config =
      dir.Write("agent.toml", "[detectors]\nmax_sample_gap = \"10m\"\n[detectors.gpu_straggler]\nafter = \"3m\"\n");
  RunningAgent agent({.scenario = "straggler.toml",
                      .args = {"--config", config},
                      .env = {{"GPUDOCTOR_FAKE_TIME_SCALE", "60"}}});
  ASSERT_TRUE(agent.WaitUntilHealthy()) << agent.log();
  const int64_t started = StartedAtMs(agent);
  std::optional<json> straggler = agent.WaitForFinding("gpu_straggler", 5, 15s);
  ASSERT_TRUE(straggler) << agent.log();
  EXPECT_GE((*straggler)["opened_at_ms"].get<int64_t>() - started, 3 * kScenarioMinuteMs) << straggler->dump(2);
  ExpectCleanStop(agent);
}

TEST(AgentE2E, MemoryLeakOpensOnTheExampleWithTheDefaultDetector) {
  // memory-leak.toml, as shipped: on GPU 2 a server grows 16 GiB in each
  // 10-minute phase and gives back 4 GiB in the 2 minutes after, until the
  // GPU is full at 58m. The agent starts at 12m; the default detector needs
  // 20 minutes of growth. The file's 60x is doubled to keep the test short.
  constexpr int kScale = 120;
  const int64_t epoch_ms = NowMs();  // scenario time 12m (the file's start), and the agent clock's anchor
  RunningAgent agent({.scenario = "memory-leak.toml",
                      .env = {{"GPUDOCTOR_FAKE_TIME_SCALE", std::to_string(kScale)},
                              {"GPUDOCTOR_FAKE_EPOCH_MS", std::to_string(epoch_ms)}}});
  ASSERT_TRUE(agent.WaitUntilHealthy()) << agent.log();
  const int64_t started = StartedAtMs(agent);
  std::optional<json> leak = agent.WaitForFinding("memory_leak", 2, 25s);
  ASSERT_TRUE(leak) << agent.log();
  const int64_t opened = (*leak)["opened_at_ms"].get<int64_t>();
  const double scenario_minute = 12 + static_cast<double>(opened - epoch_ms) / kScenarioMinuteMs;
  EXPECT_GE(opened - started, 20 * kScenarioMinuteMs) << "opened at scenario minute " << scenario_minute;
  EXPECT_LT(scenario_minute, 58) << "the leak should be found while it grows\n" << leak->dump(2);
  EXPECT_NE((*leak)["summary"].get<std::string>().find("tritonserver (pid 51877)"), std::string::npos)
      << leak->dump(2);
  ASSERT_FALSE((*leak)["actions"].empty()) << leak->dump(2);
  EXPECT_NE((*leak)["actions"][0].get<std::string>().find("gpudoctor trace-alloc -- COMMAND"), std::string::npos)
      << "pid 51877 is simulated: its program is named, not its command line\n" << leak->dump(2);
  for (const json& f : agent.Findings()) {
    if (f["id"] != "memory_leak") continue;
    EXPECT_EQ(GpuOf(f), 2) << f.dump(2);  // the others do not leak
  }
  ExpectCleanStop(agent);
}

TEST(AgentE2E, CoolingFailureOpensOnceItsWindowHasPassed) {
  // cooling-failure.toml: from 1m every GPU warms 1.5 C a minute under a
  // steady load, fans at 100% from 4m, until it levels off at 94 C at 17m.
  // At 60x a scenario minute takes a second; the detector looks at 8 minutes
  // and needs 90% of that covered by samples.
  constexpr int kScale = 60;
  ScratchDir dir;
  const std::string config = dir.Write("agent.toml", "[detectors.cooling_failure]\nwindow = \"8m\"\n");
  // The file starts the agent at 20m; an epoch 18.5 s ahead (18.5 scenario
  // minutes at 60x) starts it at 1m30s instead, early in the climb, so the
  // 8-minute window fits in the climb with about 7 minutes to spare for a slow start.
  const int64_t epoch_ms = NowMs() + 18'500 * 60 / kScale;
  RunningAgent agent({.scenario = "cooling-failure.toml",
                      .args = {"--config", config},
                      .env = {{"GPUDOCTOR_FAKE_TIME_SCALE", std::to_string(kScale)},
                              {"GPUDOCTOR_FAKE_EPOCH_MS", std::to_string(epoch_ms)}}});
  ASSERT_TRUE(agent.WaitUntilHealthy()) << agent.log();
  const int64_t started = StartedAtMs(agent);
  std::optional<json> cooling = agent.WaitForFinding("cooling_failure", 0, 15s);
  ASSERT_TRUE(cooling) << agent.log();
  EXPECT_GE((*cooling)["opened_at_ms"].get<int64_t>() - started, 8 * kScenarioMinuteMs * 9 / 10) << cooling->dump(2);
  ExpectCleanStop(agent);
}

// ---- The history is a record, not a gate -------------------------------------

// A 2 MiB tmpfs to keep a history on, filled, freed or remounted at will.
// Mounting needs root (CAP_SYS_ADMIN), as in CI; the tests skip without it.
class SmallDisk {
 public:
  static std::unique_ptr<SmallDisk> Mount(const std::string& path, bool read_only = false) {
    std::filesystem::create_directories(path);
    if (mount("tmpfs", path.c_str(), "tmpfs", read_only ? MS_RDONLY : 0, "size=2m,mode=0755") != 0) return nullptr;
    return std::unique_ptr<SmallDisk>(new SmallDisk(path));
  }
  ~SmallDisk() { umount2(path_.c_str(), MNT_DETACH); }

  std::string File(const std::string& name) const { return path_ + "/" + name; }
  // Writes a file until the disk has no room left.
  void Fill() const {
    const int fd = open(File("filler").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0) << strerror(errno);
    const std::string block(4096, 'x');
    for (size_t size = block.size(); size > 0; size /= 2) {
      while (write(fd, block.data(), size) == static_cast<ssize_t>(size)) {
      }
    }
    close(fd);
  }
  void Free() const { std::filesystem::remove(File("filler")); }
  bool MakeWritable() const { return mount(nullptr, path_.c_str(), nullptr, MS_REMOUNT, "size=2m,mode=0755") == 0; }

 private:
  explicit SmallDisk(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

bool StoreOk(RunningAgent& agent, int expected) {
  auto metrics = agent.client().Get("/metrics");
  return metrics && metrics->body.find("gpudoctor_store_ok " + std::to_string(expected) + "\n") != std::string::npos;
}

TEST(AgentE2E, AFullDiskUnderTheHistoryHidesNoFindingAndTheAgentRecoversWhenItHasRoom) {
  ScratchDir dir;
  auto disk = SmallDisk::Mount(dir.File("disk"));
  if (!disk) GTEST_SKIP() << "mounting a tmpfs needs root: " << strerror(errno);
  disk->Fill();
  const std::string hook_output = dir.File("hook.txt");
  const std::string config = dir.Write("agent.toml", "[alerts]\nmin_interval = \"0s\"\ngroup_wait = \"0s\"\n"
                                                     "[[alerts.exec]]\nargv = [\"/bin/sh\", \"-c\", "
                                                     "'echo \"$GPUDOCTOR_EVENT $GPUDOCTOR_FINDING_KEY\" >> \"$1\"', "
                                                     "\"hook\", \"" + hook_output + "\"]\n");
  // GPU 4 has overheated (93 C, thermal slowdown): `check` calls it critical.
  RunningAgent agent({.scenario = "overheating.toml", .args = {"--config", config}, .db = disk->File("history.db")});
  ASSERT_TRUE(agent.WaitUntilHealthy()) << agent.log();

  // The finding reaches the API, the metrics and the alerts although nothing can be stored...
  std::optional<json> hot = agent.WaitForFinding("temperature_high", 4, 15s);
  ASSERT_TRUE(hot) << agent.log();
  std::optional<json> failing = agent.WaitForFinding("history_store_failing", std::nullopt, 15s);
  ASSERT_TRUE(failing) << agent.log();
  EXPECT_EQ((*failing)["severity"], "warning");
  EXPECT_NE(failing->dump().find("database or disk is full"), std::string::npos) << failing->dump(2);
  EXPECT_NE(failing->dump().find(disk->File("history.db")), std::string::npos) << failing->dump(2);
  auto metrics = agent.client().Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_TRUE(std::regex_search(metrics->body, std::regex(R"(gpudoctor_finding\{[^}]*id="temperature_high"[^}]*\} 1)")))
      << metrics->body;
  EXPECT_TRUE(StoreOk(agent, 0)) << metrics->body;
  EXPECT_NE(metrics->body.find("gpudoctor_store_errors_total "), std::string::npos);
  auto health = agent.client().Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);  // a liveness probe must not kill the monitor over a full disk
  EXPECT_NE(health->body.find("\"degraded\""), std::string::npos) << health->body;
  EXPECT_TRUE(Eventually([&] { return ReadAll(hook_output).find("opened temperature_high@") != std::string::npos; },
                         15s))
      << ReadAll(hook_output) << agent.log();
  EXPECT_TRUE(agent.LogShows("is failing")) << agent.log();

  // ...and once the disk has room again, the agent opens the history by itself and writes what waited.
  disk->Free();
  ASSERT_TRUE(Eventually([&] { return !Has(agent.Findings(), "history_store_failing"); }, 45s)) << agent.log();
  EXPECT_TRUE(StoreOk(agent, 1));
  EXPECT_TRUE(agent.LogShows("works again")) << agent.log();
  // Numbered by the history now that it exists (provisional ids are negative).
  EXPECT_LT((*hot)["incident_id"].get<int64_t>(), 0);
  std::optional<json> numbered = agent.WaitForFinding("temperature_high", 4, 5s);
  ASSERT_TRUE(numbered);
  EXPECT_GT((*numbered)["incident_id"].get<int64_t>(), 0);
  ExpectCleanStop(agent);

  SqliteStoreOptions read_only;
  read_only.read_only = true;
  auto store = SqliteHistoryStore::Open(disk->File("history.db"), read_only);
  ASSERT_TRUE(store.ok()) << store.error().message;
  auto incidents = (*store)->QueryFindings({.from = FromUnixMillis(0), .until = FromUnixMillis(NowMs() + 1000)});
  ASSERT_TRUE(incidents.ok());
  bool hot_open = false, failure_recorded = false;
  for (const StoredFinding& incident : *incidents) {
    hot_open |= incident.finding.id == "temperature_high" && incident.open() &&
                incident.incident_id == (*numbered)["incident_id"].get<int64_t>();
    failure_recorded |= incident.finding.id == "history_store_failing" && !incident.open();
  }
  EXPECT_TRUE(hot_open);
  EXPECT_TRUE(failure_recorded);
}

TEST(AgentE2E, SamplesTakenWhileTheDiskIsFullAreWrittenOnceItHasRoom) {
  ScratchDir dir;
  auto disk = SmallDisk::Mount(dir.File("disk"));
  if (!disk) GTEST_SKIP() << "mounting a tmpfs needs root: " << strerror(errno);
  RunningAgent agent(AgentSetup{.db = disk->File("history.db")});
  ASSERT_TRUE(agent.WaitUntilHealthy()) << agent.log();
  ASSERT_TRUE(Eventually([&] { return StoreOk(agent, 1); }, 10s)) << agent.log();

  disk->Fill();
  const int64_t full_at = NowMs();
  ASSERT_TRUE(agent.WaitForFinding("history_store_failing", std::nullopt, 30s)) << agent.log();
  std::this_thread::sleep_for(2s);  // a few samples that can only wait in memory
  const int64_t freed_at = NowMs();
  disk->Free();
  ASSERT_TRUE(Eventually([&] { return !Has(agent.Findings(), "history_store_failing"); }, 15s)) << agent.log();
  ExpectCleanStop(agent);

  SqliteStoreOptions read_only;
  read_only.read_only = true;
  auto store = SqliteHistoryStore::Open(disk->File("history.db"), read_only);
  ASSERT_TRUE(store.ok()) << store.error().message;
  auto series = (*store)->QuerySeries({.gpu = "0",
                                       .metric = Metric::kTemperatureC,
                                       .from = FromUnixMillis(full_at),
                                       .until = FromUnixMillis(freed_at),
                                       .resolution = Resolution::kRaw});
  ASSERT_TRUE(series.ok()) << series.error().message;
  EXPECT_GE(series->points.size(), 2u) << "the samples of the outage were lost";
}

TEST(AgentE2E, AReadOnlyHistoryDirectoryDoesNotStopTheAgent) {
  ScratchDir dir;
  auto disk = SmallDisk::Mount(dir.File("disk"), /*read_only=*/true);
  if (!disk) GTEST_SKIP() << "mounting a tmpfs needs root: " << strerror(errno);
  RunningAgent agent({.scenario = "overheating.toml", .db = disk->File("history.db")});
  ASSERT_TRUE(agent.WaitUntilHealthy()) << agent.log();
  ASSERT_TRUE(agent.WaitForFinding("temperature_high", 4, 15s)) << agent.log();
  std::optional<json> failing = agent.WaitForFinding("history_store_failing", std::nullopt, 15s);
  ASSERT_TRUE(failing) << agent.log();
  EXPECT_NE(failing->dump().find("cannot open it"), std::string::npos) << failing->dump(2);

  ASSERT_TRUE(disk->MakeWritable()) << strerror(errno);
  ASSERT_TRUE(Eventually([&] { return !Has(agent.Findings(), "history_store_failing"); }, 45s)) << agent.log();
  EXPECT_TRUE(std::filesystem::exists(disk->File("history.db")));
  ExpectCleanStop(agent);
}

TEST(AgentE2E, OnceExits73WhenItsCycleCannotBeStored) {
  ScratchDir dir;
  auto disk = SmallDisk::Mount(dir.File("disk"), /*read_only=*/true);
  if (!disk) GTEST_SKIP() << "mounting a tmpfs needs root: " << strerror(errno);
  auto result = RunGpudoctor("--simulate " + Example("healthy-8xh100.toml") + " agent --once --log none --db " +
                                 disk->File("history.db"),
                             Stderr::kCapture);
  EXPECT_EQ(result.exit_code, 73) << result.output;
  EXPECT_NE(result.output.find("was not written"), std::string::npos) << result.output;
}

// ---- Modules -----------------------------------------------------------------

// gpudoctor and what it loads, copied into `dir` without the modules named in `leave_out`.
std::string InstallWithout(ScratchDir& dir, const std::vector<std::string>& leave_out) {
  const std::filesystem::path from = std::filesystem::path(GPUDOCTOR_BINARY_DIR) / "bin";
  for (const char* name : {"gpudoctor", "gpudoctor-probe", "libgpudoctor_fake_nvml.so", "libgpudoctor_http_server.so",
                           "libgpudoctor_http_client.so"}) {
    if (std::find(leave_out.begin(), leave_out.end(), name) != leave_out.end()) continue;
    std::filesystem::copy_file(from / name, dir.File(name));
  }
  return dir.File("gpudoctor");
}

TEST(Modules, CommandsOtherThanTheAgentLoadNoHttpOrTlsLibrary) {
  // What the dynamic loader maps for `gpudoctor` itself (what ldd prints).
  auto loaded = RunGpudoctor("", Stderr::kCapture, "LD_TRACE_LOADED_OBJECTS=1");
  ASSERT_EQ(loaded.exit_code, 0) << loaded.output;
  EXPECT_NE(loaded.output.find("libstdc++"), std::string::npos) << loaded.output;
  for (const char* library : {"libcurl", "libssl", "libcrypto", "libgnutls"}) {
    EXPECT_EQ(loaded.output.find(library), std::string::npos) << library << " is loaded:\n" << loaded.output;
  }
}

// The agent serves plain HTTP: its server module must not bring a TLS library,
// which would cost the agent megabytes of resident memory for nothing.
TEST(Modules, TheServerModuleLoadsNoTlsLibrary) {
  const std::string module = std::string(GPUDOCTOR_BINARY_DIR) + "/bin/libgpudoctor_http_server.so";
  auto loaded = RunShell("ldd " + module + " 2>&1");
  ASSERT_EQ(loaded.exit_code, 0) << loaded.output;
  EXPECT_NE(loaded.output.find("libc.so"), std::string::npos) << loaded.output;
  for (const char* library : {"libgnutls", "libssl", "libcrypto", "libnettle", "libp11-kit"}) {
    EXPECT_EQ(loaded.output.find(library), std::string::npos) << library << " is loaded:\n" << loaded.output;
  }
}

TEST(Modules, AnAgentWithoutItsServerModuleSaysWhichFileIsMissingAndExits69) {
  ScratchDir dir;
  const std::string binary = InstallWithout(dir, {"libgpudoctor_http_server.so"});
  auto result = RunShell("timeout 60 " + binary + " --simulate " + Example("healthy-8xh100.toml") +
                           " agent --listen 127.0.0.1:0 --log none --db " + dir.File("history.db") + " 2>&1");
  EXPECT_EQ(result.exit_code, 69) << result.output;
  EXPECT_NE(result.output.find("cannot load libgpudoctor_http_server.so"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find(dir.File("libgpudoctor_http_server.so") + ": not there"), std::string::npos)
      << result.output;
}

TEST(Modules, AWebhookWithoutTheClientModuleIsAConfigErrorAtStart) {
  ScratchDir dir;
  const std::string binary = InstallWithout(dir, {"libgpudoctor_http_client.so"});
  const std::string config = dir.Write("agent.toml", "[[alerts.webhook]]\nurl = \"http://127.0.0.1:9/hook\"\n");
  auto result = RunShell("timeout 60 " + binary + " --simulate " + Example("healthy-8xh100.toml") +
                           " agent --listen 127.0.0.1:0 --log none --config " + config + " --db " +
                           dir.File("history.db") + " 2>&1");
  EXPECT_EQ(result.exit_code, 65) << result.output;
  EXPECT_NE(result.output.find("cannot load libgpudoctor_http_client.so"), std::string::npos) << result.output;
}


}  // namespace
}  // namespace gpudoctor::testing
