#include "agent/http_routes.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "agent/dashboard_assets.h"
#include "store/incident_json.h"
#include "common/json_text.h"
#include "common/text.h"
#include "model/diagnostic_json.h"
#include "model/snapshot_json.h"

namespace gpudoctor {

using nlohmann::json;

namespace {

constexpr const char* kJsonType = "application/json; charset=utf-8";

HttpResponse JsonResponse(int status, const json& body) {
  HttpResponse response{.status = status};
  // Strings in snapshots come from drivers and /proc; invalid UTF-8 must not
  // make a response fail.
  response.SetBody(ToJsonText(body), kJsonType);
  return response;
}

HttpResponse ErrorResponse(int status, std::string message) {
  return JsonResponse(status, json{{"error", std::move(message)}});
}

// A strong validator for an embedded file: FNV-1a of its bytes, computed
// once per file.
const std::string& ETagFor(const DashboardAsset& asset) {
  static const std::vector<std::string> etags = [] {
    std::vector<std::string> out;
    for (const DashboardAsset& a : DashboardAssets()) {
      uint64_t hash = 1469598103934665603ULL;
      for (unsigned char c : a.body) {
        hash ^= c;
        hash *= 1099511628211ULL;
      }
      out.push_back(fmt::format("\"{:016x}\"", hash));
    }
    return out;
  }();
  return etags[static_cast<size_t>(&asset - DashboardAssets().data())];
}

bool IsPublicPath(std::string_view path) { return path == "/healthz" || FindDashboardAsset(path) != nullptr; }

HttpResponse Asset(const HttpRequest& request) {
  const DashboardAsset* asset = FindDashboardAsset(request.path);
  if (!asset) return ErrorResponse(404, "not found");
  const std::string& etag = ETagFor(*asset);
  HttpResponse response;
  response.SetHeader("ETag", etag);
  response.SetHeader("Cache-Control", "no-cache");
  response.SetHeader("Content-Security-Policy",
                     "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                     "connect-src 'self'; frame-ancestors 'none'");
  if (request.Header("If-None-Match") == etag) {
    response.status = 304;
    return response;
  }
  response.SetStaticBody(asset->body, std::string(asset->content_type));
  return response;
}

json StoreHealthJson(const StoreHealth& store) {
  return json{{"ok", store.ok},
              {"errors_total", store.errors_total},
              {"last_error", store.last_error},
              {"path", store.path},
              {"queued", store.queued},
              {"dropped_total", store.dropped_total},
              {"failing_since_ms", store.failing_since ? json(ToUnixMillis(*store.failing_since)) : json(nullptr)}};
}

// Each sink's deliveries: a receiver that hangs shows here as a delivery under
// way for a long time, then as a failure, never as silence.
json AlertHealthJson(const AlertCounters& counters, WallTime now) {
  json sinks = json::array();
  for (const AlertCounters::Sink& sink : counters.sinks) {
    sinks.push_back(
        {{"sink", sink.name},
         {"delivered_total", sink.delivered},
         {"failed_total", sink.failed},
         {"queued", sink.queued},
         {"delivering_for_seconds",
          sink.delivering_since ? json(std::max(0.0, std::chrono::duration<double>(now - *sink.delivering_since).count()))
                                : json(nullptr)},
         {"last_error", sink.last_error.empty() ? json(nullptr) : json(sink.last_error)}});
  }
  return json{{"sinks", std::move(sinks)}, {"dropped_total", counters.dropped}};
}

struct ParsedHistoryRequest {
  HistoryQuery base;
  std::vector<std::string> metrics;
};

constexpr size_t kMaxHistoryMetrics = 16;
constexpr size_t kMaxHistoryPoints = 10000;
constexpr auto kMaxHistoryRange = std::chrono::hours(24 * 400);
constexpr int64_t kMaxUnixMillis = 4'102'444'800'000;  // 2100-01-01

Result<ParsedHistoryRequest> ParseHistory(const HttpRequest& request, const HistorySource& history, WallTime now) {
  ParsedHistoryRequest out;
  std::optional<uint32_t> gpu = ParseInt<uint32_t>(request.Query("gpu").value_or(""));
  if (!gpu) return Error{"gpu: give a GPU index, e.g. gpu=0"};
  out.base.gpu_index = *gpu;

  const std::vector<std::string> known = history.MetricNames();
  for (std::string_view name : Split(request.Query("metric").value_or(""), ',')) {
    name = Trim(name);
    if (name.empty()) continue;
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return Error{fmt::format("metric: unknown metric '{}'", name)};
    }
    out.metrics.emplace_back(name);
  }
  if (out.metrics.empty()) return Error{"metric: give one or more metric names, comma-separated"};
  if (out.metrics.size() > kMaxHistoryMetrics) return Error{"metric: too many metrics in one request"};

  auto time_param = [&](std::string_view name, WallTime fallback) -> std::optional<WallTime> {
    std::optional<std::string_view> text = request.Query(name);
    if (!text) return fallback;
    std::optional<int64_t> ms = ParseInt<int64_t>(*text);
    // Bounded so the conversion to nanoseconds cannot overflow.
    if (!ms || *ms < 0 || *ms > kMaxUnixMillis) return std::nullopt;
    return FromUnixMillis(*ms);
  };
  std::optional<WallTime> to = time_param("to", now);
  if (!to) return Error{"to: give Unix milliseconds (before 2100)"};
  std::optional<WallTime> from = time_param("from", *to - std::chrono::hours(1));
  if (!from) return Error{"from: give Unix milliseconds (before 2100)"};
  if (*from >= *to) return Error{"from must be before to"};
  if (*to - *from > kMaxHistoryRange) return Error{"range longer than 400 days"};
  out.base.from = *from;
  out.base.to = *to;

  if (std::optional<std::string_view> text = request.Query("points")) {
    std::optional<size_t> points = ParseInt<size_t>(*text);
    if (!points || *points == 0 || *points > kMaxHistoryPoints) {
      return Error{fmt::format("points: give 1 to {}", kMaxHistoryPoints)};
    }
    out.base.max_points = *points;
  }
  return out;
}

}  // namespace

AgentRoutes::AgentRoutes(HttpServerSources sources, const HttpServerOptions& options, const Clock& clock)
    : sources_(std::move(sources)),
      access_(options.bearer_token, options.listen),
      stale_after_(options.stale_after),
      version_(options.version),
      clock_(clock),
      metrics_(sources_.view, sources_.alert_counters,
               {.dcgm_compatible = options.dcgm_compatible_metrics,
                .dcgm_hostname_label = options.dcgm_hostname_label,
                .stale_after = options.stale_after,
                .version = options.version,
                .build_labels = options.build_labels,
                .machine = options.machine},
               clock) {}

HttpResponse AgentRoutes::Handle(const HttpRequest& request) {
  HttpResponse response = Route(request);
  response.SetHeader("X-Content-Type-Options", "nosniff");
  response.SetHeader("Referrer-Policy", "no-referrer");
  response.SetHeader("X-Frame-Options", "DENY");
  return response;
}

HttpResponse AgentRoutes::Route(const HttpRequest& request) {
  if (request.method != "GET" && request.method != "HEAD") {
    HttpResponse refused = ErrorResponse(405, "only GET and HEAD are served");
    refused.SetHeader("Allow", "GET, HEAD");
    return refused;
  }
  if (std::optional<HttpResponse> refused = access_.Refusal(request, IsPublicPath(request.path))) return *refused;
  const std::string& path = request.path;
  if (path == "/metrics") return Metrics(request);
  if (path == "/healthz") return Health();
  if (path == "/api/v1/status") return StatusJson();
  if (path == "/api/v1/snapshot") return SnapshotJson();
  if (path == "/api/v1/findings") return FindingsJson();
  if (path == "/api/v1/history") return History(request);
  if (path == "/api/v1/diagnostics") return DiagnosticsJson();
  return Asset(request);
}

HttpResponse AgentRoutes::Metrics(const HttpRequest& request) {
  const MetricsCache::Body body = metrics_.Get(AcceptsGzip(request.Header("Accept-Encoding").value_or("")));
  HttpResponse response;
  response.SetSharedBody(body.bytes, std::string(kPrometheusContentType));
  if (body.gzip) response.SetHeader("Content-Encoding", "gzip");
  response.SetHeader("Vary", "Accept-Encoding");
  return response;
}

HttpResponse AgentRoutes::Health() const {
  const AgentStatus status = sources_.view.Status();
  const WallTime now = clock_.Now();
  json body = json::object();
  if (status.store) body["store"] = StoreHealthJson(*status.store);
  if (sources_.alert_counters) body["alerts"] = AlertHealthJson(sources_.alert_counters(), now);
  if (!status.last_sample_at) {
    body["status"] = "no_sample";
    return JsonResponse(503, body);
  }
  const Duration age = now - *status.last_sample_at;
  body["last_sample_age_seconds"] = std::max(0.0, std::chrono::duration<double>(age).count());
  body["stale_after_seconds"] = std::chrono::duration<double>(stale_after_).count();
  if (age > stale_after_) {
    body["status"] = "stale";
    return JsonResponse(503, body);
  }
  // A failing store still answers 200: restarting the agent cannot free a
  // full disk, and a killed agent would stop watching the GPUs too.
  body["status"] = status.store && !status.store->ok ? "degraded" : "ok";
  return JsonResponse(200, body);
}

HttpResponse AgentRoutes::StatusJson() const {
  const AgentStatus status = sources_.view.Status();
  std::shared_ptr<const Snapshot> snapshot = sources_.view.LatestSnapshot();
  const WallTime now = clock_.Now();
  json body = json::object();
  body["version"] = version_;
  body["hostname"] = snapshot ? snapshot->hostname : "";
  body["server_time_ms"] = ToUnixMillis(now);
  body["started_at_ms"] = ToUnixMillis(status.started_at);
  body["last_sample_at_ms"] = status.last_sample_at ? json(ToUnixMillis(*status.last_sample_at)) : json(nullptr);
  body["fresh"] = status.last_sample_at && now - *status.last_sample_at <= stale_after_;
  body["stale_after_seconds"] = std::chrono::duration<double>(stale_after_).count();
  body["samples_total"] = status.samples_total;
  body["probe_hangs_total"] = status.probe_hangs_total;
  body["history_metrics"] = sources_.history ? json(sources_.history->MetricNames()) : json::array();
  body["store"] = status.store ? StoreHealthJson(*status.store) : json(nullptr);
  return JsonResponse(200, body);
}

HttpResponse AgentRoutes::SnapshotJson() const {
  std::shared_ptr<const Snapshot> snapshot = sources_.view.LatestSnapshot();
  if (!snapshot) return ErrorResponse(503, "no sample yet");
  return JsonResponse(200, SnapshotToJson(*snapshot));
}

HttpResponse AgentRoutes::FindingsJson() const {
  json findings = json::array();
  for (const StoredFinding& open : sources_.view.OpenFindings()) findings.push_back(StoredFindingToJson(open));
  return JsonResponse(200, json{{"findings", std::move(findings)}});
}

HttpResponse AgentRoutes::History(const HttpRequest& request) const {
  if (!sources_.history) return ErrorResponse(503, "history is not available");
  Result<ParsedHistoryRequest> parsed = ParseHistory(request, *sources_.history, clock_.Now());
  if (!parsed) return ErrorResponse(400, parsed.error().message);
  json series = json::array();
  for (const std::string& metric : parsed->metrics) {
    HistoryQuery query = parsed->base;
    query.metric = metric;
    Result<HistorySeries> result = sources_.history->Query(query);
    if (!result) return ErrorResponse(500, fmt::format("history of {}: {}", metric, result.error().message));
    json points = json::array();
    for (const HistoryPoint& p : result->points) points.push_back(json::array({ToUnixMillis(p.time), p.value}));
    series.push_back({{"metric", metric}, {"unit", result->unit}, {"points", std::move(points)}});
  }
  return JsonResponse(200, json{{"gpu", parsed->base.gpu_index},
                                {"from_ms", ToUnixMillis(parsed->base.from)},
                                {"to_ms", ToUnixMillis(parsed->base.to)},
                                {"series", std::move(series)}});
}

HttpResponse AgentRoutes::DiagnosticsJson() const {
  if (!sources_.history) return ErrorResponse(503, "history is not available");
  Result<std::vector<DiagnosticRecord>> latest = sources_.history->LatestDiagnostics();
  if (!latest) return ErrorResponse(500, "diagnostics: " + latest.error().message);
  json diagnostics = json::array();
  for (const DiagnosticRecord& record : *latest) {
    json entry = DiagnosticToJson(record);
    entry["gpu_index"] = record.gpu_index;
    entry["uuid"] = record.uuid;
    entry["pci_bus_id"] = record.pci_bus_id;
    entry["finished_at_ms"] = ToUnixMillis(record.finished_at);
    diagnostics.push_back(std::move(entry));
  }
  return JsonResponse(200, json{{"diagnostics", std::move(diagnostics)}});
}

}  // namespace gpudoctor
