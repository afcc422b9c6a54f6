#include "store/maintenance_plan.h"

#include <algorithm>
#include <map>
#include <string>

namespace gpudoctor {
namespace {

int64_t Millis(Duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

Duration MaxStep(Resolution resolution) {
  return resolution == Resolution::kHour ? Duration{std::chrono::hours(96)} : Duration{std::chrono::hours(6)};
}

}  // namespace

int64_t FloorToBucket(int64_t ms, Resolution resolution) {
  const int64_t width = Millis(BucketWidth(resolution));
  if (width == 0) return ms;
  int64_t floored = ms / width * width;
  return floored > ms ? floored - width : floored;  // negative times round down too
}

FindingPlan PlanFindingUpdate(std::span<const StoredFinding> open_incidents, std::span<const Finding> findings) {
  std::map<std::string, const Finding*> present;
  for (const Finding& finding : findings) {
    auto [it, inserted] = present.emplace(FindingKey(finding), &finding);
    if (!inserted && SeverityRank(finding.severity) > SeverityRank(it->second->severity)) it->second = &finding;
  }
  FindingPlan plan;
  for (const StoredFinding& incident : open_incidents) {
    auto it = present.find(incident.key);
    if (it == present.end()) {
      plan.to_resolve.push_back(&incident);
    } else {
      plan.to_refresh.emplace_back(&incident, it->second);
      present.erase(it);
    }
  }
  // Open in input order, so incident ids follow the order findings were given.
  for (const Finding& finding : findings) {
    auto it = present.find(FindingKey(finding));
    if (it != present.end() && it->second == &finding) plan.to_open.push_back(&finding);
  }
  return plan;
}

std::optional<DownsampleStep> NextDownsampleStep(Resolution resolution, std::optional<int64_t> done_until_ms,
                                                 std::optional<int64_t> next_raw_ms, WallTime now) {
  if (!next_raw_ms) return std::nullopt;
  int64_t from = FloorToBucket(*next_raw_ms, resolution);
  if (done_until_ms) from = std::max(from, *done_until_ms);
  const int64_t complete_until = FloorToBucket(ToUnixMillis(now), resolution);
  if (from >= complete_until) return std::nullopt;
  const int64_t until = std::min(complete_until, from + Millis(MaxStep(resolution)));
  return DownsampleStep{from, until, until < complete_until};
}

int64_t RawPruneCutoffMs(const RetentionPolicy& retention, WallTime now, std::optional<int64_t> minute_done_ms,
                         std::optional<int64_t> hour_done_ms) {
  int64_t cutoff = ToUnixMillis(now - retention.raw);
  cutoff = std::min(cutoff, minute_done_ms.value_or(INT64_MIN));
  cutoff = std::min(cutoff, hour_done_ms.value_or(INT64_MIN));
  return cutoff;
}

}  // namespace gpudoctor
