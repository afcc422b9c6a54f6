#include "health/detectors/gpu_track.h"

#include <algorithm>
#include <fmt/format.h>
#include <limits>

namespace gpudoctor {
namespace {

// A reading as a double (counters) or a float (gauges: Gauge).
template <typename Out = double, typename T>
std::optional<Out> Reading(const Field<T>& field) {
  if (!field.has_value()) return std::nullopt;
  return static_cast<Out>(field.value());
}

template <typename T>
std::optional<float> Gauge(const Field<T>& field) {
  return Reading<float>(field);
}

}  // namespace

static_assert(sizeof(GpuPoint) == 40);

GpuPoint::GpuPoint(const GpuReadings& readings) : time_(readings.time) {
  Write(kUtilization, readings.utilization_percent);
  Write(kTemperature, readings.temperature_c);
  Write(kPower, readings.power_w);
  Write(kPowerLimit, readings.power_limit_w);
  Write(kSmActive, readings.sm_active);
  Write(kTensorActive, readings.tensor_active);
  Write(kFan, readings.fan_percent);
  if (readings.process_count) {
    process_count_ = static_cast<uint16_t>(
        std::min<uint32_t>(*readings.process_count, std::numeric_limits<uint16_t>::max()));
    flags_ |= kProcessCountBit;
  }
  set_idle_while_peers_busy(readings.idle_while_peers_busy);
}

void GpuPoint::set_idle_while_peers_busy(bool idle) {
  flags_ = idle ? flags_ | kIdleWhilePeersBusyBit : flags_ & ~kIdleWhilePeersBusyBit;
}

void GpuPoint::Write(GaugeIndex gauge, std::optional<float> value) {
  if (!value) return;
  gauges_[gauge] = *value;
  flags_ |= 1u << gauge;
}

void PointHistory::push_back(const GpuReadings& readings) {
  if (counter_steps_.empty() || counter_steps_.back().counters != readings.counters)
    counter_steps_.push_back({.first_point = dropped_ + points_.size(), .counters = readings.counters});
  points_.emplace_back(readings);
}

void PointHistory::DropBefore(WallTime cutoff) {
  while (!points_.empty() && points_.front().time() < cutoff) {
    points_.pop_front();
    ++dropped_;
  }
  if (points_.empty()) counter_steps_.clear();
  while (counter_steps_.size() > 1 && counter_steps_[1].first_point <= dropped_) counter_steps_.pop_front();
}

std::vector<CounterReading> PointHistory::CounterSince(std::optional<double> ErrorCounters::*counter,
                                                       WallTime since) const {
  std::vector<CounterReading> readings;
  if (points_.empty()) return readings;
  auto step = counter_steps_.begin(), next = std::next(step);
  uint64_t position = dropped_;
  for (const GpuPoint& point : points_) {
    if (next != counter_steps_.end() && next->first_point == position) step = next++;
    const std::optional<double>& value = step->counters.*counter;
    if (value && point.time() >= since) readings.push_back({point.time(), *value});
    ++position;
  }
  return readings;
}

void GpuTrack::Trim(WallTime now, Duration keep) {
  const WallTime cutoff = now - keep;
  points.DropBefore(cutoff);
  for (auto it = process_memory.begin(); it != process_memory.end();) {
    auto& series = it->second;
    while (!series.empty() && series.front().time < cutoff) series.pop_front();
    it = series.empty() ? process_memory.erase(it) : std::next(it);
  }
}

GpuRef RefOf(const GpuSnapshot& gpu) {
  return GpuRef{.index = gpu.index,
                .uuid = gpu.uuid.value_or(""),
                .pci_bus_id = gpu.pci_bus_id.value_or(""),
                .serial = gpu.serial.value_or("")};
}

GpuReadings ReadingsOf(const GpuSnapshot& gpu, WallTime time) {
  GpuReadings readings;
  readings.time = time;
  readings.utilization_percent = Gauge(gpu.utilization_gpu_percent);
  readings.temperature_c = Gauge(gpu.temperature_c);
  readings.power_w = Gauge(gpu.power_draw_w);
  readings.power_limit_w = Gauge(gpu.power_limit_w);
  if (gpu.gpm_sm_active.has_value()) readings.sm_active = static_cast<float>(gpu.gpm_sm_active.value());
  if (gpu.gpm_tensor_active.has_value()) readings.tensor_active = static_cast<float>(gpu.gpm_tensor_active.value());
  if (gpu.fan_speeds_percent.has_value() && !gpu.fan_speeds_percent.value().empty()) {
    const auto& fans = gpu.fan_speeds_percent.value();
    readings.fan_percent = static_cast<float>(*std::max_element(fans.begin(), fans.end()));
  }
  ErrorCounters& counters = readings.counters;
  counters.ecc_corrected = Reading(gpu.ecc_volatile_corrected);
  counters.ecc_uncorrected = Reading(gpu.ecc_volatile_uncorrected);
  counters.pcie_replays = Reading(gpu.pcie_replay_count);
  if (gpu.nvlinks.has_value()) {
    for (const NvLinkInfo& link : gpu.nvlinks.value()) {
      for (const Field<uint64_t>* counter :
           {&link.replay_errors, &link.recovery_errors, &link.crc_flit_errors, &link.crc_data_errors}) {
        if (counter->has_value()) counters.nvlink_errors = counters.nvlink_errors.value_or(0) + counter->value();
      }
    }
  }
  if (gpu.processes.has_value()) readings.process_count = static_cast<uint32_t>(gpu.processes.value().size());
  return readings;
}

std::optional<Duration> HeldFor(const PointHistory& points, const std::function<bool(const GpuPoint&)>& holds,
                                Duration max_gap) {
  if (points.empty() || !holds(points.back())) return std::nullopt;
  WallTime start = points.back().time();
  for (auto it = points.rbegin() + 1; it != points.rend(); ++it) {
    if (start - it->time() > max_gap || !holds(*it)) break;
    start = it->time();
  }
  return points.back().time() - start;
}

std::vector<const GpuPoint*> PointsSince(const PointHistory& points, WallTime since) {
  std::vector<const GpuPoint*> recent;
  for (const GpuPoint& point : points)
    if (point.time() >= since) recent.push_back(&point);
  return recent;
}

std::string GpuLabel(const GpuRef& ref) {
  std::string label = ref.index ? "GPU " + std::to_string(*ref.index) : std::string("GPU");
  if (!ref.pci_bus_id.empty()) label += " (" + ref.pci_bus_id + ")";
  return label;
}

}  // namespace gpudoctor
