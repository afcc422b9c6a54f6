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

// One GPU at one instant; nullopt where the GPU gave no reading. The agent keeps half an hour of points
// per GPU (14,400 at 8 GPUs and 1 s), so the gauges are floats, 8 bytes each instead of 16: NVML reports
// utilisation, temperature and fan speed as whole numbers, which a float holds exactly, and power in
// milliwatts, which it holds to 0.1 mW below 1 kW. The counters stay doubles, exact up to 2^53.
struct GpuPoint {
  WallTime time;
  std::optional<float> utilization_percent;
  std::optional<float> temperature_c;
  std::optional<float> power_w;
  std::optional<float> power_limit_w;
  // GPM's shares (0-1) of SMs busy and of SM time in the tensor pipes; nullopt: the GPU has no GPM.
  std::optional<float> sm_active;
  std::optional<float> tensor_active;
  std::optional<float> fan_percent;  // the fastest fan; nullopt: no fans reported (e.g. liquid cooling)
  std::optional<double> ecc_corrected;
  std::optional<double> ecc_uncorrected;
  std::optional<double> pcie_replays;
  std::optional<double> nvlink_errors;
  std::optional<uint32_t> process_count;  // compute processes; nullopt: list not available
  bool idle_while_peers_busy = false;     // the straggler condition, judged across GPUs at this instant
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
