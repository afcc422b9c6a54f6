// The snapshot: one plain description of a GPU server at one moment.
//
// Every source (live NVML, the fake NVML, captured nvidia-smi output) fills
// this model and every consumer (rules, CLI, agent, store) reads it. It knows
// nothing about NVML: access problems are described with AccessError.
//
//   Snapshot s = ...;
//   for (const GpuSnapshot& gpu : s.gpus)
//     if (gpu.temperature_c.has_value() && gpu.temperature_c.value() > 80) ...
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "model/field.h"
#include "model/reported_condition.h"

namespace gpudoctor {

// Why a GPU, or the whole driver, could not be read.
enum class AccessError {
  kNone,
  kLibraryNotFound,   // libnvidia-ml.so.1 is not installed
  kDriverNotLoaded,   // the kernel module is not loaded or not answering
  kVersionMismatch,   // kernel module and NVML library versions differ
  kNoPermission,
  kGpuLost,           // the GPU has fallen off the bus
  kResetRequired,
  kHang,              // a probe missed its deadline
  kUnknown,           // "Unknown Error"
  kOther,
};
const char* AccessErrorName(AccessError error);  // stable snake_case name
std::optional<AccessError> AccessErrorFromName(std::string_view name);

struct ProcessInfo {
  uint32_t pid = 0;
  std::string name;                 // empty when unknown
  Field<uint64_t> used_memory_bytes;
  bool operator==(const ProcessInfo&) const = default;
};

struct NvLinkInfo {
  uint32_t link = 0;
  Field<bool> active;
  Field<uint64_t> replay_errors;
  Field<uint64_t> recovery_errors;
  Field<uint64_t> crc_flit_errors;
  Field<uint64_t> crc_data_errors;
  bool operator==(const NvLinkInfo&) const = default;
};

// Clock-event (throttle) reason bits, as the driver reports them.
namespace clock_event {
inline constexpr uint64_t kGpuIdle = 0x1;
inline constexpr uint64_t kApplicationsClocksSetting = 0x2;
inline constexpr uint64_t kSwPowerCap = 0x4;
inline constexpr uint64_t kHwSlowdown = 0x8;
inline constexpr uint64_t kSyncBoost = 0x10;
inline constexpr uint64_t kSwThermalSlowdown = 0x20;
inline constexpr uint64_t kHwThermalSlowdown = 0x40;
inline constexpr uint64_t kHwPowerBrakeSlowdown = 0x80;
inline constexpr uint64_t kDisplayClockSetting = 0x100;
}  // namespace clock_event
// Names of the set bits, e.g. {"sw_power_cap", "hw_thermal_slowdown"}.
std::vector<std::string> DecodeClockEventReasons(uint64_t mask);

// The GPU fabric health mask: two-bit fields, each 0 not supported, 1 true, 2 false.
namespace fabric_health {
inline constexpr uint32_t kDegradedBandwidthShift = 0;
inline constexpr uint32_t kRouteRecoveryShift = 2;
inline constexpr uint32_t kRouteUnhealthyShift = 4;
inline constexpr uint32_t kAccessTimeoutRecoveryShift = 6;
inline constexpr uint32_t kTrue = 1;
// Whether the field at `shift` says true.
constexpr bool IsTrue(uint32_t mask, uint32_t shift) { return ((mask >> shift) & 0x3) == kTrue; }
}  // namespace fabric_health

// What a GPU that no longer answers was last seen as, and where that is
// known from: the agent saw it answer, its history or the kernel log named it.
struct KnownGpuIdentity {
  std::string uuid;
  std::string serial;
  std::string pci_bus_id;  // "0000:bb:dd.f"
  std::string name;
  std::string source;      // "the agent's last sample", "the agent's history", "the kernel log"
  std::optional<WallTime> seen_at;
  bool operator==(const KnownGpuIdentity&) const = default;
};

struct GpuSnapshot {
  // Identity.
  uint32_t index = 0;
  Field<std::string> name;
  Field<std::string> uuid;
  Field<std::string> serial;
  Field<std::string> board_part_number;
  Field<std::string> vbios_version;
  Field<bool> persistence_mode;
  // False when the board's infoROM fails its checksum (nvidia-smi: "WARNING:
  // infoROM is corrupted at gpu ..."): the GPU works, but cannot record its
  // ECC errors and retired pages reliably.
  Field<bool> inforom_valid;

  // Set when the GPU as a whole could not be read (lost, hung, no handle).
  AccessError access_error = AccessError::kNone;
  std::string access_message;
  // Set for such a GPU when what it was last seen as is known (assess/identity.h):
  // the fields above stay errors, this says which card it is.
  std::optional<KnownGpuIdentity> last_known;

  // PCIe.
  Field<std::string> pci_bus_id;  // "0000:bb:dd.f"
  Field<uint32_t> pcie_generation_current;
  Field<uint32_t> pcie_generation_max;
  Field<uint32_t> pcie_width_current;
  Field<uint32_t> pcie_width_max;
  Field<uint64_t> pcie_replay_count;

  // Thermal and power.
  Field<uint32_t> temperature_c;
  Field<uint32_t> memory_temperature_c;
  Field<uint32_t> temperature_slowdown_c;
  Field<uint32_t> temperature_shutdown_c;
  Field<uint32_t> temperature_max_operating_c;
  Field<uint32_t> memory_temperature_max_c;  // the memory's (HBM's) maximum operating temperature
  Field<std::vector<uint32_t>> fan_speeds_percent;  // one entry per fan
  Field<double> power_draw_w;
  Field<double> power_limit_w;          // enforced
  Field<double> power_default_limit_w;  // the board's default (before any operator change)
  Field<uint64_t> total_energy_mj;      // energy used since the driver loaded, in millijoules
  Field<uint32_t> sm_clock_mhz;
  Field<uint32_t> memory_clock_mhz;
  Field<uint64_t> clock_event_reasons;  // clock_event bits

