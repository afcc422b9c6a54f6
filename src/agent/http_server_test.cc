#include "agent/http_server.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/agent_state.h"
#include "net/prometheus_text_parser.h"
#include "agent/testing/synthetic_agent.h"
#include "agent/testing/test_start.h"
#include "common/text.h"

namespace gpudoctor {
namespace {

using nlohmann::json;
using std::chrono::seconds;

using agent_testing::kStart;

// A FakeClock the server threads may read while the test moves it.
class SharedFakeClock final : public Clock {
 public:
  WallTime Now() const override {
    std::lock_guard lock(mutex_);
    return clock_.Now();
  }
  std::chrono::steady_clock::time_point Steady() const override {
    std::lock_guard lock(mutex_);
    return clock_.Steady();
  }
  void Set(WallTime t) {
    std::lock_guard lock(mutex_);
    clock_.Set(t);
  }

 private:
  mutable std::mutex mutex_;
  FakeClock clock_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions options = {}, bool with_history = true,
                   std::function<AlertCounters()> alert_counters = {}) {
    clock_.Set(kStart);
    options.listen = {"127.0.0.1", 0};
    server_ = std::make_unique<HttpServer>(HttpServerSources{.view = state_,
                                                             .history = with_history ? &history_ : nullptr,
                                                             .alert_counters = std::move(alert_counters)},
                                           options, clock_);
    Result<int> port = server_->Start();
    ASSERT_TRUE(port.ok()) << port.error().message;
    port_ = *port;
  }

  void PublishSample(WallTime at) {
    auto snapshot = std::make_shared<const Snapshot>(SyntheticSnapshot(8, at));
    state_.SetOpenFindings(SyntheticIncidents(*snapshot, at));
    state_.PublishSnapshot(std::move(snapshot));
  }

  httplib::Result Get(const std::string& path, httplib::Headers headers = {}) {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(std::chrono::seconds(5));
    return client.Get(path.c_str(), headers);
  }

  json GetJson(const std::string& path, int expected_status = 200) {
    httplib::Result res = Get(path);
    EXPECT_TRUE(res) << path;
    if (!res) return {};
    EXPECT_EQ(res->status, expected_status) << path << ": " << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json; charset=utf-8");
    return json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  }

