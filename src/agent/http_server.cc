#include "agent/http_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "agent/dashboard_assets.h"
#include "agent/finding_json.h"
#include "common/text.h"
#include "model/snapshot_json.h"

namespace gpudoctor {

using nlohmann::json;

Result<ListenAddress> ParseListenAddress(std::string_view text) {
  text = Trim(text);
  ListenAddress address;
  std::string_view host = text;
  std::optional<std::string_view> port;
  if (StartsWith(text, "[")) {  // [v6]:port or [v6]
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return Error{fmt::format("bad listen address '{}'", text)};
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return Error{fmt::format("bad listen address '{}'", text)};
      port = rest.substr(1);
    }
  } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    if (text.find(':') != colon) {
      return Error{fmt::format("listen address '{}': write IPv6 addresses as [ADDR]:PORT", text)};
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  address.host = host.empty() ? "0.0.0.0" : std::string(host);
  if (port) {
    std::optional<int> number = ParseInt<int>(*port);
    if (!number || *number < 0 || *number > 65535) {
      return Error{fmt::format("listen address '{}': bad port '{}'", text, *port)};
    }
    address.port = *number;
  }
  if (text.empty()) return Error{"empty listen address"};
  return address;
}

Result<std::string> ReadBearerTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{fmt::format("cannot read token file {}", path)};
  std::string line;
  std::getline(in, line);
  std::string token(Trim(line));
  if (token.empty()) return Error{fmt::format("token file {} is empty", path)};
  return token;
}

namespace {

// httplib's own pool queues without limit. This one has a fixed number of
// workers and, once `max_queued` connections wait, blocks the accepting
// thread, so further clients wait in the kernel's listen backlog instead of
// in our memory.
class BoundedThreadPool final : public httplib::TaskQueue {
 public:
  BoundedThreadPool(size_t threads, size_t max_queued) : max_queued_(std::max<size_t>(1, max_queued)) {
    for (size_t i = 0; i < std::max<size_t>(1, threads); ++i) workers_.emplace_back([this] { Work(); });
  }
  ~BoundedThreadPool() override = default;

  void enqueue(std::function<void()> task) override {
    std::unique_lock lock(mutex_);
    not_full_.wait(lock, [&] { return jobs_.size() < max_queued_ || stopping_; });
    jobs_.push_back(std::move(task));
    not_empty_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    not_empty_.notify_all();
    not_full_.notify_all();
    for (std::thread& worker : workers_) worker.join();
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        not_empty_.wait(lock, [&] { return !jobs_.empty() || stopping_; });
        if (jobs_.empty()) return;  // stopping, and every queued connection served
        task = std::move(jobs_.front());
        jobs_.pop_front();
        not_full_.notify_one();
      }
      task();
    }
  }

  const size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

constexpr const char* kJsonType = "application/json; charset=utf-8";

// Strings in snapshots come from drivers and /proc; invalid UTF-8 must not
// make a response fail.
std::string Dump(const json& body) { return body.dump(-1, ' ', false, json::error_handler_t::replace); }

void ReplyJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(Dump(body), kJsonType);
}

void ReplyError(httplib::Response& res, int status, std::string message) {
  ReplyJson(res, status, json{{"error", std::move(message)}});
}

// Compares in time independent of where the strings differ. A token's length
// is not worth hiding.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
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

struct ParsedHistoryRequest {
  HistoryQuery base;
  std::vector<std::string> metrics;
};

constexpr size_t kMaxHistoryMetrics = 16;
constexpr size_t kMaxHistoryPoints = 10000;
constexpr auto kMaxHistoryRange = std::chrono::hours(24 * 400);
constexpr int64_t kMaxUnixMillis = 4'102'444'800'000;  // 2100-01-01

}  // namespace

class HttpServer::Impl {
 public:
  Impl(HttpServerSources sources, HttpServerOptions options, const Clock& clock)
      : sources_(std::move(sources)), options_(std::move(options)), clock_(clock) {
    Configure();
  }

  ~Impl() { Stop(); }

  Result<int> Start() {
    if (thread_.joinable()) return Error{"HTTP server already started"};
    const ListenAddress& at = options_.listen;
    int port = at.port;
    if (port == 0) {
      port = server_.bind_to_any_port(at.host);
      if (port < 0) return Error{fmt::format("cannot bind {}:0", at.host)};
    } else if (!server_.bind_to_port(at.host, port)) {
      return Error{fmt::format("cannot bind {}:{} (in use, or not a local address?)", at.host, port)};
    }
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() only takes effect once the loop runs; wait for it so that an
    // immediate Stop() cannot be lost.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!server_.is_running()) {
      if (std::chrono::steady_clock::now() > deadline) {
        server_.stop();
        thread_.join();
        return Error{fmt::format("HTTP server on {}:{} did not start", at.host, port)};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return port;
  }

  void Stop() {
    if (!thread_.joinable()) return;
    server_.stop();
    thread_.join();
  }

 private:
  void Configure() {
    const size_t threads = options_.worker_threads;
    const size_t queued = options_.max_queued_connections;
    server_.new_task_queue = [threads, queued] { return new BoundedThreadPool(threads, queued); };
    // SO_REUSEADDR so a restart can bind at once, but not httplib's default
    // SO_REUSEPORT: a second agent on the same port must fail, not share it.
    // TCP_NODELAY (inherited by accepted sockets): headers and body go out in
    // separate writes, and Nagle would hold the body's tail for a delayed ACK.
    server_.set_socket_options([](socket_t sock) {
      int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    });
    server_.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(options_.read_timeout));
    server_.set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(options_.write_timeout));
    server_.set_keep_alive_timeout(std::max<time_t>(
        1, std::chrono::duration_cast<std::chrono::seconds>(options_.keep_alive_timeout).count()));
    server_.set_keep_alive_max_count(100);
    server_.set_payload_max_length(options_.max_request_body_bytes);

