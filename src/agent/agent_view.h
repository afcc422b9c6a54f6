// What the agent's presenters (HTTP API, /metrics, dashboard) may read.
//
// The sampling loop writes; presenters only read, through these two narrow
// interfaces, so the server can be tested with fakes and can never reach into
// NVML or the store directly. Both interfaces are called from HTTP worker
// threads and must be safe to call concurrently.
//
//   std::shared_ptr<const Snapshot> s = view.LatestSnapshot();  // null before the first sample
//   Result<HistorySeries> t = history.Query({.gpu_index = 0, .metric = "temperature_c",
//                                             .from = a, .to = b, .max_points = 500});
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "health/checklist.h"
#include "health/finding.h"
#include "model/diagnostic.h"
#include "model/snapshot.h"
#include "store/history_store.h"

namespace gpudoctor {

// The Xids seen on one GPU since the agent started.
struct GpuXidTally {
  uint32_t gpu_index = 0;
  uint64_t count = 0;
  uint64_t last_xid = 0;
  WallTime last_seen;
  bool operator==(const GpuXidTally&) const = default;
};

// The history store as the sampling loop last found it. The store is a
// record, not a gate: findings reach the API and the alerts whatever it says.
struct StoreHealth {
  bool ok = true;                // the last write (or retry) succeeded
  uint64_t errors_total = 0;     // failed writes since the agent started
  std::string path;              // the database file
  std::string last_error;        // SQLite's message for the latest failure; empty while ok
  std::optional<WallTime> failing_since;  // when the current run of failures began
  size_t queued = 0;             // writes held in memory, waiting for the store to recover
  uint64_t dropped_total = 0;    // writes lost because that queue was full
  bool operator==(const StoreHealth&) const = default;
};

// Counters about the agent itself.
struct AgentStatus {
  WallTime started_at;
  std::optional<WallTime> last_sample_at;  // taken_at of the latest snapshot
  uint64_t samples_total = 0;
  uint64_t probe_hangs_total = 0;  // probes that missed their deadline
  std::vector<GpuXidTally> xids;   // ordered by gpu_index
  std::optional<StoreHealth> store;  // nullopt: the agent keeps no history
  // Changes whenever anything above or the snapshot, findings or checklist change, so
  // presenters can cache what they render from one state.
  uint64_t generation = 0;
};

class AgentView {
 public:
  virtual ~AgentView() = default;
  virtual std::shared_ptr<const Snapshot> LatestSnapshot() const = 0;
  // The open incidents (StoredFinding::open()), worst severity first, then
  // by id and GPU index.
  virtual std::vector<StoredFinding> OpenFindings() const = 0;
  // The weekly checklist as of the latest sample, over the open findings
  // (BuildOpenChecklist); the items' `findings` are left empty. Empty before
  // the first sample.
  virtual std::vector<ChecklistItem> ChecklistItems() const = 0;
  virtual AgentStatus Status() const = 0;
};

// One range query over the stored history of one GPU metric.
struct HistoryQuery {
  uint32_t gpu_index = 0;
  std::string metric;  // a store metric name, e.g. "temperature_c", "power_w"
  WallTime from;
  WallTime to;
  // A hint: the source may aggregate (1 min / 1 h rollups) to return about
  // this many points; it never needs to return more.
  size_t max_points = 1000;
};

struct HistoryPoint {
  WallTime time;
  double value = 0;
  bool operator==(const HistoryPoint&) const = default;
};

struct HistorySeries {
  std::string metric;
  std::string unit;                  // as the store names it, e.g. "°C", "W", "B"
  std::vector<HistoryPoint> points;  // ascending time; gaps are simply absent
};

class HistorySource {
 public:
  virtual ~HistorySource() = default;
  // The metric names Query accepts; the HTTP layer answers 400 for others.
  virtual std::vector<std::string> MetricNames() const = 0;
  virtual Result<HistorySeries> Query(const HistoryQuery& query) const = 0;
  // The newest `gpudoctor diag` record of each GPU and test (HistoryStore::LatestDiagnostics).
  virtual Result<std::vector<DiagnosticRecord>> LatestDiagnostics() const = 0;
};

}  // namespace gpudoctor
