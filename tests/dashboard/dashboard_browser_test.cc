// Loads the dashboard in headless Chromium from a live HttpServer over eight
// synthetic GPUs, and checks what a person would see: every GPU with its
// health, the open findings with cause and actions, and four drawn charts.
// The page's DOM and a screenshot are saved under
// <build>/test-output/dashboard/ for inspection.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <thread>

#include "agent/agent_state.h"
#include "agent/http_server.h"
#include "agent/subprocess.h"
#include "agent/testing/synthetic_agent.h"
#include "common/text.h"

namespace gpudoctor {
namespace {

constexpr const char* kChromium = "/usr/bin/chromium";
constexpr size_t kGpus = 8;

class DashboardBrowserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(kChromium, X_OK) != 0)
      GTEST_SKIP() << "Chromium is not installed (apt-get install chromium)";
    // Samples keep arriving while the browser works, as in the agent.
    const WallTime opened_at = SystemClock::Instance().Now() - std::chrono::minutes(42);
    auto publish = [this, opened_at] {
      auto snapshot =
          std::make_shared<const Snapshot>(SyntheticSnapshot(kGpus, SystemClock::Instance().Now()));
      state_.SetOpenFindings(SyntheticIncidents(*snapshot, opened_at));
      state_.PublishSnapshot(std::move(snapshot));
    };
    publish();
    sampler_ = std::thread([this, publish] {
      std::unique_lock lock(sampler_mutex_);
      while (!sampler_stop_.wait_for(lock, std::chrono::milliseconds(500), [this] { return stopping_; }))
        publish();
    });
    server_ = std::make_unique<HttpServer>(HttpServerSources{.view = state_, .history = &history_},
                                           HttpServerOptions{.listen = {"127.0.0.1", 0}, .version = "test"},
                                           SystemClock::Instance());
    Result<int> port = server_->Start();
    ASSERT_TRUE(port.ok()) << port.error().message;
    url_ = fmt::format("http://127.0.0.1:{}/", *port);
    output_ = std::filesystem::path(GPUDOCTOR_BINARY_DIR) / "test-output" / "dashboard";
    std::filesystem::create_directories(output_);
    profile_ = std::filesystem::path(::testing::TempDir()) / fmt::format("chromium-profile-{}", ::getpid());
  }

  void TearDown() override {
    if (sampler_.joinable()) {
      {
        std::lock_guard lock(sampler_mutex_);
        stopping_ = true;
      }
      sampler_stop_.notify_all();
      sampler_.join();
    }
    if (server_) server_->Stop();
    std::error_code ignored;
    std::filesystem::remove_all(profile_, ignored);
  }

  // Runs headless Chromium on the dashboard with `extra` arguments. The
  // virtual time budget lets the page's timers and fetches run to completion
  // before Chromium dumps or shoots the page.
  ProcessOutcome RunChromium(std::vector<std::string> extra) {
    std::vector<std::string> argv = {kChromium,
                                     "--headless",
                                     "--no-sandbox",
                                     "--disable-gpu",
                                     "--disable-quic",
                                     "--no-first-run",
                                     "--disable-background-networking",
                                     "--disable-component-update",
                                     "--disable-sync",
                                     "--disable-dev-shm-usage",
                                     "--hide-scrollbars",
                                     "--user-data-dir=" + profile_.string(),
                                     "--virtual-time-budget=15000",
                                     "--window-size=1440,2400"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(url_);
    Result<ProcessOutcome> run =
        RunProcess({.argv = argv,
                    .env = {"HOME=" + profile_.string(), "PATH=/usr/bin:/bin", "LANG=C.UTF-8"},
                    .timeout = std::chrono::seconds(90),
                    .max_output_bytes = 4 << 20});
    EXPECT_TRUE(run.ok()) << run.error().message;
    if (!run) return {};
    EXPECT_TRUE(run->Succeeded()) << run->Describe(std::chrono::seconds(90)) << "\n"
                                  << run->output.substr(0, 4000);
    return *run;
  }

  AgentState state_{SystemClock::Instance().Now()};
  SyntheticHistory history_{kGpus};
  std::unique_ptr<HttpServer> server_;
  std::string url_;
  std::filesystem::path output_;
  std::filesystem::path profile_;
  std::thread sampler_;
  std::mutex sampler_mutex_;
  std::condition_variable sampler_stop_;
  bool stopping_ = false;
};

