#include "agent/alerts.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <nlohmann/json.hpp>
#include <thread>

namespace gpudoctor {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

const WallTime kStart = FromUnixMillis(1'714'564'800'000);

using Kind = FindingTransition::Kind;

FindingTransition Transition(Kind kind, std::string id = "temperature_high",
                             Severity severity = Severity::kWarning, WallTime at = kStart) {
  StoredFinding incident;
  incident.incident_id = 7;
  incident.key = id + "@GPU-3";
  incident.finding = {.id = id,
                      .severity = severity,
                      .gpu = GpuRef{.index = 3, .uuid = "GPU-3", .pci_bus_id = "0000:3b:00.0"},
                      .summary = "GPU 3 runs at 88 °C",
                      .evidence = {"temperature_c = 88"},
                      .cause = "airflow",
                      .actions = {"check the fans"}};
  incident.opened_at = kStart;
  incident.last_seen = at;
  if (kind == Kind::kResolved) incident.resolved_at = at;
  return {kind, incident};
}

TEST(AlertText, JsonAndLine) {
  Alert alert{Transition(Kind::kOpened), "node-1", 2};
  nlohmann::json json = nlohmann::json::parse(AlertJson(alert));
  EXPECT_EQ(json["event"], "opened");
  EXPECT_EQ(json["hostname"], "node-1");
  EXPECT_EQ(json["suppressed"], 2);
  EXPECT_EQ(json["finding"]["key"], "temperature_high@GPU-3");
  EXPECT_TRUE(json["finding"]["subject"].is_null());
  EXPECT_EQ(json["finding"]["incident_id"], 7);
  EXPECT_EQ(json["finding"]["id"], "temperature_high");
  EXPECT_EQ(json["finding"]["gpu"]["pci_bus_id"], "0000:3b:00.0");
  EXPECT_EQ(json["finding"]["actions"][0], "check the fans");
  EXPECT_EQ(json["time_ms"], ToUnixMillis(kStart));
  EXPECT_EQ(AlertLine(alert),
            "opened warning temperature_high on GPU 3 (0000:3b:00.0): GPU 3 runs at 88 °C "
            "[2 earlier changes suppressed]");
}

TEST(AlertRateLimiter, FirstAlertGoesOutAtOnce) {
  AlertRateLimiter limiter(minutes(5));
  std::optional<Alert> alert = limiter.Offer(Transition(Kind::kOpened), "h", kStart);
  ASSERT_TRUE(alert.has_value());
  EXPECT_EQ(alert->suppressed, 0u);
  EXPECT_EQ(alert->hostname, "h");
}

TEST(AlertRateLimiter, FlappingIsHeldAndTheLastStateAlwaysArrives) {
  AlertRateLimiter limiter(minutes(5));
  ASSERT_TRUE(limiter.Offer(Transition(Kind::kOpened), "h", kStart));
  // A storm: resolve / open / resolve within the interval.
  EXPECT_FALSE(limiter.Offer(Transition(Kind::kResolved), "h", kStart + seconds(10)));
  EXPECT_FALSE(limiter.Offer(Transition(Kind::kOpened), "h", kStart + seconds(20)));
  EXPECT_FALSE(limiter.Offer(Transition(Kind::kResolved), "h", kStart + seconds(30)));
  EXPECT_EQ(limiter.suppressed_total(), 3u);
  EXPECT_TRUE(limiter.Due("h", kStart + minutes(4)).empty());

  std::vector<Alert> due = limiter.Due("h", kStart + minutes(5));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].transition.kind, Kind::kResolved);
  EXPECT_EQ(due[0].suppressed, 3u);
  EXPECT_TRUE(limiter.Due("h", kStart + minutes(6)).empty());
}

TEST(AlertRateLimiter, HeldChangesBackToTheSentStateAreNotNews) {
  AlertRateLimiter limiter(minutes(5));
  ASSERT_TRUE(limiter.Offer(Transition(Kind::kOpened), "h", kStart));
  EXPECT_FALSE(limiter.Offer(Transition(Kind::kResolved), "h", kStart + seconds(10)));
  EXPECT_FALSE(limiter.Offer(Transition(Kind::kOpened), "h", kStart + seconds(20)));
  EXPECT_TRUE(limiter.Due("h", kStart + minutes(10)).empty());  // still open, as last said
}

