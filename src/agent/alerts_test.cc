#include "agent/alerts.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/testing/test_start.h"

namespace gpudoctor {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

using agent_testing::kStart;

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

// ---- AlertGrouper: one page per incident -------------------------------------------

FindingTransition OnGpu(Kind kind, std::string id, uint32_t gpu, std::string part_of = "",
                        Severity severity = Severity::kCritical) {
  FindingTransition t = Transition(kind, id, severity);
  t.incident.finding.gpu->index = gpu;
  t.incident.finding.gpu->uuid = "GPU-" + std::to_string(gpu);
  t.incident.finding.part_of = std::move(part_of);
  t.incident.key = FindingKey(t.incident.finding);
  return t;
}

FindingTransition Root(Kind kind, std::string id) {
  FindingTransition t = Transition(kind, id, Severity::kCritical);
  t.incident.finding.gpu.reset();
  t.incident.key = FindingKey(t.incident.finding);
  return t;
}

std::vector<std::string> Keys(const std::vector<FindingTransition>& transitions) {
  std::vector<std::string> keys;
  for (const FindingTransition& t : transitions) keys.push_back(std::string(TransitionName(t.kind)) + " " + t.incident.key);
  return keys;
}

std::vector<StoredFinding> Open(std::initializer_list<FindingTransition> transitions) {
  std::vector<StoredFinding> open;
  for (const FindingTransition& t : transitions) open.push_back(t.incident);
  return open;
}

TEST(AlertGrouper, ARoomCoolingFailurePagesOnceForItsRoot) {
  AlertGrouper grouper(seconds(0));
  std::vector<FindingTransition> opened{Root(Kind::kOpened, "facility_cooling")};
  for (uint32_t gpu = 0; gpu < 8; ++gpu) {
    opened.push_back(OnGpu(Kind::kOpened, "temperature_high", gpu, "facility_cooling"));
    opened.push_back(OnGpu(Kind::kOpened, "clock_throttle", gpu, "facility_cooling"));
  }
  EXPECT_EQ(Keys(grouper.Pass(opened, {}, kStart)), std::vector<std::string>{"opened facility_cooling"});
  EXPECT_EQ(grouper.grouped_total(), 16u);
}

TEST(AlertGrouper, ANewFindingWaitsAndIsNeverSentWhenARootTakesItIn) {
  AlertGrouper grouper(seconds(15));
  const FindingTransition alone = OnGpu(Kind::kOpened, "xid_recent", 0);
  EXPECT_TRUE(grouper.Pass({alone}, Open({alone}), kStart).empty());  // waits

  // The next sample forms a burst: the first Xid is now part of it.
  const FindingTransition root = Root(Kind::kOpened, "xid_burst");
  FindingTransition joined = alone;
  joined.incident.finding.part_of = "xid_burst";
  const FindingTransition more = OnGpu(Kind::kOpened, "xid_recent", 1, "xid_burst");
  EXPECT_TRUE(grouper.Pass({root, more}, Open({joined, root, more}), kStart + seconds(5)).empty());
  EXPECT_EQ(Keys(grouper.Pass({}, Open({joined, root, more}), kStart + seconds(20))),
            std::vector<std::string>{"opened xid_burst"});
  EXPECT_EQ(grouper.grouped_total(), 2u);
}

TEST(AlertGrouper, AStandaloneFindingGoesOutOnceItsWaitIsOver) {
  AlertGrouper grouper(seconds(15));
  const FindingTransition alone = OnGpu(Kind::kOpened, "ecc_uncorrectable", 2);
  EXPECT_TRUE(grouper.Pass({alone}, Open({alone}), kStart).empty());
  EXPECT_TRUE(grouper.Pass({}, Open({alone}), kStart + seconds(10)).empty());
  EXPECT_EQ(Keys(grouper.Pass({}, Open({alone}), kStart + seconds(15))),
            std::vector<std::string>{"opened ecc_uncorrectable@GPU-2"});
  // Its end is news.
  EXPECT_EQ(Keys(grouper.Pass({OnGpu(Kind::kResolved, "ecc_uncorrectable", 2)}, {}, kStart + seconds(60))),
            std::vector<std::string>{"resolved ecc_uncorrectable@GPU-2"});
}

TEST(AlertGrouper, AFindingThatResolvesWhileItWaitsIsNeverSent) {
  AlertGrouper grouper(seconds(15));
  grouper.Pass({OnGpu(Kind::kOpened, "temperature_high", 1)}, {}, kStart);
  EXPECT_TRUE(grouper.Pass({OnGpu(Kind::kResolved, "temperature_high", 1)}, {}, kStart + seconds(5)).empty());
  EXPECT_TRUE(grouper.Pass({}, {}, kStart + seconds(30)).empty());
}

TEST(AlertGrouper, AFindingSentBeforeItJoinedARootIsFollowedToItsEnd) {
  AlertGrouper grouper(seconds(0));
  const FindingTransition hot = OnGpu(Kind::kOpened, "temperature_high", 0);
  ASSERT_EQ(grouper.Pass({hot}, Open({hot}), kStart).size(), 1u);
  // Later most GPUs are hot: GPU 0 joins the facility finding.
  FindingTransition joined = hot;
  joined.incident.finding.part_of = "facility_cooling";
  const FindingTransition root = Root(Kind::kOpened, "facility_cooling");
  EXPECT_EQ(Keys(grouper.Pass({root}, Open({joined, root}), kStart + minutes(5))),
            std::vector<std::string>{"opened facility_cooling"});
  FindingTransition resolved = OnGpu(Kind::kResolved, "temperature_high", 0, "facility_cooling");
  EXPECT_EQ(Keys(grouper.Pass({resolved}, Open({root}), kStart + minutes(30))),
            std::vector<std::string>{"resolved temperature_high@GPU-0"});
}

TEST(AlertGrouper, AMemberLeftOnItsOwnWhenItsRootEndsIsAnnounced) {
  AlertGrouper grouper(seconds(0));
  const FindingTransition root = Root(Kind::kOpened, "facility_cooling");
  const FindingTransition member = OnGpu(Kind::kOpened, "temperature_high", 4, "facility_cooling");
  grouper.Pass({root, member}, Open({root, member}), kStart);
  // The room is fixed, but GPU 4 stays hot: its own problem now.
  FindingTransition alone = member;
  alone.incident.finding.part_of.clear();
  EXPECT_EQ(Keys(grouper.Pass({Root(Kind::kResolved, "facility_cooling")}, Open({alone}), kStart + minutes(10))),
            (std::vector<std::string>{"resolved facility_cooling", "opened temperature_high@GPU-4"}));
}

TEST(AlertDispatcher, GroupsWithTheConfiguredWait) {
  Dispatch d({.min_interval = seconds(0), .group_wait = seconds(15)});
  const FindingTransition alone = OnGpu(Kind::kOpened, "xid_recent", 0);
  const std::vector<StoredFinding> open = Open({alone});
  d.dispatcher->Submit({alone}, open);
  d.dispatcher->Flush();
  EXPECT_TRUE(d.first->alerts().empty());
  d.clock.Advance(seconds(15));
  d.dispatcher->Submit({}, open);
  d.dispatcher->Flush();
  ASSERT_EQ(d.first->alerts().size(), 1u);
  EXPECT_EQ(d.first->alerts()[0].transition.incident.key, alone.incident.key);
  EXPECT_EQ(d.dispatcher->Counters().grouped, 0u);
}

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
  EXPECT_NE(counters.sinks[0].last_error.find("receiver down"), std::string::npos) << counters.sinks[0].last_error;
  EXPECT_EQ(counters.sinks[1].last_error, "");
}

// A sink that holds an alert shows it: since when, and what waits behind it.
TEST(AlertDispatcher, ADeliveryUnderWayIsVisibleInTheCounters) {
  Dispatch d;
  d.first->Block();
  d.dispatcher->Submit({Transition(Kind::kOpened, "a")});
  d.first->WaitUntilEntered();
  d.dispatcher->Submit({Transition(Kind::kOpened, "b")});
  AlertCounters counters = d.dispatcher->Counters();
  ASSERT_TRUE(counters.sinks[0].delivering_since.has_value());
  EXPECT_EQ(*counters.sinks[0].delivering_since, kStart);
  EXPECT_EQ(counters.sinks[0].queued, 1u);
  d.first->Unblock();
  d.dispatcher->Flush();
  counters = d.dispatcher->Counters();
  EXPECT_FALSE(counters.sinks[0].delivering_since.has_value());
  EXPECT_EQ(counters.sinks[0].queued, 0u);
  EXPECT_EQ(counters.sinks[0].delivered, 2u);
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
