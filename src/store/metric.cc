#include "store/metric.h"

namespace gpudoctor {

static_assert([] {
  for (size_t i = 0; i < kMetrics.size(); ++i)
    if (MetricSlot(kMetrics[i].metric) != i) return false;
  return true;
}(), "kMetrics must list the metrics in enum order");

std::optional<Metric> MetricFromName(std::string_view name) {
  for (const MetricInfo& info : kMetrics)
    if (info.name == name) return info.metric;
  return std::nullopt;
}

}  // namespace gpudoctor