TEST(AlertRateLimiter, SeverityChangesAreDelivered) {
  AlertRateLimiter limiter(minutes(5));
  ASSERT_TRUE(limiter.Offer(Transition(Kind::kOpened), "h", kStart));
  EXPECT_FALSE(limiter.Offer(Transition(Kind::kSeverityChanged, "temperature_high", Severity::kCritical), "h",
                             kStart + seconds(30)));
  std::vector<Alert> due = limiter.Due("h", kStart + minutes(5));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].transition.incident.finding.severity, Severity::kCritical);
}

TEST(AlertRateLimiter, FindingsAreLimitedSeparately) {
  AlertRateLimiter limiter(minutes(5));
  EXPECT_TRUE(limiter.Offer(Transition(Kind::kOpened, "a"), "h", kStart));
  EXPECT_TRUE(limiter.Offer(Transition(Kind::kOpened, "b"), "h", kStart));
  EXPECT_FALSE(limiter.Offer(Transition(Kind::kResolved, "a"), "h", kStart + seconds(1)));
}

TEST(AlertRateLimiter, AfterTheIntervalAlertsFlowAgain) {
  AlertRateLimiter limiter(minutes(5));
  ASSERT_TRUE(limiter.Offer(Transition(Kind::kOpened), "h", kStart));
  std::optional<Alert> resolved = limiter.Offer(Transition(Kind::kResolved), "h", kStart + minutes(6));
  ASSERT_TRUE(resolved);
  EXPECT_EQ(resolved->suppressed, 0u);
  // Resolved and quiet: forgotten, so a later opening goes straight out.
  EXPECT_TRUE(limiter.Due("h", kStart + minutes(12)).empty());
  EXPECT_TRUE(limiter.Offer(Transition(Kind::kOpened), "h", kStart + minutes(12)));
}

TEST(AlertRateLimiter, ZeroIntervalLimitsNothing) {
  AlertRateLimiter limiter(Duration::zero());
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(limiter.Offer(Transition(i % 2 ? Kind::kResolved : Kind::kOpened), "h", kStart));
  }
}

// Records what it is given; can be made to block or fail.
class RecordingSink final : public AlertSink {
 public:
  explicit RecordingSink(std::string kind = "recording") : kind_(std::move(kind)) {}
  std::string_view kind() const override { return kind_; }
  std::string Describe() const override { return "recording sink"; }
  Status Deliver(const Alert& alert) override {
    std::unique_lock lock(mutex_);
    entered_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return !blocked_ || interrupted_; });
    alerts_.push_back(alert);
    if (fail_) return Error{"receiver down"};
    return Status::Ok();
  }
  void Interrupt() override {
    std::lock_guard lock(mutex_);
    interrupted_ = true;
    changed_.notify_all();
  }
  void Block() {
    std::lock_guard lock(mutex_);
    blocked_ = true;
  }
  void Unblock() {
    std::lock_guard lock(mutex_);
    blocked_ = false;
    changed_.notify_all();
  }
  void WaitUntilEntered() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return entered_; });
  }
  void Fail() { fail_ = true; }
  std::vector<Alert> alerts() {
    std::lock_guard lock(mutex_);
    return alerts_;
  }

 private:
  const std::string kind_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool blocked_ = false;
  bool entered_ = false;
  bool interrupted_ = false;
  std::atomic<bool> fail_{false};
  std::vector<Alert> alerts_;
};

struct Dispatch {
  FakeClock clock{kStart};
  std::vector<std::string> log;
  std::mutex log_mutex;
  RecordingSink* first = nullptr;
  RecordingSink* second = nullptr;
  std::unique_ptr<AlertDispatcher> dispatcher;

  explicit Dispatch(AlertDispatcherOptions options = {}) {
    auto a = std::make_unique<RecordingSink>("webhook");
    auto b = std::make_unique<RecordingSink>("webhook");
    first = a.get();
    second = b.get();
    std::vector<std::unique_ptr<AlertSink>> sinks;
    sinks.push_back(std::move(a));
    sinks.push_back(std::move(b));
    options.hostname = "node-1";
    options.log = [this](std::string_view line) {
      std::lock_guard lock(log_mutex);
      log.emplace_back(line);
    };
    dispatcher = std::make_unique<AlertDispatcher>(std::move(sinks), options, clock);
  }
};

