#include "agent/store_history_source.h"

#include <fmt/format.h>

#include <algorithm>

#include "store/metric.h"

namespace gpudoctor {

std::vector<std::string> StoreHistorySource::MetricNames() const {
  std::vector<std::string> names;
  for (const MetricInfo& info : kMetrics) names.emplace_back(info.name);
  return names;
}

namespace {

constexpr const char* kStoreNotOpen = "the history database is not open (see the history_store_failing finding)";

}  // namespace

Result<std::vector<DiagnosticRecord>> StoreHistorySource::LatestDiagnostics() const {
  std::shared_ptr<const HistoryStore> store = store_();
  if (!store) return Error{kStoreNotOpen};
  return store->LatestDiagnostics();
}

Result<HistorySeries> StoreHistorySource::Query(const HistoryQuery& query) const {
  std::optional<Metric> metric = MetricFromName(query.metric);
  if (!metric) return Error{fmt::format("unknown metric '{}'", query.metric)};
  std::shared_ptr<const HistoryStore> store = store_();
  if (!store) return Error{kStoreNotOpen};
  // The API's `to` is inclusive; the store's `until` is not.
  Result<Series> series = store->QuerySeries({.gpu = std::to_string(query.gpu_index),
                                              .metric = *metric,
                                              .from = query.from,
                                              .until = query.to + std::chrono::milliseconds(1)});
  HistorySeries out;
  out.metric = query.metric;
  out.unit = std::string(kMetrics[MetricSlot(*metric)].unit);
  if (!series) {
    // A GPU the store has never seen has no history, which is not an error.
    Result<std::vector<GpuIdentity>> gpus = store->ListGpus();
    if (gpus && std::none_of(gpus->begin(), gpus->end(),
                             [&](const GpuIdentity& g) { return g.index == query.gpu_index; })) {
      return out;
    }
    return series.error();
  }
  out.points.reserve(series->points.size());
  for (const SeriesPoint& p : series->points) out.points.push_back({p.time, p.avg});
  out.points = ThinHistory(std::move(out.points), query.max_points);
  return out;
}

std::vector<HistoryPoint> ThinHistory(std::vector<HistoryPoint> points, size_t max_points) {
  if (max_points == 0 || points.size() <= max_points) return points;
  const size_t group = (points.size() + max_points - 1) / max_points;
  std::vector<HistoryPoint> thinned;
  thinned.reserve(max_points);
  for (size_t start = 0; start < points.size(); start += group) {
    const size_t end = std::min(points.size(), start + group);
    double sum = 0;
    for (size_t i = start; i < end; ++i) sum += points[i].value;
    thinned.push_back({points[start].time, sum / static_cast<double>(end - start)});
  }
  return thinned;
}

}  // namespace gpudoctor
