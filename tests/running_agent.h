// Test support: the agent as a running process, for end-to-end tests. It
// runs a scenario on a free loopback port with a database of its own and is
// killed when the object goes.
//
//   RunningAgent agent(AgentSetup{.scenario = "overheating.toml"});
//   ASSERT_TRUE(agent.WaitUntilHealthy()) << agent.log();
//   json findings = agent.Findings();
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/scratch_dir.h"
#include "tests/run_binary.h"

namespace gpudoctor::testing {

using nlohmann::json;

inline std::string ReadAll(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// The index of the GPU a finding (API JSON) is about; nullopt for host-wide ones.
inline std::optional<int> GpuOf(const json& finding) {
  if (!finding.contains("gpu") || !finding["gpu"].is_object() || !finding["gpu"]["index"].is_number()) return {};
  return finding["gpu"]["index"].get<int>();
}

// Polls `done` every 100 ms until it holds or `timeout` passes.
inline bool Eventually(const std::function<bool()>& done, std::chrono::seconds timeout) {
  for (auto end = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < end;) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return done();
}

struct AgentSetup {
  std::string scenario = "healthy-8xh100.toml";
  std::vector<std::string> args;  // after `agent`; "--log none" unless they name --log
  std::string db;                 // empty: a fresh database in the agent's own directory
  std::vector<std::pair<std::string, std::string>> env;
  std::string probe_timeout = "1";  // --probe-timeout, in seconds
};

// A running agent on a free port with its own database; killed if a test
// fails before stopping it.
class RunningAgent {
 public:
  explicit RunningAgent(AgentSetup setup) {
    std::vector<std::string> args = {Binary(), "--simulate", Example(setup.scenario), "--probe-timeout",
                                     setup.probe_timeout, "agent", "--interval", "1s", "--listen", "127.0.0.1:0",
                                     "--db", db_path()};
    if (!setup.db.empty()) args.back() = db_ = setup.db;
    if (std::find(setup.args.begin(), setup.args.end(), "--log") == setup.args.end()) {
      args.insert(args.end(), {"--log", "none"});
    }
    args.insert(args.end(), setup.args.begin(), setup.args.end());
    pid_ = fork();
    if (pid_ == 0) {
      if (std::freopen(stderr_path().c_str(), "w", stderr) == nullptr || std::freopen("/dev/null", "w", stdout) == nullptr)
        _exit(127);
      for (const auto& [name, value] : setup.env) setenv(name.c_str(), value.c_str(), 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  explicit RunningAgent(const std::string& scenario) : RunningAgent(AgentSetup{.scenario = scenario}) {}
  ~RunningAgent() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  std::string db_path() const { return db_.empty() ? dir_.File("sub/history.db") : db_; }
  std::string stderr_path() const { return dir_.File("stderr.txt"); }
  std::string log() const { return ReadAll(stderr_path()); }

  // The port from "listening on http://127.0.0.1:PORT/", waiting for it.
  std::optional<int> WaitForPort(std::chrono::seconds timeout = std::chrono::seconds(30)) {
    const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+)/)");
    std::optional<int> port;
    Eventually(
        [&] {
          std::smatch match;
          std::string text = log();
          if (std::regex_search(text, match, listening)) port = std::stoi(match[1]);
          return port.has_value();
        },
        timeout);
    return port;
  }

  // Waits for the port and a first fresh sample (/healthz 200). The usual
  // start of a test: ASSERT_TRUE(agent.WaitUntilHealthy()) << agent.log();
  bool WaitUntilHealthy(std::chrono::seconds timeout = std::chrono::seconds(30)) {
    auto port = WaitForPort(timeout);
    if (!port) return false;
    client_ = std::make_unique<httplib::Client>("127.0.0.1", *port);
    client_->set_read_timeout(5, 0);
    return Eventually(
        [&] {
          auto response = client_->Get("/healthz");
          return response && response->status == 200;
        },
        timeout);
  }
  httplib::Client& client() { return *client_; }

  // GET `path` as JSON; null when it fails or is not JSON.
  json GetJson(const std::string& path) {
    auto response = client_->Get(path);
    if (!response || response->status != 200) return nullptr;
    return json::parse(response->body, nullptr, false);
  }
  json Findings() {
    json body = GetJson("/api/v1/findings");
    return body.is_object() ? body["findings"] : json::array();
  }
  // The first open finding with this id (on this GPU), waiting up to `timeout`.
  std::optional<json> WaitForFinding(const std::string& id, std::optional<int> gpu, std::chrono::seconds timeout) {
    std::optional<json> found;
    Eventually(
        [&] {
          for (const json& f : Findings()) {
            if (f["id"] == id && (!gpu || GpuOf(f) == gpu)) found = f;
          }
          return found.has_value();
        },
        timeout);
    return found;
  }
  int64_t SamplesTaken() {
    json status = GetJson("/api/v1/status");
    return status.is_object() ? status.value("samples_total", int64_t{0}) : 0;
  }
  bool LogShows(const std::string& text, std::chrono::seconds timeout = std::chrono::seconds(10)) {
    return Eventually([&] { return log().find(text) != std::string::npos; }, timeout);
  }

  void Signal(int signal_number) { kill(pid_, signal_number); }
  // The agent's child processes (its NVML probes).
  std::vector<pid_t> Children() const {
    std::vector<pid_t> children;
    std::error_code ignored;
    for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid_) + "/task", ignored)) {
      std::istringstream list(ReadAll(task.path().string() + "/children"));
      for (pid_t child; list >> child;) children.push_back(child);
    }
    return children;
  }

  // Sends SIGTERM; the exit status, or nullopt when it did not exit in time.
  std::optional<int> Terminate(std::chrono::seconds timeout) {
    kill(pid_, SIGTERM);
    std::optional<int> code;
    Eventually(
        [&] {
          int status = 0;
          if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
          pid_ = -1;
          code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          return true;
        },
        timeout);
    return code;
  }

 private:
  ScratchDir dir_;
  std::string db_;
  pid_t pid_ = -1;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace gpudoctor::testing
