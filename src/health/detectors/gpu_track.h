// GpuTrack: what the trend detectors remember of one GPU's recent snapshots,
// the input every detector reads. TrendDetectors fills it; tests may build
// one directly.
//
//   GpuTrack track;
//   track.points.push_back({.time = t, .utilization_percent = 100});
//   auto held = HeldFor(track.points, [](const GpuPoint& p) { return p.utilization_percent() == 100; }, gap);
#pragma once

#include <array>
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

// The GPU's error counters, exact up to 2^53; nullopt where the GPU gave no reading.
struct ErrorCounters {
  std::optional<double> ecc_corrected;
  std::optional<double> ecc_uncorrected;
  std::optional<double> pcie_replays;
  std::optional<double> nvlink_errors;
  bool operator==(const ErrorCounters&) const = default;
};

// One GPU at one instant as the snapshot gave it: what a track is fed. nullopt where the GPU gave no reading.
// NVML reports utilisation, temperature and fan speed as whole numbers, which a float holds exactly, and power
// in milliwatts, which it holds to 0.1 mW below 1 kW.
struct GpuReadings {
  WallTime time;
  std::optional<float> utilization_percent;
  std::optional<float> temperature_c;
  std::optional<float> power_w;
  std::optional<float> power_limit_w;
  // GPM's shares (0-1) of SMs busy and of SM time in the tensor pipes; nullopt: the GPU has no GPM.
  std::optional<float> sm_active;
  std::optional<float> tensor_active;
  std::optional<float> fan_percent;  // the fastest fan; nullopt: no fans reported (e.g. liquid cooling)
  ErrorCounters counters;
  std::optional<uint32_t> process_count;  // compute processes; nullopt: list not available
  bool idle_while_peers_busy = false;     // the straggler condition, judged across GPUs at this instant
};

// One point of a track: the readings without the error counters (PointHistory keeps those where they
// change), in 40 bytes instead of 144. The agent keeps half an hour of points per GPU (15,360 at 8 GPUs and
// 1 s), so the gauges are plain floats with a bit each for their presence instead of std::optional, and the
// process count has 16 bits: it saturates at 65,535, which no GPU reaches (the probe reads NVML's list up to
// 65,536 entries), so it still tells none from some.
class GpuPoint {
 public:
  GpuPoint() = default;
  explicit GpuPoint(const GpuReadings& readings);

  WallTime time() const { return time_; }
  std::optional<float> utilization_percent() const { return Read(kUtilization); }
  std::optional<float> temperature_c() const { return Read(kTemperature); }
  std::optional<float> power_w() const { return Read(kPower); }
  std::optional<float> power_limit_w() const { return Read(kPowerLimit); }
  std::optional<float> sm_active() const { return Read(kSmActive); }
  std::optional<float> tensor_active() const { return Read(kTensorActive); }
  std::optional<float> fan_percent() const { return Read(kFan); }
  std::optional<uint32_t> process_count() const {
    return Has(kProcessCountBit) ? std::optional<uint32_t>(process_count_) : std::nullopt;
  }
  bool idle_while_peers_busy() const { return Has(kIdleWhilePeersBusyBit); }
  void set_idle_while_peers_busy(bool idle);

 private:
  enum GaugeIndex { kUtilization, kTemperature, kPower, kPowerLimit, kSmActive, kTensorActive, kFan, kGauges };
  static constexpr uint16_t kProcessCountBit = 1u << kGauges;
  static constexpr uint16_t kIdleWhilePeersBusyBit = 1u << (kGauges + 1);

  bool Has(uint16_t bit) const { return (flags_ & bit) != 0; }
  std::optional<float> Read(GaugeIndex gauge) const {
    return Has(1u << gauge) ? std::optional<float>(gauges_[gauge]) : std::nullopt;
  }
  void Write(GaugeIndex gauge, std::optional<float> value);

  WallTime time_{};
  std::array<float, kGauges> gauges_{};
  uint16_t process_count_ = 0;
  uint16_t flags_ = 0;  // a presence bit per gauge (1 << GaugeIndex), kProcessCountBit, kIdleWhilePeersBusyBit
};

// A counter's reading at one point of a track.
struct CounterReading {
  WallTime time;
  double value = 0;
};

// A track's points, oldest first, and their error counters. The counters stand still on a healthy GPU, so
// they are kept once per change (a step that holds from one point on) rather than once per point: a GPU
// whose counters never move costs one step for its whole history, one whose counters move at every sample
// 72 bytes a point more.
class PointHistory {
 public:
  using iterator = std::deque<GpuPoint>::iterator;
  using const_iterator = std::deque<GpuPoint>::const_iterator;
  using const_reverse_iterator = std::deque<GpuPoint>::const_reverse_iterator;

  void push_back(const GpuReadings& readings);
  // Drops the points older than `cutoff` from the front, and the counter steps only they used.
  void DropBefore(WallTime cutoff);

  bool empty() const { return points_.empty(); }
  size_t size() const { return points_.size(); }
  const GpuPoint& front() const { return points_.front(); }
  const GpuPoint& back() const { return points_.back(); }
  GpuPoint& back() { return points_.back(); }
  iterator begin() { return points_.begin(); }
  iterator end() { return points_.end(); }
  const_iterator begin() const { return points_.begin(); }
  const_iterator end() const { return points_.end(); }
  const_reverse_iterator rbegin() const { return points_.rbegin(); }
  const_reverse_iterator rend() const { return points_.rend(); }

  // The readings of `counter` at the points at or after `since`, oldest first; points without one are left out.
  std::vector<CounterReading> CounterSince(std::optional<double> ErrorCounters::*counter, WallTime since) const;
  size_t counter_steps() const { return counter_steps_.size(); }  // for tests

 private:
  struct CounterStep {
    uint64_t first_point;  // the position, counted since the history began, of the first point it holds for
    ErrorCounters counters;
  };
  std::deque<GpuPoint> points_;
  uint64_t dropped_ = 0;                  // points dropped from the front so far: the position of points_[0]
  std::deque<CounterStep> counter_steps_;  // oldest first; the first holds for points_[0]; empty with no points
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
  PointHistory points;
  std::map<ProcessKey, std::deque<MemoryPoint>> process_memory;
  std::optional<double> memory_total_bytes;  // latest readings
  std::optional<double> memory_used_bytes;

  // Drops what is older than `keep` before `now`, and processes gone that long.
  void Trim(WallTime now, Duration keep);
};

GpuRef RefOf(const GpuSnapshot& gpu);
GpuReadings ReadingsOf(const GpuSnapshot& gpu, WallTime time);

// How long `holds` has been true without a break, up to the newest point:
// nullopt when it is false there. Gaps longer than `max_gap` break the run.
std::optional<Duration> HeldFor(const PointHistory& points, const std::function<bool(const GpuPoint&)>& holds,
                                Duration max_gap);

// The points at or after `since`.
std::vector<const GpuPoint*> PointsSince(const PointHistory& points, WallTime since);

// "GPU 3" or "GPU 3 (GPU-8e1c...)" for summaries.
std::string GpuLabel(const GpuRef& ref);

}  // namespace gpudoctor
