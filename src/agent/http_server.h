// HttpServer: the agent's HTTP endpoint. Serves /metrics (Prometheus), the
// JSON API under /api/v1/, /healthz and the embedded web dashboard at /.
//
// It only reads the published AgentView and the HistorySource, never NVML, so
// it keeps answering while a probe is hung. It binds 127.0.0.1:9847 unless
// told otherwise and can require a bearer token. Two parts: AgentRoutes
// (http_routes.h) decides what each endpoint answers; HttpTransport
// (http_transport.h) carries requests on an event loop with deadlines and size
// limits (HttpLimits), so slow or hostile clients cannot hold it.
//
//   HttpServer server({.view = state, .history = &history}, options, SystemClock::Instance());
//   Result<int> port = server.Start();  // listening in the background
//   ...
//   server.Stop();
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/agent_view.h"
#include "net/http_access.h"
#include "net/http_transport.h"
#include "agent/metrics.h"
#include "common/clock.h"
#include "common/result.h"

namespace gpudoctor {

inline constexpr int kDefaultHttpPort = 9847;
inline constexpr std::string_view kDefaultListenAddress = "127.0.0.1:9847";

struct HttpServerOptions {
  ListenAddress listen{"127.0.0.1", kDefaultHttpPort};
  // When set, every endpoint but /healthz and the dashboard's static files
  // requires "Authorization: Bearer <token>"; when not, a loopback server
  // answers only requests to localhost (net/http_access.h).
  std::optional<std::string> bearer_token;
  HttpLimits limits;  // threads, connections, sizes and deadlines
  // /healthz answers 200 while the latest sample is at most this old.
  Duration stale_after = std::chrono::seconds(15);
  bool dcgm_compatible_metrics = false;
  std::string dcgm_hostname_label = "Hostname";  // MetricsOptions::dcgm_hostname_label
  std::string version;  // shown in gpudoctor_build_info and /api/v1/status
  std::vector<std::pair<std::string, std::string>> build_labels;  // gpudoctor_build_info's other labels
  MachineIdentity machine;  // for gpudoctor_host_info and the GPUs' slots
};

// What the server reads. `view` must outlive the server.
struct HttpServerSources {
  const AgentView& view;
  const HistorySource* history = nullptr;         // null: /api/v1/history answers 503
  std::function<AlertCounters()> alert_counters;  // empty: no alert metrics
};

class HttpServer {
 public:
  HttpServer(HttpServerSources sources, HttpServerOptions options, const Clock& clock);
  ~HttpServer();  // stops
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts serving on background threads. Returns the bound port
  // (useful with port 0). Fails when the address cannot be bound.
  Result<int> Start();
  // Closes every connection and joins the threads; a request being answered
  // is finished first. Idempotent.
  void Stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpudoctor
