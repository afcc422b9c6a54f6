// Host signals: what the operating system says about a GPU server, beside
// what NVML says about its GPUs.
//
// Every signal is optional. A source that does not exist on this machine
// (no PSI in an old kernel, no ipmitool, no hwmon chips) is NotSupported; a
// source that exists but could not be read or parsed is Failed with the
// reason. Nothing missing ever reads as 0, and nothing here is fatal.
//
//   HostConfig config;
//   config.disk_paths = {"/", "/data"};
//   config.processes = {"nvidia-persistenced", "cmdline:train.py"};
//   SubprocessRunner runner;
//   LinuxHostEnv env("/", runner);
//   HostSignals host = CollectHostSignals(config, env);
//   if (host.memory.has_value()) ... host.memory.value().available_bytes ...
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/pci_device.h"
#include "host/host_env.h"
#include "model/field.h"

namespace gpudoctor {

// What to collect beyond the signals every host has.
struct HostConfig {
  std::vector<std::string> disk_paths;  // free space is measured on each
  // Programs that must be running: a program name as in `ps` ("nvidia-persistenced"),
  // or "cmdline:TEXT" to match TEXT anywhere in a command line ("cmdline:train.py").
  std::vector<std::string> processes;
  std::vector<std::string> backup_dirs;  // the newest file in each (recursively) is found
  bool ipmi = true;                      // read BMC sensors with `ipmitool sdr elist` when installed
  Duration command_timeout = std::chrono::seconds(20);
  uint32_t backup_scan_file_limit = 100'000;  // files examined per backup directory
  uint32_t backup_scan_depth = 8;             // directory levels below each backup directory
};

struct LoadAverage {
  double one_minute = 0;
  double five_minutes = 0;
  double fifteen_minutes = 0;
  uint32_t runnable_tasks = 0;
  uint32_t total_tasks = 0;
  bool operator==(const LoadAverage&) const = default;
};

// One line of /proc/pressure/*: the share of time (percent) some or all
// tasks were stalled on the resource.
struct PressureAverages {
  double avg10 = 0;
  double avg60 = 0;
  double avg300 = 0;
  uint64_t total_us = 0;
  bool operator==(const PressureAverages&) const = default;
};

struct Pressure {
  PressureAverages some;
  std::optional<PressureAverages> full;  // absent for cpu on older kernels
  bool operator==(const Pressure&) const = default;
};

struct MemoryInfo {
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;  // MemAvailable: what can be used without swapping
  uint64_t swap_total_bytes = 0;
  uint64_t swap_free_bytes = 0;
  bool operator==(const MemoryInfo&) const = default;
};

struct DiskUsage {
  std::string path;
  Field<FileSystemSpace> space;
  bool operator==(const DiskUsage&) const = default;
};

struct ProcessPresence {
  std::string pattern;                // as configured
  Field<std::vector<uint32_t>> pids;  // empty value: not running
  bool operator==(const ProcessPresence&) const = default;
};

struct NewestFile {
  std::string path;
  WallTime modified;
  bool operator==(const NewestFile&) const = default;
};

struct BackupScan {
  std::optional<NewestFile> newest;  // nullopt: the directory holds no files
  uint64_t files_examined = 0;
  bool truncated = false;  // the scan stopped at a limit; `newest` is of the files seen
  bool operator==(const BackupScan&) const = default;
};

struct BackupDirectory {
  std::string path;
  Field<BackupScan> scan;
  bool operator==(const BackupDirectory&) const = default;
};

// A task in uninterruptible sleep ("D" state). The pid and start time name
// one task across samples (pids are reused); its context switch count stays
// put while it never runs, which is how the kernel's hung-task detector tells
// a task stuck from one that keeps waking up.
struct BlockedTask {
  uint32_t pid = 0;
  uint64_t start_time_ticks = 0;             // clock ticks after boot; 0 when unknown
  std::optional<uint64_t> context_switches;  // voluntary and involuntary, when readable
  std::string name;                          // comm
  std::string wait_channel;                  // kernel function it sleeps in, when readable
  // What ties it to the NVIDIA driver, as evidence: "/dev/nvidia0 open",
  // "kernel stack in nvidia: os_acquire_mutex". Empty: nothing seen (or not readable).
  std::vector<std::string> nvidia_ties;
  bool operator==(const BlockedTask&) const = default;
};

struct PcieLink {
  Field<double> current_speed_gts;  // 16.0 for "16.0 GT/s PCIe"
  Field<double> max_speed_gts;
  Field<uint32_t> current_width;
  Field<uint32_t> max_width;
  bool operator==(const PcieLink&) const = default;
};

// PCIe generation for a link speed in GT/s (2.5 -> 1 ... 64 -> 6).
std::optional<uint32_t> PcieGenerationForSpeed(double gts);

// An NVIDIA display or 3D controller seen on the PCI bus.
struct PciGpuDevice {
  std::string pci_bus_id;   // "0000:3b:00.0"
  uint32_t device_id = 0;   // e.g. 0x2330
  uint32_t class_code = 0;  // e.g. 0x030200
  std::string driver;       // bound kernel driver ("nvidia"), empty when none
  PcieLink link;
  bool operator==(const PciGpuDevice&) const = default;
};

enum class SensorKind { kTemperature, kFan, kVoltage, kPower, kCurrent, kPowerSupply, kOther };
const char* SensorKindName(SensorKind kind);  // "temperature", "fan", ...

// The sensor's own verdict: hwmon alarm files or the BMC's threshold state.
enum class SensorStatus { kOk, kWarning, kCritical, kNoReading };
const char* SensorStatusName(SensorStatus status);  // "ok", "warning", "critical", "no_reading"

// One reading from a hwmon chip or the BMC.
struct Sensor {
  std::string source;  // "hwmon:coretemp", "ipmi"
  std::string name;    // label as the source gives it ("Inlet Temp", "Package id 0")
  SensorKind kind = SensorKind::kOther;
  std::optional<double> value;  // in `unit`; nullopt for discrete or unread sensors
  std::string unit;             // "C", "RPM", "V", "W", "A", or empty
  SensorStatus status = SensorStatus::kOk;
  std::string detail;  // the raw reading or asserted states ("Presence detected, Failure detected")
  bool operator==(const Sensor&) const = default;
};

struct HostSignals {
  Field<LoadAverage> load;
  Field<uint32_t> online_cpus;
  Field<Pressure> cpu_pressure;
  Field<Pressure> memory_pressure;
  Field<Pressure> io_pressure;
  Field<MemoryInfo> memory;
  std::vector<DiskUsage> disks;            // one per HostConfig::disk_paths entry
  std::vector<ProcessPresence> processes;  // one per HostConfig::processes entry
  std::vector<BackupDirectory> backups;    // one per HostConfig::backup_dirs entry
  // Tasks in uninterruptible sleep now, except gpudoctor's own (this process,
  // its probes and any other gpudoctor), which wait on what they measure.
  Field<std::vector<BlockedTask>> blocked_tasks;
  Field<uint64_t> hung_task_reports;          // kernel's hung-task detections since boot
  Field<uint64_t> hung_task_timeout_seconds;  // the kernel's hung_task_timeout_secs; 0: detector off
  Field<std::vector<PciGpuDevice>> pci_gpus;
  Field<std::vector<Sensor>> hwmon_sensors;
  Field<std::vector<Sensor>> ipmi_sensors;
  Field<std::string> nvidia_module_version;  // loaded kernel module, e.g. "550.54.15"
  Field<WallTime> nvidia_driver_built_at;    // its build date (/proc/driver/nvidia/version)
  Field<bool> nouveau_loaded;
  bool operator==(const HostSignals&) const = default;
};

HostSignals CollectHostSignals(const HostConfig& config, HostEnv& env);

// Every device on the PCI bus and its place in the topology, for naming the
// devices that logs mention (a port is not a GPU). NotSupported without
// /sys/bus/pci.
Field<std::vector<PciDevice>> ReadPciDevices(const HostEnv& env);

}  // namespace gpudoctor