    server_.set_pre_routing_handler(
        [this](const httplib::Request& req, httplib::Response& res) { return Admit(req, res); });
    server_.set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("Referrer-Policy", "no-referrer");
      res.set_header("X-Frame-Options", "DENY");
    });
    server_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
      ReplyError(res, 500, "internal error");
    });
    server_.set_error_handler([](const httplib::Request&, httplib::Response& res) {
      if (res.body.empty()) {
        ReplyError(res, res.status, res.status == 404 ? "not found" : "request refused");
      }
    });

    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) { Metrics(res); });
    server_.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) { Health(res); });
    server_.Get("/api/v1/snapshot",
                [this](const httplib::Request&, httplib::Response& res) { SnapshotEndpoint(res); });
    server_.Get("/api/v1/findings",
                [this](const httplib::Request&, httplib::Response& res) { Findings(res); });
    server_.Get("/api/v1/status",
                [this](const httplib::Request&, httplib::Response& res) { StatusEndpoint(res); });
    server_.Get("/api/v1/history",
                [this](const httplib::Request& req, httplib::Response& res) { History(req, res); });
    server_.Get(R"(/[A-Za-z0-9._\-/]*)",
                [](const httplib::Request& req, httplib::Response& res) { Asset(req, res); });
  }

  // Method and token checks shared by every route.
  httplib::Server::HandlerResponse Admit(const httplib::Request& req, httplib::Response& res) {
    if (req.method != "GET" && req.method != "HEAD") {
      res.set_header("Allow", "GET, HEAD");
      ReplyError(res, 405, "only GET and HEAD are served");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!options_.bearer_token || IsPublicPath(req.path)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    const std::string header = req.get_header_value("Authorization");
    constexpr std::string_view kScheme = "Bearer ";
    if (StartsWith(header, kScheme) &&
        ConstantTimeEquals(std::string_view(header).substr(kScheme.size()), *options_.bearer_token)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    res.set_header("WWW-Authenticate", "Bearer realm=\"gpudoctor\"");
    ReplyError(res, 401, "a bearer token is required");
    return httplib::Server::HandlerResponse::Handled;
  }

  bool Fresh(const AgentStatus& status, WallTime now) const {
    return status.last_sample_at && now - *status.last_sample_at <= options_.stale_after;
  }

  void Metrics(httplib::Response& res) {
    std::shared_ptr<const Snapshot> snapshot = sources_.view.LatestSnapshot();
    std::optional<AlertCounters> alerts;
    if (sources_.alert_counters) alerts = sources_.alert_counters();
    MetricsInput input{.snapshot = snapshot.get(),
                       .findings = sources_.view.OpenFindings(),
                       .status = sources_.view.Status(),
                       .now = clock_.Now(),
                       .alerts = alerts ? &*alerts : nullptr};
    MetricsOptions options{.dcgm_compatible = options_.dcgm_compatible_metrics,
                           .stale_after = options_.stale_after,
                           .version = options_.version};
    res.body = RenderPrometheusMetrics(input, options);  // moved, not copied as set_content would
    res.set_header("Content-Type", std::string(kPrometheusContentType));
  }

  void Health(httplib::Response& res) {
    const AgentStatus status = sources_.view.Status();
    const WallTime now = clock_.Now();
    json body = json::object();
    if (!status.last_sample_at) {
      body["status"] = "no_sample";
      ReplyJson(res, 503, body);
      return;
    }
    const double age = std::chrono::duration<double>(now - *status.last_sample_at).count();
    body["last_sample_age_seconds"] = std::max(0.0, age);
    body["stale_after_seconds"] = std::chrono::duration<double>(options_.stale_after).count();
    const bool fresh = Fresh(status, now);
    body["status"] = fresh ? "ok" : "stale";
    ReplyJson(res, fresh ? 200 : 503, body);
  }

  void SnapshotEndpoint(httplib::Response& res) {
    std::shared_ptr<const Snapshot> snapshot = sources_.view.LatestSnapshot();
    if (!snapshot) {
      ReplyError(res, 503, "no sample yet");
      return;
    }
    ReplyJson(res, 200, SnapshotToJson(*snapshot));
  }

  void Findings(httplib::Response& res) {
    json findings = json::array();
    for (const StoredFinding& open : sources_.view.OpenFindings())
      findings.push_back(StoredFindingToJson(open));
    ReplyJson(res, 200, json{{"findings", std::move(findings)}});
  }

  void StatusEndpoint(httplib::Response& res) {
    const AgentStatus status = sources_.view.Status();
    std::shared_ptr<const Snapshot> snapshot = sources_.view.LatestSnapshot();
    const WallTime now = clock_.Now();
    json body = json::object();
    body["version"] = options_.version;
    body["hostname"] = snapshot ? snapshot->hostname : "";
    body["server_time_ms"] = ToUnixMillis(now);
    body["started_at_ms"] = ToUnixMillis(status.started_at);
    body["last_sample_at_ms"] =
        status.last_sample_at ? json(ToUnixMillis(*status.last_sample_at)) : json(nullptr);
    body["fresh"] = Fresh(status, now);
    body["stale_after_seconds"] = std::chrono::duration<double>(options_.stale_after).count();
    body["samples_total"] = status.samples_total;
    body["probe_hangs_total"] = status.probe_hangs_total;
    body["history_metrics"] = sources_.history ? json(sources_.history->MetricNames()) : json::array();
    ReplyJson(res, 200, body);
  }

  Result<ParsedHistoryRequest> ParseHistory(const httplib::Request& req) const {
    ParsedHistoryRequest out;
    std::optional<uint32_t> gpu = ParseInt<uint32_t>(req.get_param_value("gpu"));
    if (!gpu) return Error{"gpu: give a GPU index, e.g. gpu=0"};
    out.base.gpu_index = *gpu;

    const std::vector<std::string> known = sources_.history->MetricNames();
    const std::string metric_list = req.get_param_value("metric");
    for (std::string_view name : Split(metric_list, ',')) {
      name = Trim(name);
      if (name.empty()) continue;
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        return Error{fmt::format("metric: unknown metric '{}'", name)};
      }
      out.metrics.emplace_back(name);
    }
    if (out.metrics.empty()) return Error{"metric: give one or more metric names, comma-separated"};
    if (out.metrics.size() > kMaxHistoryMetrics) return Error{"metric: too many metrics in one request"};

    const WallTime now = clock_.Now();
    auto time_param = [&](const char* name, WallTime fallback) -> std::optional<WallTime> {
      if (!req.has_param(name)) return fallback;
      std::optional<int64_t> ms = ParseInt<int64_t>(req.get_param_value(name));
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

    if (req.has_param("points")) {
      std::optional<size_t> points = ParseInt<size_t>(req.get_param_value("points"));
      if (!points || *points == 0 || *points > kMaxHistoryPoints) {
        return Error{fmt::format("points: give 1 to {}", kMaxHistoryPoints)};
      }
      out.base.max_points = *points;
    }
    return out;
  }

  void History(const httplib::Request& req, httplib::Response& res) {
    if (!sources_.history) {
      ReplyError(res, 503, "history is not available");
      return;
    }
    Result<ParsedHistoryRequest> parsed = ParseHistory(req);
    if (!parsed) {
      ReplyError(res, 400, parsed.error().message);
      return;
    }
    json series = json::array();
    for (const std::string& metric : parsed->metrics) {
      HistoryQuery query = parsed->base;
      query.metric = metric;
      Result<HistorySeries> result = sources_.history->Query(query);
      if (!result) {
        ReplyError(res, 500, fmt::format("history of {}: {}", metric, result.error().message));
        return;
      }
      json points = json::array();
      for (const HistoryPoint& p : result->points)
        points.push_back(json::array({ToUnixMillis(p.time), p.value}));
      series.push_back({{"metric", metric}, {"unit", result->unit}, {"points", std::move(points)}});
    }
    ReplyJson(res, 200,
              json{{"gpu", parsed->base.gpu_index},
                   {"from_ms", ToUnixMillis(parsed->base.from)},
                   {"to_ms", ToUnixMillis(parsed->base.to)},
                   {"series", std::move(series)}});
  }

  static void Asset(const httplib::Request& req, httplib::Response& res) {
    const DashboardAsset* asset = FindDashboardAsset(req.path);
    if (!asset) {
      ReplyError(res, 404, "not found");
      return;
    }
    const std::string& etag = ETagFor(*asset);
    res.set_header("ETag", etag);
    res.set_header("Cache-Control", "no-cache");
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                   "connect-src 'self'; frame-ancestors 'none'");
    if (req.get_header_value("If-None-Match") == etag) {
      res.status = 304;
      return;
    }
    res.set_content(asset->body.data(), asset->body.size(), std::string(asset->content_type));
  }

  HttpServerSources sources_;
  const HttpServerOptions options_;
  const Clock& clock_;
  httplib::Server server_;
  std::thread thread_;
};

HttpServer::HttpServer(HttpServerSources sources, HttpServerOptions options, const Clock& clock)
    : impl_(std::make_unique<Impl>(std::move(sources), std::move(options), clock)) {}

HttpServer::~HttpServer() = default;

Result<int> HttpServer::Start() { return impl_->Start(); }

void HttpServer::Stop() { impl_->Stop(); }

}  // namespace gpudoctor
