// agent_http_demo: serves the agent's HTTP endpoints over synthetic GPUs,
// refreshed every second. For the dashboard's browser test, the /metrics
// benchmark, and for working on the dashboard without GPUs.
//
//   agent_http_demo --gpus 8 --listen 127.0.0.1:0 --dcgm
//   -> prints "listening on http://127.0.0.1:PORT/" and serves until SIGTERM.
#include <fmt/format.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "agent/agent_state.h"
#include "agent/http_server.h"
#include "agent/testing/synthetic_agent.h"

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }
}  // namespace

int main(int argc, char** argv) {
  using namespace gpudoctor;
  CLI::App app{"Serves the gpudoctor agent's HTTP endpoints over synthetic GPUs."};
  size_t gpus = 8;
  std::string listen = "127.0.0.1:0";
  bool dcgm = false;
  std::string token;
  size_t threads = 4;
  app.add_option("--gpus", gpus, "Number of synthetic GPUs")->check(CLI::Range(1, 64));
  app.add_option("--listen", listen, "ADDR:PORT to bind (port 0: any free port)");
  app.add_flag("--dcgm", dcgm, "Also emit dcgm-exporter metric names");
  app.add_option("--token", token, "Require this bearer token");
  app.add_option("--threads", threads, "HTTP event-loop threads")->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);

  Result<ListenAddress> address = ParseListenAddress(listen, kDefaultHttpPort);
  if (!address) {
    fmt::print(stderr, "agent_http_demo: {}\n", address.error().message);
    return 2;
  }
  const Clock& clock = SystemClock::Instance();
  AgentState state(clock.Now());
  SyntheticHistory history(gpus);
  const WallTime opened_at = clock.Now() - std::chrono::minutes(42);
  auto publish = [&] {
    auto snapshot = std::make_shared<const Snapshot>(SyntheticSnapshot(gpus, clock.Now()));
    state.SetOpenFindings(SyntheticIncidents(*snapshot, opened_at));
    state.PublishSnapshot(std::move(snapshot));
  };
  publish();

  HttpServerOptions options{
      .listen = *address, .limits = {.threads = threads}, .dcgm_compatible_metrics = dcgm, .version = "demo"};
  if (!token.empty()) options.bearer_token = token;
  HttpServer server({.view = state, .history = &history}, options, clock);
  Result<int> port = server.Start();
  if (!port) {
    fmt::print(stderr, "agent_http_demo: {}\n", port.error().message);
    return 1;
  }
  fmt::print("listening on http://{}:{}/\n", address->host, *port);
  std::fflush(stdout);

  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  while (!g_stop) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    publish();
  }
  server.Stop();
  return 0;
}
