#include "store/snapshot_samples.h"

#include <algorithm>

namespace gpudoctor {
namespace {

template <typename T>
std::optional<double> AsDouble(const Field<T>& field) {
  if (!field.has_value()) return std::nullopt;
  return static_cast<double>(field.value());
}

std::optional<double> FastestFan(const Field<std::vector<uint32_t>>& fans) {
  if (!fans.has_value() || fans.value().empty()) return std::nullopt;
  return *std::max_element(fans.value().begin(), fans.value().end());
}

// Sum of every NVLink error counter any link reports; nullopt when none does.
std::optional<double> NvlinkErrorTotal(const Field<std::vector<NvLinkInfo>>& links) {
  if (!links.has_value()) return std::nullopt;
  std::optional<double> total;
  for (const NvLinkInfo& link : links.value()) {
    for (const Field<uint64_t>* counter :
         {&link.replay_errors, &link.recovery_errors, &link.crc_flit_errors, &link.crc_data_errors}) {
      if (counter->has_value()) total = total.value_or(0) + static_cast<double>(counter->value());
    }
  }
  return total;
}

}  // namespace

GpuSample SampleFromGpu(const GpuSnapshot& gpu, const Snapshot& snapshot) {
  GpuSample sample;
  sample.time = snapshot.taken_at;
  sample.gpu_index = gpu.index;
  sample.uuid = gpu.uuid.value_or("");
  sample.serial = gpu.serial.value_or("");
  sample.pci_bus_id = gpu.pci_bus_id.value_or("");
  sample.name = gpu.name.value_or("");
  sample[Metric::kTemperatureC] = AsDouble(gpu.temperature_c);
  sample[Metric::kMemoryTemperatureC] = AsDouble(gpu.memory_temperature_c);
  sample[Metric::kPowerW] = AsDouble(gpu.power_draw_w);
  sample[Metric::kUtilizationGpuPercent] = AsDouble(gpu.utilization_gpu_percent);
  sample[Metric::kUtilizationMemoryPercent] = AsDouble(gpu.utilization_memory_percent);
  sample[Metric::kMemoryUsedBytes] = AsDouble(gpu.memory_used_bytes);
  sample[Metric::kMemoryTotalBytes] = AsDouble(gpu.memory_total_bytes);
  sample[Metric::kFanPercent] = FastestFan(gpu.fan_speeds_percent);
  sample[Metric::kSmClockMhz] = AsDouble(gpu.sm_clock_mhz);
  sample[Metric::kMemoryClockMhz] = AsDouble(gpu.memory_clock_mhz);
  sample[Metric::kEccCorrected] = AsDouble(gpu.ecc_volatile_corrected);
  sample[Metric::kEccUncorrected] = AsDouble(gpu.ecc_volatile_uncorrected);
  sample[Metric::kPcieReplays] = AsDouble(gpu.pcie_replay_count);
  sample[Metric::kNvlinkErrors] = NvlinkErrorTotal(gpu.nvlinks);
  // An unreadable GPU reports no events either; otherwise zero events is a reading.
  if (gpu.access_error == AccessError::kNone) {
    sample[Metric::kXidEvents] = static_cast<double>(std::count_if(
        snapshot.xid_events.begin(), snapshot.xid_events.end(),
        [&](const XidEvent& event) { return event.gpu_index == gpu.index; }));
  }
  return sample;
}

SnapshotSamples SamplesFromSnapshot(const Snapshot& snapshot) {
  SnapshotSamples rows;
  for (const GpuSnapshot& gpu : snapshot.gpus) {
    rows.gpus.push_back(SampleFromGpu(gpu, snapshot));
    if (!gpu.processes.has_value()) continue;
    for (const ProcessInfo& process : gpu.processes.value()) {
      ProcessMemorySample& row = rows.processes.emplace_back();
      row.time = snapshot.taken_at;
      row.gpu_index = gpu.index;
      row.uuid = gpu.uuid.value_or("");
      row.pid = process.pid;
      row.name = process.name;
      row.used_bytes = process.used_memory_bytes.optional();
    }
  }
  return rows;
}

Status AppendSnapshot(HistoryStore& store, const Snapshot& snapshot) {
  SnapshotSamples rows = SamplesFromSnapshot(snapshot);
  return store.Append(rows.gpus, rows.processes);
}

}  // namespace gpudoctor
