// FleetHistory: which card sat in which slot, and the errors seen there, over
// a time range, read from Prometheus with range queries over the agents'
// series (gpudoctor_gpu_info for the placements; the Xid, ECC, row-remap and
// PCIe-replay counters and gpudoctor_gpu_accessible for the errors).
//
//   Result<FleetHistory> history = ReadFleetHistory(api, {.job = "gpudoctor", .start = now - 30d, .end = now});
//   std::vector<Verdict> verdicts = AttributeErrors(history->placements, history->episodes, now);
#pragma once

#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "fleet/attribution.h"
#include "fleet/prometheus_api.h"

namespace gpudoctor {

struct FleetHistoryOptions {
  std::string job = "gpudoctor";
  WallTime start;
  WallTime end;
  Duration step{};  // 0: the range over 720 points, at least 15 s
  // PCIe replays in one step that count as an error episode: a few replays are
  // the link doing its job, a burst is a failing link.
  double replay_burst = 100;
};

struct FleetHistory {
  WallTime start;
  WallTime end;
  Duration step{};
  std::vector<Placement> placements;
  std::vector<ErrorEpisode> episodes;
};

Result<FleetHistory> ReadFleetHistory(PrometheusApi& api, const FleetHistoryOptions& options);

// The step ReadFleetHistory uses for a range when none is given.
Duration DefaultHistoryStep(Duration range);

}  // namespace gpudoctor
