#include "agent/testing/synthetic_agent.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace gpudoctor {
namespace {

constexpr uint64_t kMemoryTotal = 80ULL * 1024 * 1024 * 1024;
constexpr double kPi = 3.14159265358979323846;
constexpr const char* kBuses[] = {"18", "2a", "3a", "5d", "9a", "ab", "ba", "db"};

constexpr size_t kIdleGpu = 2;
constexpr size_t kHotGpu = 3;
constexpr size_t kRemapGpu = 5;

std::string BusId(size_t gpu) {
  return gpu < std::size(kBuses) ? fmt::format("0000:{}:00.0", kBuses[gpu])
                                 : fmt::format("0001:{:02x}:00.0", gpu);
}
std::string Uuid(size_t gpu) {
  return fmt::format("GPU-{:08x}-7d1c-4e0b-9a2f-{:012x}", 0x5f3a9c00u + gpu, 0x1b2c3d4e5f00ull + gpu * 0x111);
}

double Seconds(WallTime time) { return std::chrono::duration<double>(time.time_since_epoch()).count(); }

// Smooth, deterministic wobble in [-1, 1].
double Wave(size_t gpu, double t, double period_s) {
  return std::sin(2 * kPi * t / period_s + static_cast<double>(gpu) * 0.9);
}

double Utilization(size_t gpu, double t) {
  if (gpu == kIdleGpu) return 0;
  return std::clamp(88 + 8 * Wave(gpu, t, 1800) + 3 * Wave(gpu * 7 + 1, t, 97), 0.0, 100.0);
}

}  // namespace

double SyntheticReading(size_t gpu, std::string_view metric, WallTime time) {
  const double t = Seconds(time);
  const double util = Utilization(gpu, t);
  if (metric == "utilization_gpu_percent") return std::round(util);
  if (metric == "temperature_c") {
    const double base = 34 + 0.4 * util + 1.5 * Wave(gpu + 3, t, 300);
    return std::round(gpu == kHotGpu ? base + 18 : base);
  }
  if (metric == "power_w") return std::round((72 + 6.1 * util + 12 * Wave(gpu + 5, t, 120)) * 10) / 10;
  if (metric == "memory_used_bytes") {
    const double fraction = gpu == kIdleGpu ? 0.62 : 0.70 + 0.12 * Wave(gpu + 11, t, 3600);
    return std::floor(fraction * static_cast<double>(kMemoryTotal) / (1 << 20)) * (1 << 20);
  }
  if (metric == "memory_total_bytes") return static_cast<double>(kMemoryTotal);
  return std::numeric_limits<double>::quiet_NaN();
}

