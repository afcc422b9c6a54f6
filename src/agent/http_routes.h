// AgentRoutes: what each of the agent's HTTP endpoints answers. A function
// from HttpRequest to HttpResponse, with no sockets, so tests and the fuzz
// target call it directly; HttpTransport carries it over the network.
//
//   /metrics           Prometheus text (MetricsCache), gzip when asked
//   /healthz           ok, degraded (store failing), stale or no_sample
//   /api/v1/status, /api/v1/snapshot, /api/v1/findings, /api/v1/history,
//   /api/v1/diagnostics  each GPU's newest gpudoctor diag tests
//   /, /app.js, ...    the embedded dashboard, with ETag and a strict CSP
//
// Only GET and HEAD are served (405 with Allow otherwise). With a bearer
// token, every path but /healthz and the dashboard's files needs
// "Authorization: Bearer TOKEN" (the scheme in any case); without one, a
// server bound to loopback answers only requests to localhost (HttpAccess).
//
//   AgentRoutes routes({.view = state, .history = &history}, options, clock);
//   HttpResponse response = routes.Handle(request);
#pragma once

#include "agent/http_server.h"
#include "agent/metrics_cache.h"
#include "common/clock.h"
#include "net/http_access.h"
#include "net/http_message.h"

namespace gpudoctor {

class AgentRoutes {
 public:
  // `sources.view` and `sources.history` must outlive the routes.
  AgentRoutes(HttpServerSources sources, const HttpServerOptions& options, const Clock& clock);

  // Safe to call from several threads.
  HttpResponse Handle(const HttpRequest& request);

 private:
  HttpResponse Route(const HttpRequest& request);
  HttpResponse Metrics(const HttpRequest& request);
  HttpResponse Health() const;
  HttpResponse StatusJson() const;
  HttpResponse SnapshotJson() const;
  HttpResponse FindingsJson() const;
  HttpResponse History(const HttpRequest& request) const;
  HttpResponse DiagnosticsJson() const;

  const HttpServerSources sources_;
  const HttpAccess access_;
  const Duration stale_after_;
  const std::string version_;
  const Clock& clock_;
  MetricsCache metrics_;
};

}  // namespace gpudoctor
