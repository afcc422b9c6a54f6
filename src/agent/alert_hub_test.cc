#include "agent/alert_hub.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <thread>

#include "agent/testing/test_start.h"

namespace gpudoctor {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using Kind = FindingTransition::Kind;

using agent_testing::kStart;

FindingTransition TransitionOnGpu3(Kind kind) {
  StoredFinding incident;
  incident.incident_id = 1;
  incident.key = "temperature_high@GPU-3";
  incident.finding = {.id = "temperature_high", .severity = Severity::kWarning, .gpu = GpuRef{.index = 3}};
  incident.opened_at = incident.last_seen = kStart;
  if (kind == Kind::kResolved) incident.resolved_at = kStart;
  return {kind, incident};
}

// What a test sink was given. The test owns it: a dispatcher destroys its
// sinks once it has stopped. With `stubborn`, each delivery waits for
// Release() and ignores Interrupt() (it only notes it): a receiver that hangs.
class Recorder {
 public:
  explicit Recorder(bool stubborn = false) : stubborn_(stubborn) {}

  void Deliver(const Alert& alert) {
    std::unique_lock lock(mutex_);
    delivering_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return !stubborn_ || released_; });
    alerts_.push_back(alert);
  }
  void Interrupt() {
    std::lock_guard lock(mutex_);
    interrupted_ = true;
    changed_.notify_all();
  }
  void WaitUntilDelivering() { WaitUntil(delivering_); }
  void WaitUntilInterrupted() { WaitUntil(interrupted_); }
  void Release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }
  std::vector<Alert> alerts() {
    std::lock_guard lock(mutex_);
    return alerts_;
  }

 private:
  void WaitUntil(const bool& flag) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return flag; });
  }

  const bool stubborn_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool delivering_ = false;
  bool interrupted_ = false;
  bool released_ = false;
  std::vector<Alert> alerts_;
};

class TestSink final : public AlertSink {
 public:
  explicit TestSink(Recorder& recorder) : recorder_(recorder) {}
  std::string_view kind() const override { return "webhook"; }
  std::string Describe() const override { return "test sink"; }
  Status Deliver(const Alert& alert) override {
    recorder_.Deliver(alert);
    return Status::Ok();
  }
  void Interrupt() override { recorder_.Interrupt(); }

 private:
  Recorder& recorder_;
};

std::vector<std::unique_ptr<AlertSink>> Sinks(Recorder& recorder) {
  std::vector<std::unique_ptr<AlertSink>> sinks;
  sinks.push_back(std::make_unique<TestSink>(recorder));
  return sinks;
}

AlertDispatcherOptions Options(Duration min_interval = Duration::zero()) {
  return {.min_interval = min_interval, .hostname = "node-1", .log = [](std::string_view) {}};
}

TEST(AlertHub, CountersAnswerWhileAStuckSinkIsBeingStopped) {
  FakeClock clock(kStart);
  Recorder stuck(/*stubborn=*/true);
  AlertHub hub(clock, /*drain=*/Duration::zero());
  hub.Replace(Sinks(stuck), Options());
  hub.Submit({TransitionOnGpu3(Kind::kOpened)});
  stuck.WaitUntilDelivering();

  std::thread stopper([&] { hub.Stop(); });
  stuck.WaitUntilInterrupted();  // Stop is under way and waits for the delivery
  auto counters = std::async(std::launch::async, [&] { return hub.Counters(); });
  // Generous: the answer needs no sink, only a lock no one holds for long.
  const bool answered = counters.wait_for(seconds(30)) == std::future_status::ready;
  stuck.Release();
  stopper.join();
  ASSERT_TRUE(answered) << "Counters waited for the stuck sink";
  ASSERT_EQ(counters.get().sinks.size(), 1u);

  AlertCounters final_counts = hub.Counters();  // kept after the stop
  ASSERT_EQ(final_counts.sinks.size(), 1u);
  EXPECT_EQ(final_counts.sinks[0].delivered, 1u);
}

TEST(AlertHub, AReplacementKeepsTheCountsAndTheRateLimits) {
  FakeClock clock(kStart);
  Recorder first, second;
  AlertHub hub(clock);
  hub.Replace(Sinks(first), Options(minutes(5)));
  hub.Submit({TransitionOnGpu3(Kind::kOpened)});
  clock.Advance(seconds(30));
  hub.Submit({TransitionOnGpu3(Kind::kResolved)});  // held by the rate limit

  hub.Replace(Sinks(second), Options(minutes(5)));  // a reload: the first drains and stops
  ASSERT_EQ(first.alerts().size(), 1u);
  AlertCounters counters = hub.Counters();
  ASSERT_EQ(counters.sinks.size(), 1u);
  EXPECT_EQ(counters.sinks[0].delivered, 1u);
  EXPECT_EQ(counters.suppressed, 1u);

  hub.Submit({});  // still inside the interval: the held resolution waits
  clock.Advance(minutes(5));
  hub.Submit({});  // and then goes out, through the new sink
  hub.Stop();
  ASSERT_EQ(second.alerts().size(), 1u);
  EXPECT_EQ(second.alerts()[0].transition.kind, Kind::kResolved);
  EXPECT_EQ(second.alerts()[0].suppressed, 1u);
  counters = hub.Counters();
  ASSERT_EQ(counters.sinks.size(), 1u);
  EXPECT_EQ(counters.sinks[0].name, "webhook");
  EXPECT_EQ(counters.sinks[0].delivered, 2u);  // both dispatchers' deliveries
  EXPECT_EQ(counters.suppressed, 1u);

  hub.Submit({TransitionOnGpu3(Kind::kOpened)});  // after Stop: dropped, no crash
}

}  // namespace
}  // namespace gpudoctor
