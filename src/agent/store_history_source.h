// StoreHistorySource: answers the HTTP API's history queries from the
// agent's HistoryStore (SQLite in the agent, in memory in tests).
//
// The store picks raw samples or 1-minute / 1-hour buckets for the range;
// this adapter plots each bucket's average and, when a range still holds more
// points than asked for, averages neighbours down to about max_points.
//
//   StoreHistorySource history([&recorder] { return recorder.store(); });
//   HttpServer server({.view = state, .history = &history}, options, clock);
#pragma once

#include <functional>
#include <memory>

#include "agent/agent_view.h"
#include "store/history_store.h"

namespace gpudoctor {

class StoreHistorySource final : public HistorySource {
 public:
  // `store` gives the store to query, or null while there is none (the agent
  // could not open its history yet). The store must be safe to query from
  // several threads (SqliteHistoryStore serialises its calls).
  using StoreAccess = std::function<std::shared_ptr<const HistoryStore>()>;
  explicit StoreHistorySource(StoreAccess store) : store_(std::move(store)) {}

  std::vector<std::string> MetricNames() const override;  // every store metric
  Result<HistorySeries> Query(const HistoryQuery& query) const override;
  Result<std::vector<DiagnosticRecord>> LatestDiagnostics() const override;

 private:
  StoreAccess store_;
};

// Averages consecutive points so that at most `max_points` remain, each at
// the time of the first point it stands for. Keeps the input when it is short.
std::vector<HistoryPoint> ThinHistory(std::vector<HistoryPoint> points, size_t max_points);

}  // namespace gpudoctor