  SharedFakeClock clock_;
  AgentState state_{kStart};
  SyntheticHistory history_{8};
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST(ListenAddress, Parses) {
  EXPECT_EQ(*ParseListenAddress("127.0.0.1:9847", kDefaultHttpPort), (ListenAddress{"127.0.0.1", 9847}));
  EXPECT_EQ(*ParseListenAddress("0.0.0.0:80", kDefaultHttpPort), (ListenAddress{"0.0.0.0", 80}));
  EXPECT_EQ(*ParseListenAddress(":9000", kDefaultHttpPort), (ListenAddress{"0.0.0.0", 9000}));
  EXPECT_EQ(*ParseListenAddress("[::1]:9847", kDefaultHttpPort), (ListenAddress{"::1", 9847}));
  EXPECT_EQ(*ParseListenAddress("[::]", kDefaultHttpPort), (ListenAddress{"::", kDefaultHttpPort}));
  EXPECT_EQ(*ParseListenAddress("localhost", kDefaultHttpPort), (ListenAddress{"localhost", kDefaultHttpPort}));
  EXPECT_EQ(*ParseListenAddress("127.0.0.1:0", kDefaultHttpPort), (ListenAddress{"127.0.0.1", 0}));
  EXPECT_FALSE(ParseListenAddress("", kDefaultHttpPort).ok());
  EXPECT_FALSE(ParseListenAddress("127.0.0.1:99999", kDefaultHttpPort).ok());
  EXPECT_FALSE(ParseListenAddress("127.0.0.1:http", kDefaultHttpPort).ok());
  EXPECT_FALSE(ParseListenAddress("::1:9847", kDefaultHttpPort).ok());
  EXPECT_FALSE(ParseListenAddress("[::1", kDefaultHttpPort).ok());
  EXPECT_FALSE(ParseListenAddress("[::1]9847", kDefaultHttpPort).ok());
}

TEST(BearerTokenFile, ReadsTheFirstLineTrimmed) {
  const std::string path = ::testing::TempDir() + "/token";
  std::ofstream(path) << "  s3cret-token \nignored\n";
  EXPECT_EQ(*ReadBearerTokenFile(path), "s3cret-token");
  std::ofstream(path) << "\n";
  EXPECT_FALSE(ReadBearerTokenFile(path).ok());
  EXPECT_FALSE(ReadBearerTokenFile(path + ".missing").ok());
}

TEST_F(HttpServerTest, MetricsAreValidPrometheusText) {
  StartServer({.dcgm_compatible_metrics = true, .version = "9.9.9"});
  PublishSample(kStart);
  httplib::Result res = Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  Result<PromExposition> e = ParsePrometheusText(res->body);
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->Value("gpudoctor_up"), 1);
  EXPECT_EQ(e->Find("gpudoctor_gpu_temperature_celsius").size(), 8u);
  EXPECT_EQ(e->Find("DCGM_FI_DEV_GPU_TEMP").size(), 8u);
  EXPECT_EQ(e->Find("gpudoctor_finding").size(), 3u);
  EXPECT_EQ(e->Value("gpudoctor_build_info", {{"version", "9.9.9"}}), 1);
}

// Without a token the agent on localhost answers localhost alone: a web page
// that rebinds its own name to 127.0.0.1 sends that name as Host.
TEST_F(HttpServerTest, WithoutATokenOnlyRequestsToLocalhostAreAnswered) {
  StartServer();
  PublishSample(kStart);
  httplib::Result rebound = Get("/api/v1/findings", {{"Host", "attacker.example:9847"}});
  ASSERT_TRUE(rebound);
  EXPECT_EQ(rebound->status, 403);
  EXPECT_EQ(rebound->body.find("GPU"), std::string::npos) << "nothing of the machine in the refusal";
  httplib::Result local = Get("/api/v1/findings", {{"Host", "localhost:9847"}});
  ASSERT_TRUE(local);
  EXPECT_EQ(local->status, 200);
}

TEST_F(HttpServerTest, HealthzFollowsSampleFreshness) {
  StartServer({.stale_after = seconds(15)});
  json body = GetJson("/healthz", 503);
  EXPECT_EQ(body["status"], "no_sample");

  PublishSample(kStart);
  clock_.Set(kStart + seconds(10));
  body = GetJson("/healthz", 200);
  EXPECT_EQ(body["status"], "ok");
  EXPECT_EQ(body["last_sample_age_seconds"], 10.0);

  clock_.Set(kStart + seconds(16));
  body = GetJson("/healthz", 503);
  EXPECT_EQ(body["status"], "stale");
}

// A receiver that holds a delivery is seen in /healthz, never as silence.
TEST_F(HttpServerTest, HealthzShowsEachAlertSinksDeliveries) {
  AlertCounters counters{.sinks = {{.name = "webhook",
                                    .delivered = 3,
                                    .failed = 1,
                                    .queued = 2,
                                    .delivering_since = kStart,
                                    .last_error = "gave up after 4 attempts: no complete answer within 5s"},
                                   {.name = "syslog", .delivered = 4}},
                         .dropped = 1};
  StartServer({}, true, [&counters] { return counters; });
  PublishSample(kStart);
  clock_.Set(kStart + seconds(10));
  json body = GetJson("/healthz", 200);
  ASSERT_TRUE(body.contains("alerts")) << body.dump(2);
  const json& webhook = body["alerts"]["sinks"][0];
  EXPECT_EQ(webhook["sink"], "webhook");
  EXPECT_EQ(webhook["delivered_total"], 3);
  EXPECT_EQ(webhook["failed_total"], 1);
  EXPECT_EQ(webhook["queued"], 2);
  EXPECT_EQ(webhook["delivering_for_seconds"], 10.0);
  EXPECT_EQ(webhook["last_error"], "gave up after 4 attempts: no complete answer within 5s");
  EXPECT_TRUE(body["alerts"]["sinks"][1]["delivering_for_seconds"].is_null());
  EXPECT_TRUE(body["alerts"]["sinks"][1]["last_error"].is_null());
  EXPECT_EQ(body["alerts"]["dropped_total"], 1);
}

TEST_F(HttpServerTest, SnapshotFindingsAndStatusAsJson) {
  StartServer({.version = "1.0.0"});
  json missing = GetJson("/api/v1/snapshot", 503);
  EXPECT_EQ(missing["error"], "no sample yet");

  PublishSample(kStart);
  json snapshot = GetJson("/api/v1/snapshot");
  EXPECT_EQ(snapshot["hostname"], kSyntheticHostname);
  ASSERT_EQ(snapshot["gpus"].size(), 8u);
  EXPECT_EQ(snapshot["gpus"][0]["pci_bus_id"], "0000:18:00.0");
  EXPECT_TRUE(snapshot["gpus"][0]["fan_speeds_percent"].is_null());

  json findings = GetJson("/api/v1/findings")["findings"];
  ASSERT_EQ(findings.size(), 3u);
  EXPECT_EQ(findings[0]["id"], "row_remap_pending");
  EXPECT_EQ(findings[0]["severity"], "critical");
  EXPECT_EQ(findings[0]["gpu"]["index"], 5);
  EXPECT_FALSE(findings[0]["cause"].get<std::string>().empty());
  EXPECT_FALSE(findings[0]["actions"].empty());
  EXPECT_EQ(findings[0]["opened_at_ms"], ToUnixMillis(kStart));
  EXPECT_EQ(findings[0]["key"], "row_remap_pending@" + snapshot["gpus"][5]["uuid"].get<std::string>());
  EXPECT_TRUE(findings[0]["resolved_at"].is_null());

  json status = GetJson("/api/v1/status");
  EXPECT_EQ(status["version"], "1.0.0");
  EXPECT_EQ(status["fresh"], true);
  EXPECT_EQ(status["samples_total"], 1);
  EXPECT_EQ(status["server_time_ms"], ToUnixMillis(kStart));
  EXPECT_EQ(status["history_metrics"].size(), 5u);
}

TEST_F(HttpServerTest, HistoryOverARange) {
  StartServer();
  const int64_t to = ToUnixMillis(kStart);
  const int64_t from = to - 3600 * 1000;
  json body = GetJson(
      fmt::format("/api/v1/history?gpu=3&metric=temperature_c,power_w&from={}&to={}&points=120", from, to));
  EXPECT_EQ(body["gpu"], 3);
  EXPECT_EQ(body["from_ms"], from);
  ASSERT_EQ(body["series"].size(), 2u);
  EXPECT_EQ(body["series"][0]["metric"], "temperature_c");
  EXPECT_EQ(body["series"][0]["unit"], "°C");
  const json& points = body["series"][0]["points"];
  ASSERT_GE(points.size(), 100u);
  EXPECT_LE(points.size(), 121u);
  int64_t previous = from - 1;
  for (const json& p : points) {
    const int64_t t = p[0];
    EXPECT_GT(t, previous);
    EXPECT_LE(t, to);
    previous = t;
    EXPECT_EQ(p[1].get<double>(), SyntheticReading(3, "temperature_c", FromUnixMillis(t)));
  }
  // Defaults: the last hour up to now.
  body = GetJson("/api/v1/history?gpu=0&metric=utilization_gpu_percent");
  EXPECT_EQ(body["to_ms"], to);
  EXPECT_EQ(body["from_ms"], from);
}

TEST_F(HttpServerTest, HistoryRejectsBadQueries) {
  StartServer();
  for (const char* query :
       {"?metric=temperature_c", "?gpu=x&metric=temperature_c", "?gpu=0", "?gpu=0&metric=bogus",
        "?gpu=0&metric=temperature_c&from=10&to=5", "?gpu=0&metric=temperature_c&from=abc",
        "?gpu=0&metric=temperature_c&points=0", "?gpu=0&metric=temperature_c&points=99999999",
        "?gpu=0&metric=temperature_c&from=0&to=99999999999999", "?gpu=0&metric=temperature_c&from=-5&to=10",
        "?gpu=0&metric=temperature_c&to=9223372036854775807",
        "?gpu=0&metric=temperature_c&from=0&to=4102444800000"}) {
    json body = GetJson(std::string("/api/v1/history") + query, 400);
    EXPECT_TRUE(body.contains("error")) << query;
  }
}

TEST_F(HttpServerTest, DiagnosticsFromTheHistory) {
  const DiagnosticRecord record{.finished_at = kStart - seconds(7200),
                                .gpu_index = 3,
                                .uuid = "GPU-3",
                                .pci_bus_id = "0000:3b:00.0",
                                .test = "memtest",
                                .state = "faulty",
                                .summary = "stuck bits at 2 addresses",
                                .command = "gpudoctor diag memtest --gpu 3"};
  history_.diagnostics = {record};
  StartServer();
  json diagnostics = GetJson("/api/v1/diagnostics")["diagnostics"];
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(diagnostics[0], (json{{"gpu_index", 3},
                                  {"uuid", "GPU-3"},
                                  {"pci_bus_id", "0000:3b:00.0"},
                                  {"test", "memtest"},
                                  {"state", "faulty"},
                                  {"finished_at", FormatIsoUtc(record.finished_at)},
                                  {"finished_at_ms", ToUnixMillis(record.finished_at)},
                                  {"summary", "stuck bits at 2 addresses"},
                                  {"command", "gpudoctor diag memtest --gpu 3"}}));
}

TEST_F(HttpServerTest, HistoryWithoutAStoreIsUnavailable) {
  StartServer({}, /*with_history=*/false);
  GetJson("/api/v1/history?gpu=0&metric=temperature_c", 503);
  GetJson("/api/v1/diagnostics", 503);
  EXPECT_TRUE(GetJson("/api/v1/status")["history_metrics"].empty());
}

TEST_F(HttpServerTest, BearerTokenGuardsDataButNotHealthOrThePage) {
  StartServer({.bearer_token = "s3cret"});
  PublishSample(kStart);
  for (const char* path :
       {"/metrics", "/api/v1/snapshot", "/api/v1/findings", "/api/v1/history?gpu=0&metric=power_w"}) {
    httplib::Result none = Get(path);
    ASSERT_TRUE(none);
    EXPECT_EQ(none->status, 401) << path;
    EXPECT_EQ(none->get_header_value("WWW-Authenticate"), "Bearer realm=\"gpudoctor\"");
    EXPECT_EQ(Get(path, {{"Authorization", "Bearer wrong"}})->status, 401) << path;
    EXPECT_EQ(Get(path, {{"Authorization", "Bearer s3cret-and-more"}})->status, 401) << path;
    EXPECT_EQ(Get(path, {{"Authorization", "Basic s3cret"}})->status, 401) << path;
    EXPECT_EQ(Get(path, {{"Authorization", "Bearer s3cret"}})->status, 200) << path;
  }
  EXPECT_EQ(Get("/healthz")->status, 200);
  EXPECT_EQ(Get("/")->status, 200);
  EXPECT_EQ(Get("/app.js")->status, 200);
}

// RFC 9110 section 11.1: the scheme is case-insensitive.
TEST_F(HttpServerTest, BearerSchemeInAnyCase) {
  StartServer({.bearer_token = "s3cret"});
  PublishSample(kStart);
  for (const char* header : {"bearer s3cret", "BEARER s3cret", "bEaReR s3cret", "Bearer   s3cret"}) {
    EXPECT_EQ(Get("/metrics", {{"Authorization", header}})->status, 200) << header;
  }
  for (const char* header : {"Bearers3cret", "Bearer", "Bearer ", "bearer S3CRET", "Bear s3cret"}) {
    EXPECT_EQ(Get("/metrics", {{"Authorization", header}})->status, 401) << header;
  }
}

TEST_F(HttpServerTest, ServesTheEmbeddedDashboard) {
  StartServer();
  httplib::Result page = Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("uPlot.iife.min.js"), std::string::npos);
  EXPECT_EQ(page->body.find("http://"), std::string::npos);  // nothing from elsewhere
  EXPECT_EQ(page->body.find("https://"), std::string::npos);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'self'"), std::string::npos);
  EXPECT_EQ(page->get_header_value("X-Content-Type-Options"), "nosniff");

