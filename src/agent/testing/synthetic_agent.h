// A plausible, deterministic GPU server for tests, the dashboard's browser
// test and the HTTP benchmark: N busy H100s, one of them idle while its peers
// work, one running hot, one with a pending row remap, and a history of
// smooth curves over any time range.
//
//   Snapshot s = SyntheticSnapshot(8, clock.Now());
//   state.PublishSnapshot(std::make_shared<const Snapshot>(s));
//   state.SetOpenFindings(SyntheticIncidents(s, clock.Now()));
//   SyntheticHistory history(8);  // a HistorySource
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "agent/agent_view.h"

namespace gpudoctor {

inline constexpr const char* kSyntheticHostname = "gpu-node-07";

// The value of `metric` (a history metric name) on GPU `gpu` at `time`;
// NaN for a metric it does not know.
double SyntheticReading(size_t gpu, std::string_view metric, WallTime time);

Snapshot SyntheticSnapshot(size_t gpu_count, WallTime at);

// Findings matching the snapshot, in the dashboard's order (worst first, then
// by id): GPU 5 critical (row remap pending), GPU 2 warning (idle while its
// peers are busy), GPU 3 warning (temperature). Each appears only when the
// snapshot has that GPU.
std::vector<Finding> SyntheticFindings(const Snapshot& snapshot);

// The same findings as open incidents, opened at `opened_at` and last seen
// when the snapshot was taken.
std::vector<StoredFinding> SyntheticIncidents(const Snapshot& snapshot, WallTime opened_at);

class SyntheticHistory final : public HistorySource {
 public:
  // `interval` is the pretend sampling interval: no more than one point per
  // interval is returned.
  explicit SyntheticHistory(size_t gpu_count, Duration interval = std::chrono::seconds(5))
      : gpu_count_(gpu_count), interval_(interval) {}
  std::vector<std::string> MetricNames() const override;
  Result<HistorySeries> Query(const HistoryQuery& query) const override;
  Result<std::vector<DiagnosticRecord>> LatestDiagnostics() const override { return diagnostics; }

  std::vector<DiagnosticRecord> diagnostics;  // none unless a test sets them

 private:
  size_t gpu_count_;
  Duration interval_;
};

}  // namespace gpudoctor
