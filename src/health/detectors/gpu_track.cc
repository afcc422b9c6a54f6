#include "health/detectors/gpu_track.h"

#include <algorithm>
#include <fmt/format.h>

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

void GpuTrack::Trim(WallTime now, Duration keep) {
  const WallTime cutoff = now - keep;
  while (!points.empty() && points.front().time < cutoff) points.pop_front();
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

// 144 bytes, three to a block of the track's deque (it was 192, two to a block).
static_assert(sizeof(GpuPoint) <= 144);

GpuPoint PointOf(const GpuSnapshot& gpu, WallTime time) {
  GpuPoint point;
  point.time = time;
  point.utilization_percent = Gauge(gpu.utilization_gpu_percent);
  point.temperature_c = Gauge(gpu.temperature_c);
  point.power_w = Gauge(gpu.power_draw_w);
  point.power_limit_w = Gauge(gpu.power_limit_w);
  if (gpu.gpm_sm_active.has_value()) point.sm_active = static_cast<float>(gpu.gpm_sm_active.value());
  if (gpu.gpm_tensor_active.has_value()) point.tensor_active = static_cast<float>(gpu.gpm_tensor_active.value());
  if (gpu.fan_speeds_percent.has_value() && !gpu.fan_speeds_percent.value().empty()) {
    const auto& fans = gpu.fan_speeds_percent.value();
    point.fan_percent = static_cast<float>(*std::max_element(fans.begin(), fans.end()));
  }
  point.ecc_corrected = Reading(gpu.ecc_volatile_corrected);
  point.ecc_uncorrected = Reading(gpu.ecc_volatile_uncorrected);
  point.pcie_replays = Reading(gpu.pcie_replay_count);
  if (gpu.nvlinks.has_value()) {
    for (const NvLinkInfo& link : gpu.nvlinks.value()) {
      for (const Field<uint64_t>* counter :
           {&link.replay_errors, &link.recovery_errors, &link.crc_flit_errors, &link.crc_data_errors}) {
        if (counter->has_value()) point.nvlink_errors = point.nvlink_errors.value_or(0) + counter->value();
      }
    }
  }
  if (gpu.processes.has_value()) point.process_count = static_cast<uint32_t>(gpu.processes.value().size());
  return point;
}

std::optional<Duration> HeldFor(const std::deque<GpuPoint>& points, const std::function<bool(const GpuPoint&)>& holds,
                                Duration max_gap) {
  if (points.empty() || !holds(points.back())) return std::nullopt;
  WallTime start = points.back().time;
  for (auto it = points.rbegin() + 1; it != points.rend(); ++it) {
    if (start - it->time > max_gap || !holds(*it)) break;
    start = it->time;
  }
  return points.back().time - start;
}

std::vector<const GpuPoint*> PointsSince(const std::deque<GpuPoint>& points, WallTime since) {
  std::vector<const GpuPoint*> recent;
  for (const GpuPoint& point : points)
    if (point.time >= since) recent.push_back(&point);
  return recent;
}

std::string GpuLabel(const GpuRef& ref) {
  std::string label = ref.index ? "GPU " + std::to_string(*ref.index) : std::string("GPU");
  if (!ref.pci_bus_id.empty()) label += " (" + ref.pci_bus_id + ")";
  return label;
}

}  // namespace gpudoctor