  httplib::Result script = Get("/uPlot.iife.min.js");
  ASSERT_TRUE(script);
  EXPECT_EQ(script->status, 200);
  EXPECT_EQ(script->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_GT(script->body.size(), 10000u);

  const std::string etag = script->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());
  httplib::Result again = Get("/uPlot.iife.min.js", {{"If-None-Match", etag}});
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());

  json missing = GetJson("/no-such-file.js", 404);
  EXPECT_EQ(missing["error"], "not found");
  GetJson("/weird%20path", 404);
}

TEST_F(HttpServerTest, RefusesOtherMethodsAndOversizedRequests) {
  StartServer();
  httplib::Client client("127.0.0.1", port_);
  httplib::Result post = client.Post("/metrics", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->get_header_value("Allow"), "GET, HEAD");
  httplib::Result del = client.Delete("/api/v1/findings");
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 405);

  httplib::Result head = client.Head("/healthz");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 503);

  httplib::Result long_uri = Get("/api/v1/history?gpu=0&metric=" + std::string(20000, 'a'));
  ASSERT_TRUE(long_uri);
  EXPECT_EQ(long_uri->status, 414);
  httplib::Result big_header = Get("/healthz", {{"X-Padding", std::string(20000, 'b')}});
  ASSERT_TRUE(big_header);
  EXPECT_EQ(big_header->status, 431);
}

