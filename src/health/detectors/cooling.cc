#include "health/detectors/cooling.h"

#include <fmt/format.h>

#include <algorithm>

namespace gpudoctor {
namespace {

struct Band {
  double min = 0, max = 0, mean = 0;
};

template <typename Get>
std::optional<Band> BandOf(const std::vector<const GpuPoint*>& points, Get get) {
  Band band{1e300, -1e300, 0};
  for (const GpuPoint* point : points) {
    const std::optional<double> value = get(*point);
    if (!value) return std::nullopt;
    band.min = std::min(band.min, *value);
    band.max = std::max(band.max, *value);
    band.mean += *value;
  }
  band.mean /= static_cast<double>(points.size());
  return band;
}

// Mean temperature of the points in [from, to).
std::optional<double> MeanTemperature(const std::vector<const GpuPoint*>& points, WallTime from, WallTime to) {
  double sum = 0;
  int count = 0;
  for (const GpuPoint* point : points) {
    if (point->time() < from || point->time() >= to) continue;
    sum += *point->temperature_c();
    ++count;
  }
  if (count == 0) return std::nullopt;
  return sum / count;
}

}  // namespace

std::optional<Finding> DetectCoolingFailure(const GpuTrack& track, const CoolingConfig& config, WallTime now) {
  const std::vector<const GpuPoint*> points = PointsSince(track.points, now - config.window);
  if (points.size() < 6) return std::nullopt;
  const Duration span = points.back()->time() - points.front()->time();
  if (span < config.window * 9 / 10) return std::nullopt;

  auto temperature = BandOf(points, [](const GpuPoint& p) { return p.temperature_c(); });
  auto utilization = BandOf(points, [](const GpuPoint& p) { return p.utilization_percent(); });
  auto power = BandOf(points, [](const GpuPoint& p) { return p.power_w(); });
  if (!temperature || !utilization || !power) return std::nullopt;
  if (utilization->max - utilization->min > config.util_band_percent) return std::nullopt;
  if (power->max - power->min > config.power_band_fraction * std::max(power->mean, 1.0)) return std::nullopt;
  const GpuPoint& last = *points.back();
  if (last.fan_percent() && *last.fan_percent() < config.fan_max_percent) return std::nullopt;

  // Compare the ends and the middle of the window, averaged over a sixth of
  // it each so a noisy reading cannot fake a trend.
  const WallTime start = points.front()->time(), end = last.time() + Duration{1};
  const Duration slice = span / 6;
  auto early = MeanTemperature(points, start, start + slice);
  auto middle = MeanTemperature(points, start + span / 2 - slice / 2, start + span / 2 + slice / 2);
  auto late = MeanTemperature(points, end - slice, end);
  if (!early || !middle || !late) return std::nullopt;
  const double early_rise = *middle - *early, late_rise = *late - *middle;
  if (*late - *early < config.min_rise_c || late_rise < config.min_late_rise_c) return std::nullopt;
  if (late_rise < config.min_late_to_early_ratio * early_rise) return std::nullopt;  // levelling off: a warm-up

  Finding finding;
  finding.id = "cooling_failure";
  finding.gpu = track.ref;
  finding.severity = *last.temperature_c() >= config.critical_temperature_c ? Severity::kCritical : Severity::kWarning;
  finding.summary = fmt::format("{} temperature climbed {:.0f} °C in {} under a steady load, {}", GpuLabel(track.ref),
                                *late - *early, FormatDuration(span),
                                last.fan_percent() ? fmt::format("fans already at {:.0f}%", *last.fan_percent())
                                                   : std::string("no fans reported (liquid cooled?)"));
  finding.evidence = {
      fmt::format("temperature {:.1f} -> {:.1f} -> {:.1f} °C (start, middle, end of {}); now {:.0f} °C", *early,
                  *middle, *late, FormatDuration(span), *last.temperature_c()),
      fmt::format("utilization_gpu {:.0f}..{:.0f}%, power {:.0f}..{:.0f} W: steady", utilization->min,
                  utilization->max, power->min, power->max),
      last.fan_percent()
          ? fmt::format("fan={:.0f}% (max threshold {:.0f}%)", *last.fan_percent(), config.fan_max_percent)
          : std::string("fan: not reported")};
  finding.cause =
      "The heat removed no longer matches the heat produced: a failed or blocked fan, clogged filters or heatsink, "
      "a hot aisle or failed CRAC unit, or for liquid cooling a pump, flow or coolant temperature problem.";
  finding.actions = {"Check the chassis fans and inlet temperature (ipmitool sdr type Fan; ipmitool sdr type Temperature)",
                     "Check neighbouring GPUs and nodes: a room or rack problem heats all of them",
                     "For liquid cooling, check the CDU flow and coolant supply temperature",
                     "Reduce load or drain the node before it reaches its slowdown temperature"};
  return finding;
}

}  // namespace gpudoctor
