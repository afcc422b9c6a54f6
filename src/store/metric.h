// The per-GPU metrics the history keeps, with their stable names and units.
//
// One list drives the SQL schema, the in-memory store, the `history` command
// and the HTTP API, so adding a metric is a one-line change here plus a
// schema migration.
//
//   std::optional<Metric> m = MetricFromName("temperature_c");
//   MetricName(Metric::kPowerW);  // "power_w"
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace gpudoctor {

enum class Metric {
  kTemperatureC,
  kMemoryTemperatureC,
  kPowerW,
  kUtilizationGpuPercent,
  kUtilizationMemoryPercent,
  kMemoryUsedBytes,
  kMemoryTotalBytes,
  kFanPercent,  // the fastest fan
  kSmClockMhz,
  kMemoryClockMhz,
  kEccCorrected,    // volatile counter
  kEccUncorrected,  // volatile counter
  kPcieReplays,     // counter
  kNvlinkErrors,    // counter: replay + recovery + CRC errors over all links
  kXidEvents,       // Xid events seen in this sample
};

struct MetricInfo {
  Metric metric;
  std::string_view name;  // stable; also the SQL column name
  std::string_view unit;
};

inline constexpr std::array<MetricInfo, 15> kMetrics{{
    {Metric::kTemperatureC, "temperature_c", "°C"},
    {Metric::kMemoryTemperatureC, "memory_temperature_c", "°C"},
    {Metric::kPowerW, "power_w", "W"},
    {Metric::kUtilizationGpuPercent, "utilization_gpu_percent", "%"},
    {Metric::kUtilizationMemoryPercent, "utilization_memory_percent", "%"},
    {Metric::kMemoryUsedBytes, "memory_used_bytes", "B"},
    {Metric::kMemoryTotalBytes, "memory_total_bytes", "B"},
    {Metric::kFanPercent, "fan_percent", "%"},
    {Metric::kSmClockMhz, "sm_clock_mhz", "MHz"},
    {Metric::kMemoryClockMhz, "memory_clock_mhz", "MHz"},
    {Metric::kEccCorrected, "ecc_corrected", "errors"},
    {Metric::kEccUncorrected, "ecc_uncorrected", "errors"},
    {Metric::kPcieReplays, "pcie_replays", "replays"},
    {Metric::kNvlinkErrors, "nvlink_errors", "errors"},
    {Metric::kXidEvents, "xid_events", "events"},
}};
inline constexpr size_t kMetricCount = kMetrics.size();

constexpr size_t MetricSlot(Metric metric) { return static_cast<size_t>(metric); }
constexpr std::string_view MetricName(Metric metric) { return kMetrics[MetricSlot(metric)].name; }
std::optional<Metric> MetricFromName(std::string_view name);

}  // namespace gpudoctor
