// Scenario: what the fake NVML library pretends the machine looks like.
//
// A scenario is parsed once, from a TOML file (format: docs/scenarios.md),
// into immutable data. Every value the library returns is a function of this
// data and the scenario time, so separate processes agree on what they see.
//
//   Result<Scenario> scenario = ParseScenario(text, "overheating.toml");
//   if (!scenario) fputs(scenario.error().message.c_str(), stderr);
//   double celsius = scenario->gpus[0].Number(GpuField::kTemperatureC, /*t=*/120.0);
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "nvml/nvml_api.h"
#include "nvml_calls.h"
#include "track.h"

namespace gpudoctor::fake_nvml {

// Every per-GPU key of a scenario file. Text fields come first; the rest are
// tracks except the three structured fields at the end.
enum class GpuField : unsigned char {
  // Text, fixed for the whole scenario.
  kName,
  kUuid,
  kSerial,
  kBoardPartNumber,
  kVbiosVersion,
  kPciBusId,
  kFabricClusterUuid,
  // Flags: tracks that read 0 or 1 and only change by `set`.
  kPersistenceMode,
  kEccEnabled,
  kRetiredPagesPending,
  kRemappedRowsPending,
  kRemappedRowsFailure,
  kInforomValid,
  kGpmSupported,
  // A bit mask of clock-event reasons; changes only by `set`.
  kClockEventReasons,
  // Numbers.
  kPcieGenerationCurrent,
  kPcieGenerationMax,
  kPcieWidthCurrent,
  kPcieWidthMax,
  kPcieReplayCount,
  kTemperatureC,
  kMemoryTemperatureC,
  kTemperatureSlowdownC,
  kTemperatureShutdownC,
  kTemperatureMaxOperatingC,
  kMemoryTemperatureMaxC,
  kPowerDrawW,
  kPowerLimitW,
  kPowerDefaultLimitW,
  kTotalEnergyMj,  // by default it grows at the base power draw from scenario time 0
  kSmClockMhz,
  kMemoryClockMhz,
  kUtilizationGpuPercent,
  kUtilizationMemoryPercent,
  kEncoderUtilizationPercent,
  kDecoderUtilizationPercent,
  kMemoryTotalMib,
  kMemoryUsedMib,
  kMemoryReservedMib,
  kEccVolatileCorrected,
  kEccVolatileUncorrected,
  kEccAggregateCorrected,
  kEccAggregateUncorrected,
  kRetiredPagesSbe,
  kRetiredPagesDbe,
  kRemappedRowsCorrectable,
  kRemappedRowsUncorrectable,
  // NVLink fabric registration: NVML's state and status codes, clique, health mask.
  kFabricState,
  kFabricStatus,
  kFabricCliqueId,
  kFabricHealthMask,
  // GPM metrics in NVML's units (percent, MiB/s), answered when gpm_supported.
  kGpmGraphicsUtilPercent,
  kGpmSmUtilPercent,
  kGpmSmOccupancyPercent,
  kGpmTensorUtilPercent,
  kGpmFp64UtilPercent,
  kGpmFp32UtilPercent,
  kGpmFp16UtilPercent,
  kGpmDramBwUtilPercent,
  kGpmPcieTxMibPerSecond,
  kGpmPcieRxMibPerSecond,
  kGpmNvLinkTxMibPerSecond,
  kGpmNvLinkRxMibPerSecond,
  // Structured.
  kFanSpeedsPercent,
  kProcesses,
  kNvLink,
  kCount,
};
inline constexpr size_t kGpuFieldCount = static_cast<size_t>(GpuField::kCount);
inline constexpr size_t kTextFieldCount = static_cast<size_t>(GpuField::kPersistenceMode);

enum class FieldKind { kText, kFlag, kMask, kNumber, kStructured };
FieldKind KindOf(GpuField field);
std::string_view KeyOf(GpuField field);  // "temperature_c"
std::optional<GpuField> GpuFieldFromKey(std::string_view key);

// Clock-event reason bits by the names model/snapshot.cc decodes them to.
std::optional<uint64_t> ClockEventReasonBit(std::string_view name);

struct ProcessSpec {
  uint32_t pid = 0;
  std::string name;
  Track used_memory_mib;
  double start = 0;  // scenario seconds; running in [start, stop)
  double stop = kForever;
  bool RunningAt(double t) const { return start <= t && t < stop; }
};

// NVLink error counters in NVML's counter order (NVML_NVLINK_ERROR_DL_*).
inline constexpr std::array<std::string_view, 4> kNvLinkCounterKeys{"replay_errors", "recovery_errors",
                                                                    "crc_flit_errors", "crc_data_errors"};
struct NvLinkSpec {
  Track active{1};
  std::array<Track, kNvLinkCounterKeys.size()> errors;
};

// PCI identity of the default GPU model (H100 SXM5 80GB).
inline constexpr uint32_t kH100PciDeviceId = 0x233010DE;
inline constexpr uint32_t kH100PciSubsystemId = 0x16C110DE;

struct GpuSpec {
  uint32_t index = 0;
  std::array<std::string, kTextFieldCount> text;
  std::array<Track, kGpuFieldCount> tracks;  // entries for text and structured fields are unused
  bool memory_used_from_processes = true;    // memory_used_mib not given: sum of running processes
  bool energy_from_power = true;             // total_energy_mj not given: base power draw since time 0
  uint32_t pci_device_id = kH100PciDeviceId;
  uint32_t pci_subsystem_id = kH100PciSubsystemId;
  std::vector<Track> fan_speeds_percent;
  std::vector<ProcessSpec> processes;
  std::vector<NvLinkSpec> nvlinks;
  std::bitset<kGpuFieldCount> not_supported;
  double lost_at = kForever;  // fell off the bus at this scenario time