  // Use.
  Field<uint32_t> utilization_gpu_percent;
  Field<uint32_t> utilization_memory_percent;
  Field<uint32_t> encoder_utilization_percent;  // NVENC busy over the driver's sample period
  Field<uint32_t> decoder_utilization_percent;  // NVDEC likewise
  Field<uint64_t> memory_total_bytes;
  Field<uint64_t> memory_used_bytes;
  Field<uint64_t> memory_free_bytes;
  Field<uint64_t> memory_reserved_bytes;  // kept by the driver and firmware; counted in neither used nor free
  Field<std::vector<ProcessInfo>> processes;

  // Errors.
  Field<bool> ecc_enabled;
  Field<uint64_t> ecc_volatile_corrected;
  Field<uint64_t> ecc_volatile_uncorrected;
  Field<uint64_t> ecc_aggregate_corrected;
  Field<uint64_t> ecc_aggregate_uncorrected;
  Field<uint32_t> retired_pages_sbe;
  Field<uint32_t> retired_pages_dbe;
  Field<bool> retired_pages_pending;
  Field<uint32_t> remapped_rows_correctable;
  Field<uint32_t> remapped_rows_uncorrectable;
  Field<bool> remapped_rows_pending;
  Field<bool> remapped_rows_failure;
  Field<std::vector<NvLinkInfo>> nvlinks;

  // NVLink fabric registration (NVSwitch systems; not supported elsewhere).
  Field<std::string> fabric_state;         // "not_started", "in_progress", "completed"
  Field<std::string> fabric_status;        // "success", or why registration failed
  Field<uint32_t> fabric_clique_id;
  Field<std::string> fabric_cluster_uuid;  // 32 hex digits
  Field<uint32_t> fabric_health_mask;      // fabric_health bits, from NVML's v2 call

  // GPU Performance Monitoring (Hopper and newer), averaged over the time
  // between two samples. gpm_supported false: the GPU has no GPM, and every
  // gpm_ reading is not supported. Activities are ratios (0-1): the share of
  // time the engine was busy (graphics), of SMs busy (sm_active), of warps
  // resident against the maximum (sm_occupancy), of SM time in a pipe.
  Field<bool> gpm_supported;
  Field<double> gpm_graphics_active;
  Field<double> gpm_sm_active;
  Field<double> gpm_sm_occupancy;
  Field<double> gpm_tensor_active;
  Field<double> gpm_fp64_active;
  Field<double> gpm_fp32_active;
  Field<double> gpm_fp16_active;
  Field<double> gpm_dram_active;  // DRAM bandwidth used against its peak
  Field<double> gpm_pcie_tx_bytes_per_second;
  Field<double> gpm_pcie_rx_bytes_per_second;
  Field<double> gpm_nvlink_tx_bytes_per_second;  // all links together
  Field<double> gpm_nvlink_rx_bytes_per_second;
  // NVLink bytes sent and received since the probe started, summed from the
  // rates over each interval: a counter where GPM itself gives only rates.
  Field<uint64_t> gpm_nvlink_bytes_total;

  // Marks the whole GPU unreadable: every field becomes an error with `message`.
  void MarkUnreadable(AccessError error, const std::string& message);

  bool operator==(const GpuSnapshot&) const = default;
};

// An Xid reported through NVML's event API (the kernel log gives the same
// codes through the log engine).
struct XidEvent {
  uint32_t gpu_index = 0;
  uint64_t xid = 0;
  WallTime time;
  bool operator==(const XidEvent&) const = default;
};

// A probe that missed its deadline: the evidence behind the nvml_hang finding.
struct ProbeHang {
  std::optional<uint32_t> gpu_index;  // nullopt: hung before a GPU was known (init, count)
  std::string pci_bus_id;             // when known
  std::string call;                   // the NVML function it was inside
  Duration deadline{};
  bool still_stuck_from_earlier = false;  // skipped: an older probe of this GPU never returned
  bool operator==(const ProbeHang&) const = default;
};

struct Snapshot {
  std::string source;  // "nvml", "simulate:<file>", "nvidia-smi:<file>"
  std::string hostname;
  WallTime taken_at;
  Duration collection_time{};

  // Driver-wide access. kNone means NVML initialised.
  AccessError driver_error = AccessError::kNone;
  std::string driver_message;

  Field<std::string> driver_version;
  Field<std::string> nvml_version;
  Field<int32_t> cuda_driver_version;  // e.g. 12040 for CUDA 12.4
  Field<uint32_t> device_count;        // as NVML reports it; gpus may hold fewer

  std::vector<GpuSnapshot> gpus;
  std::vector<XidEvent> xid_events;
  std::vector<ProbeHang> hangs;

  // Why the source holds less than it names: a capture cut short, or one
  // describing fewer GPUs than it says are attached. Empty when whole.
  std::vector<std::string> incomplete_reasons;

  // What the capture's own tool concluded where no reading says it (`nvidia-smi topo -m`: a GPU that reaches
  // its peers over fewer NVLinks than the others do). Empty for live data.
  std::vector<ReportedCondition> reported_conditions;

  const GpuSnapshot* FindGpu(uint32_t index) const;
  bool operator==(const Snapshot&) const = default;
};

// "12.4" for 12040.
std::string FormatCudaVersion(int32_t version);

}  // namespace gpudoctor
