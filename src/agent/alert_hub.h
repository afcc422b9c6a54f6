// AlertHub: the agent's current AlertDispatcher, replaced when the
// configuration is reloaded while the HTTP server reads its counters.
//
// A replaced or stopped dispatcher drains and stops outside the hub's lock,
// so Counters (and with it /metrics) never waits for a slow sink. The new
// dispatcher continues the old one's rate limits, and the counts of retired
// dispatchers stay in Counters, so the exported totals never go backwards.
//
//   AlertHub alerts(SystemClock::Instance());
//   Status configured = alerts.Configure(config, /*force_dry_run=*/false, hostname);
//   alerts.Submit(transitions, open_incidents);   // the sampling loop
//   AlertCounters counters = alerts.Counters();   // any thread
//   alerts.Stop();                                // shutdown
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/alert_config.h"
#include "agent/alerts.h"
#include "agent/metrics.h"
#include "common/clock.h"
#include "common/result.h"

namespace gpudoctor {

class AlertHub {
 public:
  // `drain`: how long the queued alerts of a replaced or stopped dispatcher
  // get to go out before its sinks are interrupted.
  explicit AlertHub(const Clock& clock, Duration drain = std::chrono::seconds(5));
  ~AlertHub();  // Stop()
  AlertHub(const AlertHub&) = delete;
  AlertHub& operator=(const AlertHub&) = delete;

  // Makes the sinks of `config` current, in dry-run mode when the config or
  // `force_dry_run` asks for it. On error nothing changes.
  Status Configure(const AlertConfig& config, bool force_dry_run, const std::string& hostname);
  // Makes `sinks` current and stops the previous dispatcher, which may take
  // up to `drain` (longer when a sink ignores its interruption).
  void Replace(std::vector<std::unique_ptr<AlertSink>> sinks, AlertDispatcherOptions options);

  // Configure, Replace, Submit and Stop are called from one thread, the
  // sampling loop's; Counters from any.
  void Submit(const std::vector<FindingTransition>& transitions, std::span<const StoredFinding> open = {});
  AlertCounters Counters() const;
  // Drains and stops the current dispatcher; later Submits are dropped. Idempotent.
  void Stop();

 private:
  void Retire(std::shared_ptr<AlertDispatcher> dispatcher);

  const Clock& clock_;
  const Duration drain_;
  mutable std::mutex mutex_;
  std::shared_ptr<AlertDispatcher> current_;
  std::vector<std::shared_ptr<AlertDispatcher>> stopping_;  // replaced, still counted until stopped
  AlertCounters retired_;  // final counts of the dispatchers that have stopped
};

}  // namespace gpudoctor