TEST(AlertDispatcher, DeliversToEverySink) {
  Dispatch d;
  d.dispatcher->Submit({Transition(Kind::kOpened, "a"), Transition(Kind::kOpened, "b")});
  d.dispatcher->Flush();
  ASSERT_EQ(d.first->alerts().size(), 2u);
  ASSERT_EQ(d.second->alerts().size(), 2u);
  EXPECT_EQ(d.first->alerts()[0].hostname, "node-1");
  AlertCounters counters = d.dispatcher->Counters();
  ASSERT_EQ(counters.sinks.size(), 2u);
  EXPECT_EQ(counters.sinks[0].name, "webhook");
  EXPECT_EQ(counters.sinks[1].name, "webhook-2");  // labels stay unique
  EXPECT_EQ(counters.sinks[0].delivered, 2u);
}

TEST(AlertDispatcher, RateLimitsWithTheInjectedClock) {
  Dispatch d({.min_interval = minutes(5)});
  d.dispatcher->Submit({Transition(Kind::kOpened)});
  d.clock.Advance(seconds(30));
  d.dispatcher->Submit({Transition(Kind::kResolved)});
  d.dispatcher->Flush();
  EXPECT_EQ(d.first->alerts().size(), 1u);
  EXPECT_EQ(d.dispatcher->Counters().suppressed, 1u);

  d.clock.Advance(minutes(5));
  d.dispatcher->Submit({});  // releases what was held
  d.dispatcher->Flush();
  ASSERT_EQ(d.first->alerts().size(), 2u);
  EXPECT_EQ(d.first->alerts()[1].transition.kind, Kind::kResolved);
  EXPECT_EQ(d.first->alerts()[1].suppressed, 1u);
}

TEST(AlertDispatcher, DryRunLogsInsteadOfSending) {
  Dispatch d({.dry_run = true});
  d.dispatcher->Submit({Transition(Kind::kOpened)});
  d.dispatcher->Flush();
  EXPECT_TRUE(d.first->alerts().empty());
  ASSERT_EQ(d.log.size(), 2u);  // one per sink
  EXPECT_NE(d.log[0].find("dry-run: would send to recording sink"), std::string::npos);
  EXPECT_NE(d.log[0].find("\"event\":\"opened\""), std::string::npos);
  EXPECT_EQ(d.dispatcher->Counters().sinks[0].delivered, 0u);
}

TEST(AlertDispatcher, FailuresAreCountedAndLogged) {
  Dispatch d;
  d.first->Fail();
  d.dispatcher->Submit({Transition(Kind::kOpened)});
  d.dispatcher->Flush();
  AlertCounters counters = d.dispatcher->Counters();
  EXPECT_EQ(counters.sinks[0].failed, 1u);
  EXPECT_EQ(counters.sinks[1].delivered, 1u);
  ASSERT_EQ(d.log.size(), 1u);
  EXPECT_NE(d.log[0].find("receiver down"), std::string::npos);
}

// Polls `done` for up to five seconds.
template <typename Predicate>
bool Eventually(Predicate done) {
  const auto deadline = std::chrono::steady_clock::now() + seconds(5);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(AlertDispatcher, ASlowSinkBlocksNeitherSubmitNorOtherSinks) {
  Dispatch d({.max_queue = 2});
  d.first->Block();
  d.dispatcher->Submit({Transition(Kind::kOpened, "a")});
  d.first->WaitUntilEntered();
  const auto started = std::chrono::steady_clock::now();
  size_t expected = 1;
  for (const char* id : {"b", "c", "d"}) {
    d.dispatcher->Submit({Transition(Kind::kOpened, id)});
    // The other sink keeps delivering while the first is stuck.
    ASSERT_TRUE(Eventually([&] { return d.second->alerts().size() == expected + 1; })) << id;
    ++expected;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(2));
  EXPECT_EQ(d.dispatcher->Counters().dropped, 1u);  // "b": the stuck sink's queue holds 2

  d.first->Unblock();
  d.dispatcher->Flush();
  std::vector<Alert> got = d.first->alerts();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1].transition.incident.finding.id, "c");
  EXPECT_EQ(got[2].transition.incident.finding.id, "d");
}

TEST(AlertDispatcher, StopInterruptsAStuckSink) {
  Dispatch d;
  d.first->Block();
  d.dispatcher->Submit({Transition(Kind::kOpened)});
  d.first->WaitUntilEntered();
  const auto started = std::chrono::steady_clock::now();
  d.dispatcher->Stop(std::chrono::milliseconds(50));
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(2));
  d.dispatcher->Submit({Transition(Kind::kOpened, "after")});  // ignored, no crash
}

}  // namespace
}  // namespace gpudoctor