// The element that opens at `open_tag_at` up to the start of the next one
// matching `next`, or to the end of the document.
std::string Section(const std::string& dom, size_t open_tag_at, const std::string& next) {
  const size_t end = dom.find(next, open_tag_at + 1);
  return dom.substr(open_tag_at, end == std::string::npos ? std::string::npos : end - open_tag_at);
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

TEST_F(DashboardBrowserTest, ShowsGpusFindingsAndDrawnCharts) {
  const ProcessOutcome run = RunChromium({"--dump-dom"});
  const std::string& dom = run.output;
  std::ofstream(output_ / "dashboard.html") << dom;
  ASSERT_NE(dom.find("<body data-ready=\"true\""), std::string::npos)
      << "the page never finished loading; DOM saved in " << (output_ / "dashboard.html");
  EXPECT_EQ(dom.find("id=\"banner\" class=\"banner\">"), std::string::npos) << "an error banner is showing";
  EXPECT_NE(dom.find("data-state=\"live\""), std::string::npos) << "the sample should be fresh";

  // Every GPU, with the health its findings give it.
  for (size_t gpu = 0; gpu < kGpus; ++gpu) {
    const size_t at = dom.find(fmt::format("data-gpu-index=\"{}\"", gpu));
    ASSERT_NE(at, std::string::npos) << "GPU " << gpu << " is missing";
    const std::string card = Section(dom, at, "data-gpu-index=");
    const char* health = gpu == 5 ? "critical" : (gpu == 2 || gpu == 3) ? "warning" : "ok";
    EXPECT_NE(card.find(fmt::format("data-health=\"{}\"", health)), std::string::npos) << "GPU " << gpu;
    EXPECT_NE(card.find("NVIDIA H100 80GB HBM3"), std::string::npos) << "GPU " << gpu;
    EXPECT_NE(card.find(" °C"), std::string::npos) << "GPU " << gpu << " shows no temperature";
    EXPECT_NE(card.find("n/a"), std::string::npos)
        << "GPU " << gpu << ": fans are not supported and must say so";
  }
  EXPECT_NE(dom.find("id=\"sum-gpus\" class=\"tile-value\">8<"), std::string::npos);

  // The open findings, worst first, each with its cause and its actions.
  const Snapshot snapshot = SyntheticSnapshot(kGpus, SystemClock::Instance().Now());
  size_t previous = 0;
  for (const Finding& finding : SyntheticFindings(snapshot)) {
    const size_t at = dom.find(fmt::format("data-finding-id=\"{}\"", finding.id));
    ASSERT_NE(at, std::string::npos) << finding.id;
    EXPECT_GT(at, previous) << finding.id << " is out of order";
    previous = at;
    const std::string article = Section(dom, at, "data-finding-id=");
    EXPECT_NE(article.find(finding.cause), std::string::npos) << finding.id << ": cause missing";
    for (const std::string& action : finding.actions) {
      EXPECT_NE(article.find("<li>" + action + "</li>"), std::string::npos) << finding.id << ": " << action;
    }
  }
  EXPECT_NE(dom.find("id=\"findings-count\" class=\"count\">3<"), std::string::npos);

  // Four charts, each drawn on a real canvas with a line per GPU.
  for (const char* metric : {"temperature_c", "power_w", "utilization_gpu_percent", "memory_used_bytes"}) {
    const size_t at = dom.find(fmt::format("data-metric=\"{}\"", metric));
    ASSERT_NE(at, std::string::npos) << metric;
    const std::string figure = Section(dom, at, "<figure");
    EXPECT_NE(figure.find("data-drawn=\"true\""), std::string::npos) << metric << " was not drawn";
    EXPECT_NE(figure.find(fmt::format("data-series=\"{}\"", kGpus)), std::string::npos) << metric;
    std::smatch points;
    ASSERT_TRUE(std::regex_search(figure, points, std::regex(R"re(data-points="(\d+)")re"))) << metric;
    EXPECT_GT(std::stoul(points[1]), kGpus * 100) << metric;
    std::smatch canvas;
    ASSERT_TRUE(std::regex_search(figure, canvas, std::regex(R"re(<canvas width="(\d+)" height="(\d+)")re")))
        << metric;
    EXPECT_GT(std::stoul(canvas[1]), 200u) << metric;
    EXPECT_GT(std::stoul(canvas[2]), 100u) << metric;
    EXPECT_EQ(Count(figure, "class=\"u-series\""), kGpus + 1)
        << metric << ": legend is time plus one row per GPU";
  }
}

TEST_F(DashboardBrowserTest, Screenshot) {
  const std::filesystem::path png = output_ / "dashboard.png";
  std::filesystem::remove(png);
  RunChromium({"--screenshot=" + png.string()});
  ASSERT_TRUE(std::filesystem::exists(png)) << "no screenshot written";
  std::ifstream in(png, std::ios::binary);
  std::string header(8, '\0');
  in.read(header.data(), 8);
  EXPECT_EQ(header, std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_GT(std::filesystem::file_size(png), 50'000u) << "the screenshot looks blank";
  RecordProperty("screenshot", png.string());
  std::cout << "screenshot: " << png << "\n";
}

}  // namespace
}  // namespace gpudoctor