Snapshot SyntheticSnapshot(size_t gpu_count, WallTime at) {
  Snapshot s;
  s.source = "synthetic";
  s.hostname = kSyntheticHostname;
  s.taken_at = at;
  s.collection_time = std::chrono::milliseconds(42);
  s.driver_version = Field<std::string>::Value("550.54.15");
  s.nvml_version = Field<std::string>::Value("12.550.54.15");
  s.cuda_driver_version = Field<int32_t>::Value(12040);
  s.device_count = Field<uint32_t>::Value(static_cast<uint32_t>(gpu_count));
  for (size_t i = 0; i < gpu_count; ++i) {
    GpuSnapshot g;
    g.index = static_cast<uint32_t>(i);
    g.name = Field<std::string>::Value("NVIDIA H100 80GB HBM3");
    g.uuid = Field<std::string>::Value(Uuid(i));
    g.serial = Field<std::string>::Value(fmt::format("16523240{:05}", 1200 + i));
    g.vbios_version = Field<std::string>::Value("96.00.99.00.01");
    g.persistence_mode = Field<bool>::Value(true);
    g.pci_bus_id = Field<std::string>::Value(BusId(i));
    g.pcie_generation_current = Field<uint32_t>::Value(5);
    g.pcie_generation_max = Field<uint32_t>::Value(5);
    g.pcie_width_current = Field<uint32_t>::Value(16);
    g.pcie_width_max = Field<uint32_t>::Value(16);
    g.pcie_replay_count = Field<uint64_t>::Value(i == 6 ? 14 : 0);
    g.temperature_c = Field<uint32_t>::Value(static_cast<uint32_t>(SyntheticReading(i, "temperature_c", at)));
    g.memory_temperature_c = Field<uint32_t>::Value(g.temperature_c.value() + 4);
    g.temperature_slowdown_c = Field<uint32_t>::Value(87);
    g.temperature_shutdown_c = Field<uint32_t>::Value(92);
    g.fan_speeds_percent = Field<std::vector<uint32_t>>::NotSupported();  // SXM boards have no fans
    g.power_draw_w = Field<double>::Value(SyntheticReading(i, "power_w", at));
    g.power_limit_w = Field<double>::Value(700);
    g.sm_clock_mhz = Field<uint32_t>::Value(i == kIdleGpu ? 345 : 1980);
    g.memory_clock_mhz = Field<uint32_t>::Value(2619);
    g.clock_event_reasons = Field<uint64_t>::Value(i == kIdleGpu ? clock_event::kGpuIdle : 0);
    g.utilization_gpu_percent =
        Field<uint32_t>::Value(static_cast<uint32_t>(SyntheticReading(i, "utilization_gpu_percent", at)));
    g.utilization_memory_percent = Field<uint32_t>::Value(g.utilization_gpu_percent.value() / 3);
    const auto used = static_cast<uint64_t>(SyntheticReading(i, "memory_used_bytes", at));
    g.memory_total_bytes = Field<uint64_t>::Value(kMemoryTotal);
    g.memory_used_bytes = Field<uint64_t>::Value(used);
    g.memory_free_bytes = Field<uint64_t>::Value(kMemoryTotal - used);
    g.processes = Field<std::vector<ProcessInfo>>::Value({ProcessInfo{
        static_cast<uint32_t>(41000 + i), "python3", Field<uint64_t>::Value(used - (512u << 20))}});
    g.ecc_enabled = Field<bool>::Value(true);
    g.ecc_volatile_corrected = Field<uint64_t>::Value(i == kRemapGpu ? 212 : 0);
    g.ecc_volatile_uncorrected = Field<uint64_t>::Value(i == kRemapGpu ? 1 : 0);
    g.ecc_aggregate_corrected = Field<uint64_t>::Value(i == kRemapGpu ? 1840 : 3);
    g.ecc_aggregate_uncorrected = Field<uint64_t>::Value(i == kRemapGpu ? 1 : 0);
    g.retired_pages_sbe = Field<uint32_t>::NotSupported();  // row remapping replaces page retirement
    g.retired_pages_dbe = Field<uint32_t>::NotSupported();
    g.retired_pages_pending = Field<bool>::NotSupported();
    g.remapped_rows_correctable = Field<uint32_t>::Value(0);
    g.remapped_rows_uncorrectable = Field<uint32_t>::Value(i == kRemapGpu ? 1 : 0);
    g.remapped_rows_pending = Field<bool>::Value(i == kRemapGpu);
    g.remapped_rows_failure = Field<bool>::Value(false);
    std::vector<NvLinkInfo> links;
    for (uint32_t l = 0; l < 18; ++l) {
      links.push_back({l, Field<bool>::Value(true), Field<uint64_t>::Value(0), Field<uint64_t>::Value(0),
                       Field<uint64_t>::Value(0), Field<uint64_t>::Value(0)});
    }
    g.nvlinks = Field<std::vector<NvLinkInfo>>::Value(std::move(links));
    s.gpus.push_back(std::move(g));
  }
  return s;
}

