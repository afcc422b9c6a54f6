#include "agent/metrics_cache.h"

#include "common/gzip.h"

namespace gpudoctor {

MetricsCache::MetricsCache(const AgentView& view, std::function<AlertCounters()> alert_counters, MetricsOptions options,
                           const Clock& clock)
    : view_(view), alert_counters_(std::move(alert_counters)), options_(std::move(options)), clock_(clock) {}

// The key covers everything the text is rendered from:
// - the generation: the snapshot, the open findings, the checklist and the agent's counters;
// - the alert counters, which the alert hub moves outside the agent's state;
// - the current second: freshness (now against stale_after) and
//   gpudoctor_sample_age_seconds depend on the time of the scrape. A body
//   rendered at 12:00:00.1 and served at 12:00:00.9 reads 0.8 s young, less
//   than the second a scrape a moment later would move it anyway.
// The status is read before the snapshot and findings, so a change in between
// makes a body newer than its key, never older: the next scrape renders again.
MetricsCache::Body MetricsCache::Get(bool gzip) {
  AgentStatus status = view_.Status();
  const WallTime now = clock_.Now();
  Key key{.generation = status.generation,
          .alerts = alert_counters_ ? std::optional(alert_counters_()) : std::nullopt,
          .unix_second = std::chrono::floor<std::chrono::seconds>(now.time_since_epoch()).count()};

  std::lock_guard lock(mutex_);
  if (key_ != key) {
    std::shared_ptr<const Snapshot> snapshot = view_.LatestSnapshot();
    const MetricsInput input{.snapshot = snapshot.get(),
                             .findings = view_.OpenFindings(),
                             .checklist = view_.ChecklistItems(),
                             .status = std::move(status),
                             .now = now,
                             .alerts = key.alerts ? &*key.alerts : nullptr};
    plain_ = std::make_shared<const std::string>(RenderPrometheusMetrics(input, options_));
    gzip_ = nullptr;
    key_ = std::move(key);
    ++renders_;
  }
  if (!gzip) return {plain_, false};
  if (!gzip_) {
    Result<std::string> packed = Gzip(*plain_);
    if (!packed) return {plain_, false};
    gzip_ = std::make_shared<const std::string>(std::move(*packed));
    ++compressions_;
  }
  return {gzip_, true};
}

uint64_t MetricsCache::renders() const {
  std::lock_guard lock(mutex_);
  return renders_;
}

uint64_t MetricsCache::compressions() const {
  std::lock_guard lock(mutex_);
  return compressions_;
}

}  // namespace gpudoctor