// The server only reads published state, so a sampler stuck inside NVML
// cannot stall it: /metrics keeps answering and reports the stall.
TEST_F(HttpServerTest, KeepsAnsweringWhileSamplingIsStuck) {
  StartServer({.stale_after = seconds(15)});
  Snapshot hung = SyntheticSnapshot(8, kStart);
  hung.hangs = {{.gpu_index = 3, .call = "nvmlDeviceGetPowerUsage", .deadline = seconds(5)}};
  state_.PublishSnapshot(std::make_shared<const Snapshot>(std::move(hung)));

  std::mutex mutex;
  std::condition_variable released;
  bool release = false;
  std::thread stuck_sampler([&] {  // like a probe that never returns
    std::unique_lock lock(mutex);
    released.wait(lock, [&] { return release; });
  });

  clock_.Set(kStart + seconds(600));
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    httplib::Result res = Get("/metrics");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200);
    Result<PromExposition> e = ParsePrometheusText(res->body);
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(e->Value("gpudoctor_up"), 0);
    EXPECT_EQ(e->Value("gpudoctor_sample_age_seconds"), 600);
    EXPECT_EQ(e->Value("gpudoctor_probe_hangs_total"), 1);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(5));
  EXPECT_EQ(Get("/healthz")->status, 503);

  {
    std::lock_guard lock(mutex);
    release = true;
  }
  released.notify_all();
  stuck_sampler.join();
}

