#include "health/health_test_support.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

namespace gpudoctor::testing_support {

Snapshot HealthySnapshot(uint32_t count) {
  Snapshot snapshot;
  snapshot.source = "test";
  snapshot.hostname = "gpu-node-01";
  snapshot.taken_at = kNow;
  snapshot.driver_version = Field<std::string>::Value("550.54.15");
  snapshot.nvml_version = Field<std::string>::Value("12.550.54.15");
  snapshot.cuda_driver_version = Field<int32_t>::Value(12040);
  snapshot.device_count = Field<uint32_t>::Value(count);
  for (uint32_t i = 0; i < count; ++i) {
    GpuSnapshot gpu;
    gpu.index = i;
    gpu.name = Field<std::string>::Value("NVIDIA H100 80GB HBM3");
    gpu.uuid = Field<std::string>::Value(fmt::format("GPU-0000000{}-aaaa-bbbb-cccc-dddddddddddd", i));
    gpu.serial = Field<std::string>::Value(fmt::format("165232100000{}", i));
    gpu.pci_bus_id = Field<std::string>::Value(fmt::format("0000:{:02x}:00.0", 0x1b + i * 0x28));
    gpu.persistence_mode = Field<bool>::Value(true);
    gpu.pcie_generation_current = Field<uint32_t>::Value(5);
    gpu.pcie_generation_max = Field<uint32_t>::Value(5);
    gpu.pcie_width_current = Field<uint32_t>::Value(16);
    gpu.pcie_width_max = Field<uint32_t>::Value(16);
    gpu.pcie_replay_count = Field<uint64_t>::Value(0);
    gpu.temperature_c = Field<uint32_t>::Value(40 + i);
    gpu.memory_temperature_c = Field<uint32_t>::Value(45);
    gpu.temperature_slowdown_c = Field<uint32_t>::Value(90);
    gpu.temperature_shutdown_c = Field<uint32_t>::Value(95);
    gpu.temperature_max_operating_c = Field<uint32_t>::Value(87);
    gpu.power_draw_w = Field<double>::Value(70.5);
    gpu.power_limit_w = Field<double>::Value(700);
    gpu.sm_clock_mhz = Field<uint32_t>::Value(1980);
    gpu.memory_clock_mhz = Field<uint32_t>::Value(2619);
    gpu.clock_event_reasons = Field<uint64_t>::Value(clock_event::kGpuIdle);
    gpu.utilization_gpu_percent = Field<uint32_t>::Value(0);
    gpu.utilization_memory_percent = Field<uint32_t>::Value(0);
    gpu.memory_total_bytes = Field<uint64_t>::Value(80ull << 30);
    gpu.memory_used_bytes = Field<uint64_t>::Value(1ull << 30);
    gpu.memory_free_bytes = Field<uint64_t>::Value(79ull << 30);
    gpu.processes = Field<std::vector<ProcessInfo>>::Value({});
    gpu.ecc_enabled = Field<bool>::Value(true);
    gpu.ecc_volatile_corrected = Field<uint64_t>::Value(0);
    gpu.ecc_volatile_uncorrected = Field<uint64_t>::Value(0);
    gpu.ecc_aggregate_corrected = Field<uint64_t>::Value(3);
    gpu.ecc_aggregate_uncorrected = Field<uint64_t>::Value(0);
    gpu.retired_pages_sbe = Field<uint32_t>::Value(0);
    gpu.retired_pages_dbe = Field<uint32_t>::Value(0);
    gpu.retired_pages_pending = Field<bool>::Value(false);
    gpu.remapped_rows_correctable = Field<uint32_t>::Value(0);
    gpu.remapped_rows_uncorrectable = Field<uint32_t>::Value(0);
    gpu.remapped_rows_pending = Field<bool>::Value(false);
    gpu.remapped_rows_failure = Field<bool>::Value(false);
    gpu.inforom_valid = Field<bool>::Value(true);
    std::vector<NvLinkInfo> links;
    for (uint32_t l = 0; l < 4; ++l) {
      NvLinkInfo link;
      link.link = l;
      link.active = Field<bool>::Value(true);
      link.replay_errors = Field<uint64_t>::Value(0);
      link.recovery_errors = Field<uint64_t>::Value(0);
      link.crc_flit_errors = Field<uint64_t>::Value(0);
      link.crc_data_errors = Field<uint64_t>::Value(0);
      links.push_back(link);
    }
    gpu.nvlinks = Field<std::vector<NvLinkInfo>>::Value(links);
    snapshot.gpus.push_back(gpu);
  }
  return snapshot;
}

HostSignals HealthyHost(uint32_t gpu_count) {
  HostSignals host;
  host.load = Field<LoadAverage>::Value({3.5, 3.2, 3.0, 2, 900});
  host.online_cpus = Field<uint32_t>::Value(64);
  host.cpu_pressure = Field<Pressure>::Value({{1, 1, 1, 100}, std::nullopt});
  host.memory_pressure = Field<Pressure>::Value({{0, 0, 0, 0}, PressureAverages{0, 0, 0, 0}});
  host.io_pressure = Field<Pressure>::Value({{0.5, 0.4, 0.3, 10}, PressureAverages{0.1, 0.1, 0.1, 5}});
  host.memory = Field<MemoryInfo>::Value({512ull << 30, 400ull << 30, 8ull << 30, 8ull << 30});
  host.disks.push_back({"/", Field<FileSystemSpace>::Value({1000ull << 30, 600ull << 30, 1'000'000, 900'000})});
  host.processes.push_back({"nvidia-persistenced", Field<std::vector<uint32_t>>::Value({812})});
  host.backups.push_back(
      {"/checkpoints",
       Field<BackupScan>::Value({NewestFile{"/checkpoints/step_900.pt", kNow - std::chrono::hours(2)}, 40, false})});
  host.blocked_tasks = Field<std::vector<BlockedTask>>::Value({});
  host.hung_task_reports = Field<uint64_t>::Value(0);
  std::vector<PciGpuDevice> devices;
  for (uint32_t i = 0; i < gpu_count; ++i) {
    PciGpuDevice device;
    device.pci_bus_id = fmt::format("0000:{:02x}:00.0", 0x1b + i * 0x28);
    device.device_id = 0x2330;
    device.class_code = 0x030200;
    device.driver = "nvidia";
    device.link.current_speed_gts = Field<double>::Value(32);
    device.link.max_speed_gts = Field<double>::Value(32);
    device.link.current_width = Field<uint32_t>::Value(16);
    device.link.max_width = Field<uint32_t>::Value(16);
    devices.push_back(device);
  }
  host.pci_gpus = Field<std::vector<PciGpuDevice>>::Value(devices);
  host.hwmon_sensors = Field<std::vector<Sensor>>::Value(
      {{"hwmon:coretemp", "Package id 0", SensorKind::kTemperature, 45.0, "C", SensorStatus::kOk, ""}});
  host.ipmi_sensors = Field<std::vector<Sensor>>::Value({
      {"ipmi", "Inlet Temp", SensorKind::kTemperature, 22.0, "C", SensorStatus::kOk, "22 degrees C"},
      {"ipmi", "Fan1A", SensorKind::kFan, 9840.0, "RPM", SensorStatus::kOk, "9840 RPM"},
      {"ipmi", "PS1 Status", SensorKind::kPowerSupply, std::nullopt, "", SensorStatus::kOk, "Presence detected"},
      {"ipmi", "Voltage 1", SensorKind::kVoltage, 230.0, "V", SensorStatus::kOk, "230 Volts"},
  });
  host.nvidia_module_version = Field<std::string>::Value("550.54.15");
  host.nouveau_loaded = Field<bool>::Value(false);
  return host;
}

LogEvent XidLogEvent(uint32_t xid, std::string pci_bus_id, EventSeverity severity, std::optional<WallTime> time) {
  LogEvent event;
  event.kind = "xid";
  event.xid = xid;
  event.severity = severity;
  event.time = time;
  event.pci_bus_id = std::move(pci_bus_id);
  event.raw = fmt::format("NVRM: Xid (PCI:{}): {}, pid=1234, name=python3", event.pci_bus_id, xid);
  event.message = event.raw;
  event.source = "kern.log";
  event.line_number = 100 + xid;
  return event;
}

std::vector<Finding> WithId(const std::vector<Finding>& findings, std::string_view id) {
  std::vector<Finding> matching;
  for (const Finding& finding : findings)
    if (finding.id == id) matching.push_back(finding);
  return matching;
}

std::vector<Finding> Problems(const std::vector<Finding>& findings) {
  std::vector<Finding> problems;
  for (const Finding& finding : findings)
    if (finding.severity == Severity::kWarning || finding.severity == Severity::kCritical) problems.push_back(finding);
  return problems;
}

std::vector<Finding> Evaluate(const Snapshot* snapshot, const HostSignals* host, const std::vector<LogEvent>* events,
                              const Snapshot* previous) {
  HealthInput input;
  input.snapshot = snapshot;
  input.previous = previous;
  input.host = host;
  input.log_events = events;
  input.now = kNow;
  return EvaluateRules(input, DefaultHealthConfig());
}

HealthConfig ConfigWith(std::string_view toml) {
  Result<HealthConfig> config = ApplyHealthConfig(DefaultHealthConfig(), toml, "test");
  EXPECT_TRUE(config.ok()) << (config.ok() ? "" : config.error().message);
  return config.ok() ? *config : DefaultHealthConfig();
}

Finding Single(const std::vector<Finding>& findings, std::string_view id) {
  std::vector<Finding> matching = WithId(findings, id);
  if (matching.size() != 1) {
    ADD_FAILURE() << "expected one '" << id << "' finding, got " << matching.size();
    return Finding{};
  }
  return matching.front();
}

bool EvidenceHas(const Finding& finding, std::string_view text) {
  for (const std::string& line : finding.evidence)
    if (line.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace gpudoctor::testing_support
