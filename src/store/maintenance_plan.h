// The decisions both stores share, kept apart from any storage so the SQLite
// store and its in-memory twin cannot drift: which findings open, stay or
// resolve, and which slice of raw samples Maintain folds into buckets next.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "store/history_store.h"

namespace gpudoctor {

struct FindingPlan {
  std::vector<const Finding*> to_open;                                // keys with no open incident
  std::vector<std::pair<const StoredFinding*, const Finding*>> to_refresh;  // still present
  std::vector<const StoredFinding*> to_resolve;                       // no longer present
};
// Several findings with one key collapse into the most severe of them.
FindingPlan PlanFindingUpdate(std::span<const StoredFinding> open_incidents, std::span<const Finding> findings);

// A half-open slice [from_ms, until_ms) of complete buckets to aggregate.
struct DownsampleStep {
  int64_t from_ms = 0;
  int64_t until_ms = 0;
  bool more_after = false;  // complete buckets remain beyond this step
};
// `done_until_ms`: the end of what is already aggregated (nullopt: nothing yet).
// `next_raw_ms`: the oldest raw sample at or after done_until_ms (nullopt: none).
// Steps are bounded (6 hours of 1-minute buckets, 4 days of 1-hour buckets).
std::optional<DownsampleStep> NextDownsampleStep(Resolution resolution, std::optional<int64_t> done_until_ms,
                                                 std::optional<int64_t> next_raw_ms, WallTime now);

// Raw samples before this time may be deleted: past retention and already
// folded into both aggregate resolutions.
int64_t RawPruneCutoffMs(const RetentionPolicy& retention, WallTime now, std::optional<int64_t> minute_done_ms,
                         std::optional<int64_t> hour_done_ms);

int64_t FloorToBucket(int64_t ms, Resolution resolution);

}  // namespace gpudoctor