  const std::string& Text(GpuField field) const { return text[static_cast<size_t>(field)]; }
  // Tracks; kMemoryUsedMib includes the derived case.
  double Number(GpuField field, double t) const;
  bool Supported(GpuField field) const { return !not_supported.test(static_cast<size_t>(field)); }
  bool LostAt(double t) const { return t >= lost_at; }
};

// [from, until) in scenario seconds.
struct TimeWindow {
  double from = 0;
  double until = kForever;
  bool Contains(double t) const { return from <= t && t < until; }
};

// Calls that block, on one GPU or (gpu unset) on every GPU and on the calls
// that take no GPU.
struct HangFault {
  CallSet calls;
  std::optional<uint32_t> gpu;
  TimeWindow window;
  std::optional<double> seconds;  // nullopt: forever
};

struct CallErrorFault {
  CallSet calls;
  std::optional<uint32_t> gpu;
  TimeWindow window;
  nvmlReturn_t error = NVML_ERROR_UNKNOWN;
};

struct InitFailure {
  TimeWindow window;
  nvmlReturn_t error = NVML_ERROR_UNKNOWN;
};

struct XidSpec {
  uint32_t gpu = 0;
  double at = 0;
  uint64_t xid = 0;
};

struct Scenario {
  std::string description;
  double time_scale = 1.0;
  // Scenario time when the clock starts (seconds). A one-shot command sees the
  // scenario at this moment; a running agent watches it go on from there.
  double start = 0;
  std::string driver_version;
  std::string nvml_version;
  int cuda_driver_version = 0;
  double xid_lookback = 0;  // seconds before registration whose events are still delivered
  std::vector<GpuSpec> gpus;
  std::vector<InitFailure> init_failures;
  std::vector<HangFault> hangs;
  std::vector<CallErrorFault> call_errors;
  std::vector<XidSpec> xids;  // sorted by time
};

// The largest scenario file the library reads (under the input rule of
// common/input_file.h); the examples are a few KiB.
inline constexpr uint64_t kMaxScenarioFileBytes = 16 << 20;

// Parses a scenario file's text. Errors read "scenario <file_name>: <line>: <message>".
Result<Scenario> ParseScenario(std::string_view toml_text, std::string_view file_name);

}  // namespace gpudoctor::fake_nvml
