// End-to-end tests of `gpudoctor agent`: the real binary against the fake
// NVML library, queried over HTTP, stopped with SIGTERM.

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "store/sqlite_store.h"
#include "tests/run_binary.h"

namespace gpudoctor::testing {
namespace {

using namespace std::chrono_literals;

std::string ReadAll(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// A running agent on a free port with its own database; killed if a test
// fails before stopping it.
class RunningAgent {
 public:
  explicit RunningAgent(const std::string& scenario, std::vector<std::string> extra = {}) {
    std::string pattern = (std::filesystem::temp_directory_path() / "gpudoctor-agent-XXXXXX").string();
    dir_ = mkdtemp(pattern.data());
    std::vector<std::string> args = {Binary(), "--simulate", Example(scenario), "--probe-timeout", "1", "agent",
                                     "--interval", "1s", "--listen", "127.0.0.1:0", "--db", db_path(),
                                     "--log", "none"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      std::freopen(stderr_path().c_str(), "w", stderr);
      std::freopen("/dev/null", "w", stdout);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~RunningAgent() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string db_path() const { return (dir_ / "sub" / "history.db").string(); }
  std::string stderr_path() const { return (dir_ / "stderr.txt").string(); }
  std::string log() const { return ReadAll(stderr_path()); }

  // The port from "listening on http://127.0.0.1:PORT/", waiting for it.
  std::optional<int> WaitForPort(std::chrono::seconds timeout = 30s) {
    const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+)/)");
    for (auto end = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < end;) {
      std::smatch match;
      std::string text = log();
      if (std::regex_search(text, match, listening)) return std::stoi(match[1]);
      std::this_thread::sleep_for(50ms);
    }
    return std::nullopt;
  }

  // Sends SIGTERM; the exit status, or nullopt when it did not exit in time.
  std::optional<int> Terminate(std::chrono::seconds timeout) {
    kill(pid_, SIGTERM);
    for (auto end = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < end;) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(20ms);
    }
    return std::nullopt;
  }

 private:
  std::filesystem::path dir_;
  pid_t pid_ = -1;
};

bool WaitForHealthy(httplib::Client& client, std::chrono::seconds timeout) {
  for (auto end = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < end;) {
    auto response = client.Get("/healthz");
    if (response && response->status == 200) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

TEST(AgentE2E, ServesMetricsAndFindingsAndStopsCleanlyOnSigterm) {
  RunningAgent agent("healthy-8xh100.toml");
  auto port = agent.WaitForPort();
  ASSERT_TRUE(port) << agent.log();
  httplib::Client client("127.0.0.1", *port);
  client.set_read_timeout(5, 0);
  ASSERT_TRUE(WaitForHealthy(client, 30s)) << agent.log();

  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  for (int gpu = 0; gpu < 8; ++gpu) {
    std::regex sample("gpudoctor_gpu_temperature_celsius\\{[^}]*gpu=\"" + std::to_string(gpu) + "\"[^}]*\\} ");
    EXPECT_TRUE(std::regex_search(metrics->body, sample)) << "GPU " << gpu << "\n" << metrics->body;
  }

  auto findings = client.Get("/api/v1/findings");
  ASSERT_TRUE(findings);
  EXPECT_EQ(findings->status, 200);
  EXPECT_FALSE(nlohmann::json::parse(findings->body, nullptr, false).is_discarded()) << findings->body;

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
  auto port = agent.WaitForPort();
  ASSERT_TRUE(port) << agent.log();
  httplib::Client client("127.0.0.1", *port);
  client.set_read_timeout(5, 0);
  ASSERT_TRUE(WaitForHealthy(client, 30s)) << agent.log();

  bool hang_open = false;
  for (auto end = std::chrono::steady_clock::now() + 20s; !hang_open && std::chrono::steady_clock::now() < end;) {
    auto findings = client.Get("/api/v1/findings");
    ASSERT_TRUE(findings);
    hang_open = findings->body.find("nvml_hang") != std::string::npos;
    if (!hang_open) std::this_thread::sleep_for(200ms);
  }
  EXPECT_TRUE(hang_open) << agent.log();

  // Several cycles later, still answering and still current.
  std::this_thread::sleep_for(3s);
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);

  auto code = agent.Terminate(10s);
  ASSERT_TRUE(code) << agent.log();
  EXPECT_EQ(*code, 0) << agent.log();
}

TEST(AgentE2E, OnceRunsOneCycleAndExits) {
  auto dir = std::filesystem::temp_directory_path() / ("gpudoctor-agent-once-" + std::to_string(getpid()));
  auto result = gpudoctor::testing::RunGpudoctor("--simulate " + Example("healthy-8xh100.toml") + " agent --once --log none --db " +
                    (dir / "a" / "b" / "history.db").string());
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(dir / "a" / "b" / "history.db"));
  std::filesystem::remove_all(dir);
}

TEST(AgentE2E, UncreatableDatabaseExits73) {
  auto result = gpudoctor::testing::RunGpudoctor("--simulate " + Example("healthy-8xh100.toml") +
                    " agent --once --log none --db /proc/no-such-dir/history.db");
  EXPECT_EQ(result.exit_code, 73);
}

TEST(AgentE2E, IntervalBelowOneSecondIsAUsageError) {
  auto result = gpudoctor::testing::RunGpudoctor("--simulate " + Example("healthy-8xh100.toml") + " agent --once --interval 500ms");
  EXPECT_EQ(result.exit_code, 64);
}

}  // namespace
}  // namespace gpudoctor::testing
