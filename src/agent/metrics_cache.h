// MetricsCache: the /metrics exposition rendered once per agent state, not
// once per scrape, and gzip-compressed at most once per rendering.
//
// Many scrapers (Prometheus pairs, a dashboard, a benchmark) read the same
// state; the cache hands each the same bytes, shared, until the state moves
// on. A body is reused only while the agent's generation, the alert counters
// and the current second are all unchanged, so it is never further from the
// truth than a scrape one second later would be (details in Get).
//
//   MetricsCache cache(view, alert_counters, {.dcgm_compatible = true}, clock);
//   MetricsCache::Body body = cache.Get(/*gzip=*/true);
//   response.SetSharedBody(body.bytes, ...);  // body.gzip says whether it is compressed
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agent/agent_view.h"
#include "agent/metrics.h"
#include "common/clock.h"

namespace gpudoctor {

class MetricsCache {
 public:
  struct Body {
    std::shared_ptr<const std::string> bytes;
    bool gzip = false;  // false also when compression failed and the plain text is sent
  };

  // `alert_counters` may be empty (no alert metrics). `view` must outlive the cache.
  MetricsCache(const AgentView& view, std::function<AlertCounters()> alert_counters, MetricsOptions options,
               const Clock& clock);

  // The exposition for the current state; compressed when `gzip`. Safe to
  // call from several threads.
  Body Get(bool gzip);

  // How many times the text was rendered and compressed, for tests.
  uint64_t renders() const;
  uint64_t compressions() const;

 private:
  // What a rendered body depends on besides the options, which are fixed.
  struct Key {
    uint64_t generation = 0;
    std::optional<AlertCounters> alerts;
    int64_t unix_second = 0;
    bool operator==(const Key&) const = default;
  };

  const AgentView& view_;
  const std::function<AlertCounters()> alert_counters_;
  const MetricsOptions options_;
  const Clock& clock_;

  mutable std::mutex mutex_;  // held while rendering, so concurrent misses render once
  std::optional<Key> key_;
  std::shared_ptr<const std::string> plain_;
  std::shared_ptr<const std::string> gzip_;  // null until a client asks for it
  uint64_t renders_ = 0;
  uint64_t compressions_ = 0;
};

}  // namespace gpudoctor
