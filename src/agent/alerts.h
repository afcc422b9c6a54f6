// Alerts: delivers finding transitions (opened, severity changed, resolved)
// to the configured sinks, without ever blocking the sampling loop.
//
// One incident pages once (AlertGrouper): findings that are part of a root
// cause stay quiet. Each finding is rate-limited on its own (AlertRateLimiter): during a storm
// of open/resolve flapping it alerts at most once per interval, and the last
// state is always delivered once the interval has passed, so a receiver never
// stays believing a finding is open when it has resolved. Each sink has its
// own delivery thread and bounded queue, so a slow webhook never delays
// syslog. In dry-run mode nothing is sent; each alert is logged instead.
//
//   AlertDispatcher alerts(std::move(sinks), {.min_interval = 5min, .hostname = host}, clock);
//   Result<std::vector<FindingTransition>> t = store.UpsertFindings(findings, now);
//   alerts.Submit(t ? *t : std::vector<FindingTransition>{}, open_incidents);  // every evaluation
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agent/metrics.h"
#include "common/clock.h"
#include "common/result.h"
#include "store/history_store.h"

namespace gpudoctor {

// One transition ready for delivery.
struct Alert {
  FindingTransition transition;
  std::string hostname;
  uint64_t suppressed = 0;  // transitions of this finding held back since its previous alert
};

// The JSON every sink carries (TransitionToJson), as text.
std::string AlertJson(const Alert& alert);
// One line for logs: "opened critical xid_79 on GPU 3 (0000:3b:00.0): GPU has fallen off the bus".
std::string AlertLine(const Alert& alert);

class AlertSink {
 public:
  virtual ~AlertSink() = default;
  // Short and stable: a metrics label ("webhook", "syslog", "exec").
  virtual std::string_view kind() const = 0;
  // For logs: "webhook http://alerts:8080/gpu".
  virtual std::string Describe() const = 0;
  // Delivers one alert, retrying as the sink sees fit. Called from one thread
  // at a time.
  virtual Status Deliver(const Alert& alert) = 0;
  // Asks a Deliver in progress to give up soon (shutdown). Thread-safe.
  virtual void Interrupt() {}
};

// Per-finding rate limit; pure logic over the times it is given.
class AlertRateLimiter {
 public:
  explicit AlertRateLimiter(Duration min_interval) : min_interval_(min_interval) {}

  // The alert to send now for this transition, or nothing when the finding
  // alerted less than min_interval ago; then the transition is held.
  std::optional<Alert> Offer(const FindingTransition& transition, std::string_view hostname, WallTime now);

  // Held transitions whose interval has passed, when they leave the finding in
  // a different state from the one last sent. Forgets findings that are
  // resolved and quiet.
  std::vector<Alert> Due(std::string_view hostname, WallTime now);

  uint64_t suppressed_total() const { return suppressed_total_; }

  // Continues the per-finding state of `previous` (a configuration reload):
  // the intervals run on and held transitions are still delivered. The
  // suppressed total stays with `previous`.
  void TakeFindingsFrom(AlertRateLimiter& previous);

 private:
  struct Entry {
    WallTime last_sent;
    FindingTransition::Kind last_kind = FindingTransition::Kind::kOpened;
    Severity last_severity = Severity::kOk;
    std::optional<FindingTransition> held;  // the latest held transition
    uint64_t suppressed = 0;
  };
  static bool SameState(const Entry& entry, const FindingTransition& transition);

  Duration min_interval_;
  std::map<std::string, Entry> entries_;  // by finding key
  uint64_t suppressed_total_ = 0;
};

// One page per incident: a finding that is part of a root-cause finding
// (Finding::part_of) is never announced on its own, and a newly opened
// finding waits `group_wait` before it goes out, so that a root cause that
// forms in the next samples can take it in. A finding announced before it
// joined a root is followed to its end, so a receiver never keeps it open;
// one that leaves its root while still open is announced then. Pure logic
// over the times it is given.
class AlertGrouper {
 public:
  explicit AlertGrouper(Duration group_wait) : group_wait_(group_wait) {}

  // The transitions to announce now. `open`: the open incidents after
  // `transitions`, when known; they carry the latest part_of of the findings
  // held back and show a member that left its root.
  std::vector<FindingTransition> Pass(const std::vector<FindingTransition>& transitions,
                                      std::span<const StoredFinding> open, WallTime now);

  // Findings never announced because they were part of another.
  uint64_t grouped_total() const { return grouped_total_; }

  // Continues the state of `previous` (a configuration reload).
  void TakeFindingsFrom(AlertGrouper& previous);

 private:
  struct Held {
    FindingTransition opened;  // with the latest state of its incident
    WallTime since;
  };

  void Hold(const FindingTransition& opened, WallTime now) { held_.insert({opened.incident.key, {opened, now}}); }

  Duration group_wait_;
  std::map<std::string, Held> held_;  // by finding key
  std::set<std::string> announced_;   // keys whose opening went out, until they close
  uint64_t grouped_total_ = 0;
};

struct AlertDispatcherOptions {
  Duration min_interval = std::chrono::minutes(5);  // per finding; 0 disables the limit
  Duration group_wait = Duration::zero();           // how long a new finding waits for a root cause
  bool dry_run = false;
  std::string hostname;
  size_t max_queue = 256;  // per sink; when full the oldest alert is dropped
  // Receives dry-run lines and delivery failures. Default: standard error.
  std::function<void(std::string_view)> log;
};

class AlertDispatcher {
 public:
  AlertDispatcher(std::vector<std::unique_ptr<AlertSink>> sinks, AlertDispatcherOptions options,
                  const Clock& clock);
  ~AlertDispatcher();  // Stop()
  AlertDispatcher(const AlertDispatcher&) = delete;
  AlertDispatcher& operator=(const AlertDispatcher&) = delete;

  // Call after every evaluation, with its transitions (often none: held
  // alerts are released from here too) and the open incidents after them
  // (AlertGrouper::Pass). Never waits for a sink.
  void Submit(const std::vector<FindingTransition>& transitions, std::span<const StoredFinding> open = {});

  // Waits until every queued alert has been delivered or given up on.
  void Flush();

  // Gives queued alerts up to `drain` to go out, then interrupts the sinks
  // and joins their threads. Idempotent.
  void Stop(Duration drain = std::chrono::seconds(5));

  // Takes over the rate limiter's state of the dispatcher this one replaces
  // (AlertRateLimiter::TakeFindingsFrom). Call before this one's first Submit.
  void TakeRateLimitsFrom(AlertDispatcher& previous);

  AlertCounters Counters() const;

 private:
  class SinkWorker;

  void Log(std::string_view line) const;
  void Dispatch(const Alert& alert);

  AlertDispatcherOptions options_;
  const Clock& clock_;
  std::vector<std::unique_ptr<SinkWorker>> workers_;
  mutable std::mutex limiter_mutex_;  // guards grouper_ and limiter_
  AlertGrouper grouper_;
  AlertRateLimiter limiter_;
};

}  // namespace gpudoctor