std::vector<Finding> SyntheticFindings(const Snapshot& snapshot) {
  std::vector<Finding> findings;
  auto ref = [&](size_t gpu) -> std::optional<GpuRef> {
    const GpuSnapshot* g = snapshot.FindGpu(static_cast<uint32_t>(gpu));
    if (!g) return std::nullopt;
    return GpuRef{g->index, g->uuid.value_or(""), g->pci_bus_id.value_or(""), g->serial.value_or("")};
  };
  if (auto gpu = ref(kRemapGpu)) {
    findings.push_back(
        {"row_remap_pending",
         Severity::kCritical,
         gpu,
         fmt::format("GPU {} has a row remap pending after an uncorrectable ECC error", kRemapGpu),
         {"remapped_rows_uncorrectable = 1", "remapped_rows_pending = true", "ecc_volatile_uncorrected = 1",
          "Xid 63 at 2024-05-01T09:12:44Z: ECC page retirement or row remapping recording event"},
         "An HBM cell failed; the driver has remapped the row, which takes effect at the next GPU reset.",
         {"Drain the node's jobs from this GPU", "Reset the GPU (nvidia-smi -r -i 5) or reboot the node",
          "If remapping fails or recurs, open an RMA with the GPU serial"}});
  }
  if (auto gpu = ref(kIdleGpu); gpu && snapshot.gpus.size() > 1) {
    findings.push_back(
        {"gpu_idle_while_peers_busy",
         Severity::kWarning,
         gpu,
         fmt::format("GPU {} is idle while its peers are busy", kIdleGpu),
         {"utilization_gpu_percent = 0 for 15m", "peers average 88%",
          "process python3 (pid 41002) holds 49.6 GiB"},
         "One rank of a data-parallel job has hung or crashed while the others wait in a collective.",
         {"Inspect the process on this GPU (py-spy dump --pid 41002)",
          "Check the job's logs for an NCCL "
          "timeout or an exception on this rank"}});
  }
  if (auto gpu = ref(kHotGpu)) {
    findings.push_back(
        {"temperature_high",
         Severity::kWarning,
         gpu,
         fmt::format("GPU {} runs at {} °C, above the 75 °C alert threshold", kHotGpu,
                     snapshot.FindGpu(kHotGpu)->temperature_c.value_or(0)),
         {"temperature_c above 75 for 10m", "power and utilisation match the other GPUs"},
         "Poor airflow or a failing cooling component around this GPU: it runs hotter than its peers at the "
         "same load.",
         {"Check the chassis fans and the air path to this GPU's slot",
          "Compare inlet temperature with BMC "
          "sensors (ipmitool sdr type Temperature)"}});
  }
  return findings;
}

std::vector<StoredFinding> SyntheticIncidents(const Snapshot& snapshot, WallTime opened_at) {
  std::vector<StoredFinding> incidents;
  for (Finding& finding : SyntheticFindings(snapshot)) {
    StoredFinding incident;
    incident.incident_id = static_cast<int64_t>(incidents.size()) + 1;
    incident.key = FindingKey(finding);
    incident.finding = std::move(finding);
    incident.opened_at = opened_at;
    incident.last_seen = snapshot.taken_at;
    incidents.push_back(std::move(incident));
  }
  return incidents;
}

std::vector<std::string> SyntheticHistory::MetricNames() const {
  return {"temperature_c", "power_w", "utilization_gpu_percent", "memory_used_bytes", "memory_total_bytes"};
}

Result<HistorySeries> SyntheticHistory::Query(const HistoryQuery& query) const {
  static const std::pair<std::string_view, std::string_view> kUnits[] = {{"temperature_c", "°C"},
                                                                         {"power_w", "W"},
                                                                         {"utilization_gpu_percent", "%"},
                                                                         {"memory_used_bytes", "B"},
                                                                         {"memory_total_bytes", "B"}};
  HistorySeries series;
  series.metric = query.metric;
  for (const auto& [name, unit] : kUnits) {
    if (name == query.metric) series.unit = unit;
  }
  if (series.unit.empty()) return Error{fmt::format("unknown metric '{}'", query.metric)};
  if (query.gpu_index >= gpu_count_ || query.to <= query.from) return series;
  const Duration span = query.to - query.from;
  const Duration step =
      std::max(interval_, span / static_cast<int64_t>(std::max<size_t>(1, query.max_points)));
  // Points on multiples of the step, like a store's rollups.
  const auto first_tick = (query.from.time_since_epoch() + step - Duration(1)) / step;
  for (WallTime t{std::chrono::duration_cast<WallTime::duration>(first_tick * step)}; t <= query.to;
       t += std::chrono::duration_cast<WallTime::duration>(step)) {
    series.points.push_back({t, SyntheticReading(query.gpu_index, query.metric, t)});
  }
  return series;
}

}  // namespace gpudoctor