TEST_F(HttpServerTest, ManyClientsThroughFewConnectionSlots) {
  StartServer({.limits = {.threads = 2, .max_connections = 4}});
  PublishSample(kStart);
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 12; ++c) {
    clients.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        httplib::Client client("127.0.0.1", port_);
        client.set_keep_alive(false);
        httplib::Result res = client.Get("/metrics");
        if (res && res->status == 200) ++ok;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(ok, 12 * 20);
}

TEST_F(HttpServerTest, StopsPromptlyWithAnIdleKeepAliveClient) {
  StartServer({.limits = {.idle_timeout = seconds(60)}});
  httplib::Client client("127.0.0.1", port_);
  client.set_keep_alive(true);
  ASSERT_TRUE(client.Get("/healthz"));
  const auto started = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(5));
  server_->Stop();  // idempotent
}

TEST_F(HttpServerTest, MetricsAreGzippedWhenAskedAndVaryOnIt) {
  StartServer();
  PublishSample(kStart);
  httplib::Client client("127.0.0.1", port_);
  client.set_decompress(false);  // see the bytes as sent
  httplib::Result plain = client.Get("/metrics", {{"Accept-Encoding", "identity"}});
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->get_header_value("Vary"), "Accept-Encoding");
  EXPECT_FALSE(plain->has_header("Content-Encoding"));
  ASSERT_TRUE(ParsePrometheusText(plain->body).ok());

  httplib::Result packed = client.Get("/metrics", {{"Accept-Encoding", "gzip"}});
  ASSERT_TRUE(packed);
  EXPECT_EQ(packed->get_header_value("Content-Encoding"), "gzip");
  EXPECT_EQ(packed->get_header_value("Vary"), "Accept-Encoding");
  EXPECT_EQ(packed->body.substr(0, 2), "\x1f\x8b");
  EXPECT_LT(packed->body.size(), plain->body.size() / 5);

  httplib::Result refused = client.Get("/metrics", {{"Accept-Encoding", "gzip;q=0, deflate"}});
  ASSERT_TRUE(refused);
  EXPECT_FALSE(refused->has_header("Content-Encoding"));
  EXPECT_EQ(refused->body, plain->body);

  httplib::Client decoding("127.0.0.1", port_);  // asks for gzip and decodes, as Prometheus does
  httplib::Result decoded = decoding.Get("/metrics");
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->body, plain->body);
}

