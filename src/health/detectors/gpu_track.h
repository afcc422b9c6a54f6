// GpuTrack: what the trend detectors remember of one GPU's recent snapshots,
// the input every detector reads. TrendDetectors fills it; tests may build
// one directly.
//
//   GpuTrack track;
//   track.points.push_back({.time = t, .utilization_percent = 100});
//   auto held = HeldFor(track.points, [](const GpuPoint& p) { return p.utilization_percent == 100; }, gap);
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/text.h"
#include "health/finding.h"
#include "model/snapshot.h"

namespace gpudoctor {

// One GPU at one instant; nullopt where the GPU gave no reading.
struct GpuPoint {
  WallTime time;
  std::optional<double> utilization_percent;
  std::optional<double> temperature_c;
  std::optional<double> power_w;
  std::optional<double> power_limit_w;
  // GPM's shares (0-1) of SMs busy and of SM time in the tensor pipes; nullopt: the GPU has no GPM. Floats, as
  // the agent keeps half an hour of points per GPU: 8 bytes each instead of 16.
  std::optional<float> sm_active;
  std::optional<float> tensor_active;
  std::optional<double> fan_percent;  // the fastest fan; nullopt: no fans reported (e.g. liquid cooling)
  std::optional<double> ecc_corrected;
  std::optional<double> ecc_uncorrected;
  std::optional<double> pcie_replays;
  std::optional<double> nvlink_errors;
  std::optional<size_t> process_count;  // compute processes; nullopt: list not available
  bool idle_while_peers_busy = false;   // the straggler condition, judged across GPUs at this instant
};

struct ProcessKey {
  uint32_t pid = 0;
  std::string name;
  auto operator<=>(const ProcessKey&) const = default;
};

struct MemoryPoint {
  WallTime time;
  double used_bytes = 0;
};

struct GpuTrack {
  GpuRef ref;
  std::deque<GpuPoint> points;  // oldest first
  std::map<ProcessKey, std::deque<MemoryPoint>> process_memory;
  std::optional<double> memory_total_bytes;  // latest readings
  std::optional<double> memory_used_bytes;

  // Drops what is older than `keep` before `now`, and processes gone that long.
  void Trim(WallTime now, Duration keep);
};

GpuRef RefOf(const GpuSnapshot& gpu);
GpuPoint PointOf(const GpuSnapshot& gpu, WallTime time);

// How long `holds` has been true without a break, up to the newest point:
// nullopt when it is false there. Gaps longer than `max_gap` break the run.
std::optional<Duration> HeldFor(const std::deque<GpuPoint>& points, const std::function<bool(const GpuPoint&)>& holds,
                                Duration max_gap);

// The points at or after `since`.
std::vector<const GpuPoint*> PointsSince(const std::deque<GpuPoint>& points, WallTime since);

// "GPU 3" or "GPU 3 (GPU-8e1c...)" for summaries.
std::string GpuLabel(const GpuRef& ref);

}  // namespace gpudoctor