TEST_F(HttpServerTest, HeadOfMetricsHasNoBody) {
  StartServer();
  PublishSample(kStart);
  httplib::Client client("127.0.0.1", port_);
  httplib::Result head = client.Head("/metrics");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  EXPECT_EQ(head->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
}

// A full disk must not make a liveness probe restart the agent: the GPUs are
// still watched, and a restart cannot free the disk.
TEST_F(HttpServerTest, HealthzIsDegradedNotDownWhileTheStoreFails) {
  StartServer({.stale_after = seconds(15)});
  const StoreHealth failing{.ok = false,
                            .errors_total = 7,
                            .path = "/var/lib/gpudoctor/history.db",
                            .last_error = "database or disk is full",
                            .failing_since = kStart - seconds(30),
                            .queued = 12,
                            .dropped_total = 3};
  state_.SetStoreHealth(failing);
  json body = GetJson("/healthz", 503);
  EXPECT_EQ(body["status"], "no_sample");

  PublishSample(kStart);
  body = GetJson("/healthz", 200);
  EXPECT_EQ(body["status"], "degraded");
  const json expected_store = {{"ok", false},
                               {"errors_total", 7},
                               {"last_error", "database or disk is full"},
                               {"path", "/var/lib/gpudoctor/history.db"},
                               {"queued", 12},
                               {"dropped_total", 3},
                               {"failing_since_ms", ToUnixMillis(kStart) - 30000}};
  EXPECT_EQ(body["store"], expected_store);
  EXPECT_EQ(GetJson("/api/v1/status")["store"], expected_store);

  clock_.Set(kStart + seconds(16));
  EXPECT_EQ(GetJson("/healthz", 503)["status"], "stale");

  clock_.Set(kStart);
  state_.SetStoreHealth({.ok = true, .path = "/var/lib/gpudoctor/history.db"});
  body = GetJson("/healthz", 200);
  EXPECT_EQ(body["status"], "ok");
  EXPECT_EQ(body["store"]["ok"], true);
  EXPECT_TRUE(body["store"]["failing_since_ms"].is_null());
}

TEST_F(HttpServerTest, WithoutAStoreStatusSaysSo) {
  StartServer();
  PublishSample(kStart);
  EXPECT_TRUE(GetJson("/api/v1/status")["store"].is_null());
  EXPECT_FALSE(GetJson("/healthz").contains("store"));
}

TEST_F(HttpServerTest, ReportsAPortInUse) {
  StartServer();
  HttpServer second({.view = state_}, {.listen = {"127.0.0.1", port_}}, clock_);
  Result<int> port = second.Start();
  ASSERT_FALSE(port.ok());
  EXPECT_NE(port.error().message.find(std::to_string(port_)), std::string::npos);
}

}  // namespace
}  // namespace gpudoctor
