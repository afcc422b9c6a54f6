#include "agent/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <optional>
#include <set>

#include "assess/identity.h"

namespace gpudoctor {
namespace {

struct Family {
  std::string_view name;
  std::string_view type;  // "gauge" or "counter"
  std::string_view help;
};

struct Label {
  std::string_view name;
  std::string_view value;
};

void AppendEscaped(std::string& out, std::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
}

void AppendValue(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
  } else if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
  } else if (value == std::floor(value) && std::fabs(value) < 9.007199254740992e15) {
    const fmt::format_int digits(static_cast<int64_t>(value));
    out.append(digits.data(), digits.size());
  } else {
    fmt::format_to(std::back_inserter(out), "{}", value);
  }
}

// `name="value",...` for a fixed label set, escaped once and reused for every
// sample of a GPU.
void AppendLabel(std::string& out, const Label& label) {
  out += label.name;
  out += "=\"";
  AppendEscaped(out, label.value);
  out += '"';
}

std::string FormatLabels(std::initializer_list<Label> labels) {
  std::string out;
  for (const Label& label : labels) {
    if (!out.empty()) out += ',';
    AppendLabel(out, label);
  }
  return out;
}

// Writes families in order. A family's HELP and TYPE lines are written with
// its first sample, so a family with no samples leaves no trace.
class Exposition {
 public:
  explicit Exposition(std::string& out) : out_(out) {}

  void Begin(const Family& family) {
    family_ = family;
    header_written_ = false;
  }

  void Sample(std::string_view labels, std::initializer_list<Label> extra, double value) {
    if (!header_written_) {
      fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", family_.name, family_.help,
                     family_.name, family_.type);
      header_written_ = true;
    }
    out_ += family_.name;
    if (!labels.empty() || extra.size() != 0) {
      out_ += '{';
      out_ += labels;
      bool first = labels.empty();
      for (const Label& label : extra) {
        if (!first) out_ += ',';
        first = false;
        AppendLabel(out_, label);
      }
      out_ += '}';
    }
    out_ += ' ';
    AppendValue(out_, value);
    out_ += '\n';
  }
  void Sample(std::string_view labels, double value) { Sample(labels, {}, value); }
  void Sample(double value) { Sample({}, {}, value); }

 private:
  std::string& out_;
  Family family_;
  bool header_written_ = false;
};

template <typename T>
std::optional<double> Number(const Field<T>& field) {
  if (!field.has_value()) return std::nullopt;
  return static_cast<double>(field.value());
}
std::optional<double> Scaled(std::optional<double> value, double factor) {
  if (!value) return std::nullopt;
  return *value * factor;
}
std::optional<double> Mebibytes(const Field<uint64_t>& bytes) {
  if (!bytes.has_value()) return std::nullopt;
  return static_cast<double>(bytes.value() / (1024 * 1024));
}
std::optional<double> FastestFanPercent(const GpuSnapshot& gpu) {
  if (!gpu.fan_speeds_percent.has_value() || gpu.fan_speeds_percent.value().empty()) {
    return std::nullopt;
  }
  const auto& fans = gpu.fan_speeds_percent.value();
  return static_cast<double>(*std::max_element(fans.begin(), fans.end()));
}
std::optional<double> ProcessCount(const GpuSnapshot& gpu) {
  if (!gpu.processes.has_value()) return std::nullopt;
  return static_cast<double>(gpu.processes.value().size());
}

// Sum of one NVLink counter over the links that report it.
std::optional<double> NvLinkTotal(const GpuSnapshot& gpu, Field<uint64_t> NvLinkInfo::*counter) {
  if (!gpu.nvlinks.has_value()) return std::nullopt;
  std::optional<double> total;
  for (const NvLinkInfo& link : gpu.nvlinks.value()) {
    if ((link.*counter).has_value()) total = total.value_or(0) + (link.*counter).value();
  }
  return total;
}

using GpuReader = std::optional<double> (*)(const GpuSnapshot&);
struct GpuReading {
  Family family;
  GpuReader read;
};

// Readings with one sample per GPU, in gpudoctor's names and base units.
const GpuReading kGpuReadings[] = {
    {{"gpudoctor_gpu_temperature_celsius", "gauge", "GPU die temperature."},
     [](const GpuSnapshot& g) { return Number(g.temperature_c); }},
    {{"gpudoctor_gpu_memory_temperature_celsius", "gauge", "GPU memory (HBM) temperature."},
     [](const GpuSnapshot& g) { return Number(g.memory_temperature_c); }},
    {{"gpudoctor_gpu_slowdown_temperature_celsius", "gauge",
      "Temperature at which the GPU starts to slow its clocks."},
     [](const GpuSnapshot& g) { return Number(g.temperature_slowdown_c); }},
    {{"gpudoctor_gpu_shutdown_temperature_celsius", "gauge", "Temperature at which the GPU shuts down."},
     [](const GpuSnapshot& g) { return Number(g.temperature_shutdown_c); }},
    {{"gpudoctor_gpu_power_watts", "gauge", "Power draw of the board."},
     [](const GpuSnapshot& g) { return Number(g.power_draw_w); }},
    {{"gpudoctor_gpu_power_limit_watts", "gauge", "Enforced power limit."},
     [](const GpuSnapshot& g) { return Number(g.power_limit_w); }},
    {{"gpudoctor_gpu_power_default_limit_watts", "gauge",
      "The board's default power limit; below it, the enforced limit was lowered."},
     [](const GpuSnapshot& g) { return Number(g.power_default_limit_w); }},
    {{"gpudoctor_gpu_sm_clock_hertz", "gauge", "Current SM clock."},
     [](const GpuSnapshot& g) { return Scaled(Number(g.sm_clock_mhz), 1e6); }},
    {{"gpudoctor_gpu_memory_clock_hertz", "gauge", "Current memory clock."},
     [](const GpuSnapshot& g) { return Scaled(Number(g.memory_clock_mhz), 1e6); }},
    {{"gpudoctor_gpu_utilization_ratio", "gauge",
      "Fraction of the last sample period in which a kernel was running (0-1)."},
     [](const GpuSnapshot& g) { return Scaled(Number(g.utilization_gpu_percent), 0.01); }},
    {{"gpudoctor_gpu_memory_controller_utilization_ratio", "gauge",
      "Fraction of the last sample period in which device memory was read or written (0-1)."},
     [](const GpuSnapshot& g) { return Scaled(Number(g.utilization_memory_percent), 0.01); }},
    {{"gpudoctor_gpu_memory_used_bytes", "gauge", "Device memory in use."},
     [](const GpuSnapshot& g) { return Number(g.memory_used_bytes); }},
    {{"gpudoctor_gpu_memory_free_bytes", "gauge", "Device memory free."},
     [](const GpuSnapshot& g) { return Number(g.memory_free_bytes); }},
    {{"gpudoctor_gpu_memory_total_bytes", "gauge", "Device memory size."},
     [](const GpuSnapshot& g) { return Number(g.memory_total_bytes); }},
    {{"gpudoctor_gpu_memory_reserved_bytes", "gauge",
      "Device memory the driver and firmware keep for themselves, counted in neither used nor free."},
     [](const GpuSnapshot& g) { return Number(g.memory_reserved_bytes); }},
    {{"gpudoctor_gpu_energy_joules_total", "counter", "Energy the board used since the driver loaded."},
     [](const GpuSnapshot& g) { return Scaled(Number(g.total_energy_mj), 1e-3); }},
    {{"gpudoctor_gpu_encoder_utilization_ratio", "gauge",
      "Fraction of the driver's sample period NVENC was busy (0-1)."},
     [](const GpuSnapshot& g) { return Scaled(Number(g.encoder_utilization_percent), 0.01); }},
    {{"gpudoctor_gpu_decoder_utilization_ratio", "gauge",
      "Fraction of the driver's sample period NVDEC was busy (0-1)."},
     [](const GpuSnapshot& g) { return Scaled(Number(g.decoder_utilization_percent), 0.01); }},
    {{"gpudoctor_gpu_graphics_engine_active_ratio", "gauge",
      "GPM: fraction of time a graphics or compute context was busy (0-1)."},
     [](const GpuSnapshot& g) { return Number(g.gpm_graphics_active); }},
    {{"gpudoctor_gpu_sm_active_ratio", "gauge", "GPM: fraction of SMs busy, averaged over the interval (0-1)."},
     [](const GpuSnapshot& g) { return Number(g.gpm_sm_active); }},
    {{"gpudoctor_gpu_sm_occupancy_ratio", "gauge", "GPM: resident warps against the SMs' maximum (0-1)."},
     [](const GpuSnapshot& g) { return Number(g.gpm_sm_occupancy); }},
    {{"gpudoctor_gpu_tensor_active_ratio", "gauge", "GPM: fraction of SM time in any tensor pipe (0-1)."},
     [](const GpuSnapshot& g) { return Number(g.gpm_tensor_active); }},
    {{"gpudoctor_gpu_fp64_active_ratio", "gauge", "GPM: fraction of SM time in non-tensor FP64 math (0-1)."},
     [](const GpuSnapshot& g) { return Number(g.gpm_fp64_active); }},
    {{"gpudoctor_gpu_fp32_active_ratio", "gauge", "GPM: fraction of SM time in non-tensor FP32 math (0-1)."},
     [](const GpuSnapshot& g) { return Number(g.gpm_fp32_active); }},
    {{"gpudoctor_gpu_fp16_active_ratio", "gauge", "GPM: fraction of SM time in non-tensor FP16 math (0-1)."},
     [](const GpuSnapshot& g) { return Number(g.gpm_fp16_active); }},
    {{"gpudoctor_gpu_dram_active_ratio", "gauge", "GPM: device memory bandwidth used against its peak (0-1)."},
     [](const GpuSnapshot& g) { return Number(g.gpm_dram_active); }},
    {{"gpudoctor_gpu_pcie_tx_bytes_per_second", "gauge", "GPM: PCIe traffic sent by the GPU."},
     [](const GpuSnapshot& g) { return Number(g.gpm_pcie_tx_bytes_per_second); }},
    {{"gpudoctor_gpu_pcie_rx_bytes_per_second", "gauge", "GPM: PCIe traffic received by the GPU."},
     [](const GpuSnapshot& g) { return Number(g.gpm_pcie_rx_bytes_per_second); }},
    {{"gpudoctor_gpu_nvlink_tx_bytes_per_second", "gauge", "GPM: NVLink traffic sent, all links together."},
     [](const GpuSnapshot& g) { return Number(g.gpm_nvlink_tx_bytes_per_second); }},
    {{"gpudoctor_gpu_nvlink_rx_bytes_per_second", "gauge", "GPM: NVLink traffic received, all links together."},
     [](const GpuSnapshot& g) { return Number(g.gpm_nvlink_rx_bytes_per_second); }},
    {{"gpudoctor_gpu_nvlink_traffic_bytes_total", "counter",
      "GPM: NVLink bytes sent and received since the probe started, summed from the rates."},
     [](const GpuSnapshot& g) { return Number(g.gpm_nvlink_bytes_total); }},
    {{"gpudoctor_gpu_processes", "gauge", "Compute processes running on the GPU."}, ProcessCount},
    {{"gpudoctor_gpu_pcie_replays_total", "counter", "PCIe link replays (retransmissions)."},
     [](const GpuSnapshot& g) { return Number(g.pcie_replay_count); }},
    {{"gpudoctor_gpu_pcie_link_generation", "gauge", "Current PCIe link generation."},
     [](const GpuSnapshot& g) { return Number(g.pcie_generation_current); }},
    {{"gpudoctor_gpu_pcie_link_max_generation", "gauge", "Maximum PCIe link generation."},
     [](const GpuSnapshot& g) { return Number(g.pcie_generation_max); }},
    {{"gpudoctor_gpu_pcie_link_width_lanes", "gauge", "Current PCIe link width."},
     [](const GpuSnapshot& g) { return Number(g.pcie_width_current); }},
    {{"gpudoctor_gpu_pcie_link_max_width_lanes", "gauge", "Maximum PCIe link width."},
     [](const GpuSnapshot& g) { return Number(g.pcie_width_max); }},
    {{"gpudoctor_gpu_persistence_mode", "gauge", "1 when persistence mode is on."},
     [](const GpuSnapshot& g) { return Number(g.persistence_mode); }},
    {{"gpudoctor_gpu_ecc_enabled", "gauge", "1 when ECC is enabled."},
     [](const GpuSnapshot& g) { return Number(g.ecc_enabled); }},
    {{"gpudoctor_gpu_retired_pages_pending", "gauge", "1 when a page retirement waits for the next reset."},
     [](const GpuSnapshot& g) { return Number(g.retired_pages_pending); }},
    {{"gpudoctor_gpu_remapped_rows_pending", "gauge", "1 when a row remap waits for the next reset."},
     [](const GpuSnapshot& g) { return Number(g.remapped_rows_pending); }},
    {{"gpudoctor_gpu_remapped_rows_failure", "gauge", "1 when a row remap failed: the GPU needs service."},
     [](const GpuSnapshot& g) { return Number(g.remapped_rows_failure); }},
};

// The same readings in dcgm-exporter's names and units.
const GpuReading kDcgmReadings[] = {
    {{"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."},
     [](const GpuSnapshot& g) { return Number(g.sm_clock_mhz); }},
    {{"DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."},
     [](const GpuSnapshot& g) { return Number(g.memory_clock_mhz); }},
    {{"DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."},
     [](const GpuSnapshot& g) { return Number(g.memory_temperature_c); }},
    {{"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."},
     [](const GpuSnapshot& g) { return Number(g.temperature_c); }},
    {{"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."},
     [](const GpuSnapshot& g) { return Number(g.power_draw_w); }},
    {{"DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", "Power management limit (in W)."},
     [](const GpuSnapshot& g) { return Number(g.power_limit_w); }},
    {{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."},
     [](const GpuSnapshot& g) { return Number(g.total_energy_mj); }},
    {{"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."},
     [](const GpuSnapshot& g) { return Number(g.pcie_replay_count); }},
    {{"DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "PCIe link generation."},
     [](const GpuSnapshot& g) { return Number(g.pcie_generation_current); }},
    {{"DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", "PCIe link width."},
     [](const GpuSnapshot& g) { return Number(g.pcie_width_current); }},
    {{"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."},
     [](const GpuSnapshot& g) { return Number(g.utilization_gpu_percent); }},
    {{"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."},
     [](const GpuSnapshot& g) { return Number(g.utilization_memory_percent); }},
    {{"DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."},
     [](const GpuSnapshot& g) { return Number(g.encoder_utilization_percent); }},
    {{"DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."},
     [](const GpuSnapshot& g) { return Number(g.decoder_utilization_percent); }},
    {{"DCGM_FI_DEV_FAN_SPEED", "gauge", "Fan speed (in %), the fastest fan."}, FastestFanPercent},
    {{"DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."},
     [](const GpuSnapshot& g) { return Mebibytes(g.memory_free_bytes); }},
    {{"DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."},
     [](const GpuSnapshot& g) { return Mebibytes(g.memory_used_bytes); }},
    {{"DCGM_FI_DEV_FB_TOTAL", "gauge", "Framebuffer memory total (in MiB)."},
     [](const GpuSnapshot& g) { return Mebibytes(g.memory_total_bytes); }},
    {{"DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."},
     [](const GpuSnapshot& g) { return Mebibytes(g.memory_reserved_bytes); }},
    {{"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons (bitmask)."},
     [](const GpuSnapshot& g) { return Number(g.clock_event_reasons); }},
    {{"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Single-bit volatile ECC errors."},
     [](const GpuSnapshot& g) { return Number(g.ecc_volatile_corrected); }},
    {{"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Double-bit volatile ECC errors."},
     [](const GpuSnapshot& g) { return Number(g.ecc_volatile_uncorrected); }},
    {{"DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", "Single-bit persistent ECC errors."},
     [](const GpuSnapshot& g) { return Number(g.ecc_aggregate_corrected); }},
    {{"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "Double-bit persistent ECC errors."},
     [](const GpuSnapshot& g) { return Number(g.ecc_aggregate_uncorrected); }},
    {{"DCGM_FI_DEV_RETIRED_SBE", "counter", "Total number of retired pages due to single-bit errors."},
     [](const GpuSnapshot& g) { return Number(g.retired_pages_sbe); }},
    {{"DCGM_FI_DEV_RETIRED_DBE", "counter", "Total number of retired pages due to double-bit errors."},
     [](const GpuSnapshot& g) { return Number(g.retired_pages_dbe); }},
    {{"DCGM_FI_DEV_RETIRED_PENDING", "gauge", "Pages pending retirement."},
     [](const GpuSnapshot& g) { return Number(g.retired_pages_pending); }},
    {{"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors."},
     [](const GpuSnapshot& g) { return Number(g.remapped_rows_correctable); }},
    {{"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
      "Number of remapped rows for uncorrectable errors."},
     [](const GpuSnapshot& g) { return Number(g.remapped_rows_uncorrectable); }},
    {{"DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Whether a row remap is pending."},
     [](const GpuSnapshot& g) { return Number(g.remapped_rows_pending); }},
    {{"DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed."},
     [](const GpuSnapshot& g) { return Number(g.remapped_rows_failure); }},
    {{"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter",
      "Total number of NVLink flow-control CRC errors."},
     [](const GpuSnapshot& g) { return NvLinkTotal(g, &NvLinkInfo::crc_flit_errors); }},
    {{"DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink data CRC errors."},
     [](const GpuSnapshot& g) { return NvLinkTotal(g, &NvLinkInfo::crc_data_errors); }},
    {{"DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink retries."},
     [](const GpuSnapshot& g) { return NvLinkTotal(g, &NvLinkInfo::replay_errors); }},
    {{"DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink recovery errors."},
     [](const GpuSnapshot& g) { return NvLinkTotal(g, &NvLinkInfo::recovery_errors); }},
    // DCGM fills this field (its NVLINK_THROUGHPUT_TOTAL, unit MB/s) with the rate of the links' data counters,
    // sent and received, over its last interval: a rate under dcgm-exporter's "counter" type, which a drop-in
    // keeps. GPM gives the same rate; gpudoctor's own counter is gpudoctor_gpu_nvlink_traffic_bytes_total.
    {{"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes."},
     [](const GpuSnapshot& g) -> std::optional<double> {
       if (!g.gpm_nvlink_tx_bytes_per_second.has_value() || !g.gpm_nvlink_rx_bytes_per_second.has_value()) {
         return std::nullopt;
       }
       return std::floor((g.gpm_nvlink_tx_bytes_per_second.value() + g.gpm_nvlink_rx_bytes_per_second.value()) /
                         (1024.0 * 1024.0));
     }},
    // DCGM's profiling fields, from GPM: ratios (0-1) and bytes per second, as DCGM gives them.
    {{"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."},
     [](const GpuSnapshot& g) { return Number(g.gpm_graphics_active); }},
    {{"DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned."},
     [](const GpuSnapshot& g) { return Number(g.gpm_sm_active); }},
    {{"DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "The ratio of number of warps resident on an SM."},
     [](const GpuSnapshot& g) { return Number(g.gpm_sm_occupancy); }},
    {{"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."},
     [](const GpuSnapshot& g) { return Number(g.gpm_tensor_active); }},
    {{"DCGM_FI_PROF_PIPE_FP64_ACTIVE", "gauge", "Ratio of cycles the fp64 pipes are active."},
     [](const GpuSnapshot& g) { return Number(g.gpm_fp64_active); }},
    {{"DCGM_FI_PROF_PIPE_FP32_ACTIVE", "gauge", "Ratio of cycles the fp32 pipes are active."},
     [](const GpuSnapshot& g) { return Number(g.gpm_fp32_active); }},
    {{"DCGM_FI_PROF_PIPE_FP16_ACTIVE", "gauge", "Ratio of cycles the fp16 pipes are active."},
     [](const GpuSnapshot& g) { return Number(g.gpm_fp16_active); }},
    {{"DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
      "Ratio of cycles the device memory interface is active sending or receiving data."},
     [](const GpuSnapshot& g) { return Number(g.gpm_dram_active); }},
    {{"DCGM_FI_PROF_PCIE_TX_BYTES", "gauge",
      "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in "
      "bytes per second."},
     [](const GpuSnapshot& g) { return Number(g.gpm_pcie_tx_bytes_per_second); }},
    {{"DCGM_FI_PROF_PCIE_RX_BYTES", "gauge",
      "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in "
      "bytes per second."},
     [](const GpuSnapshot& g) { return Number(g.gpm_pcie_rx_bytes_per_second); }},
    {{"DCGM_FI_PROF_NVLINK_TX_BYTES", "gauge",
      "The rate of data transmitted over NVLink, not including protocol headers, in bytes per second."},
     [](const GpuSnapshot& g) { return Number(g.gpm_nvlink_tx_bytes_per_second); }},
    {{"DCGM_FI_PROF_NVLINK_RX_BYTES", "gauge",
      "The rate of data received over NVLink, not including protocol headers, in bytes per second."},
     [](const GpuSnapshot& g) { return Number(g.gpm_nvlink_rx_bytes_per_second); }},
};

// Families with labels beyond the GPU's, or not read from the snapshot.
constexpr Family kUp{"gpudoctor_up", "gauge",
                     "1 while the latest sample is fresh; 0 when sampling has stalled."};
constexpr Family kNvmlUp{"gpudoctor_nvml_up", "gauge",
                         "1 when the latest sample could reach the NVIDIA driver."};
constexpr Family kBuildInfo{"gpudoctor_build_info", "gauge",
                            "The agent's version and build: commit, build date, compiler, build type, diag kernels."};
constexpr Family kStartTime{"gpudoctor_start_time_seconds", "gauge",
                            "When the agent started, in seconds since the Unix epoch."};
constexpr Family kLastSample{"gpudoctor_last_sample_timestamp_seconds", "gauge",
                             "When the latest sample was taken, in seconds since the Unix epoch."};
constexpr Family kSampleAge{"gpudoctor_sample_age_seconds", "gauge",
                            "Age of the latest sample at scrape time."};
constexpr Family kSamples{"gpudoctor_samples_total", "counter", "Samples taken since start."};
constexpr Family kProbeHangs{"gpudoctor_probe_hangs_total", "counter",
                             "NVML probes that missed their deadline (driver hangs)."};
constexpr Family kGpus{"gpudoctor_gpus", "gauge", "GPUs in the latest sample."};
constexpr Family kStoreOk{"gpudoctor_store_ok", "gauge",
                          "1 while the history database takes every write, 0 while it fails."};
constexpr Family kStoreErrors{"gpudoctor_store_errors_total", "counter",
                              "Failed history database operations since start."};
constexpr Family kStoreQueued{"gpudoctor_store_queued", "gauge",
                              "Writes waiting in memory for the history database."};
constexpr Family kStoreDropped{"gpudoctor_store_dropped_total", "counter",
                               "Writes lost because they waited longer than the queue holds."};
constexpr Family kFinding{"gpudoctor_finding", "gauge", "1 for each open finding."};
constexpr Family kFindingsOpen{"gpudoctor_findings_open", "gauge", "Open findings by severity."};
constexpr Family kChecklistItem{"gpudoctor_checklist_item", "gauge",
                                "1 for each weekly checklist item, with its state: ok, warning, critical, unknown, or "
                                "unchecked when none of its rules had anything to judge (reason says why)."};
constexpr Family kAlertsDelivered{"gpudoctor_alerts_delivered_total", "counter",
                                  "Alerts delivered, by sink."};
constexpr Family kAlertsFailed{"gpudoctor_alerts_failed_total", "counter",
                               "Alerts a sink failed to deliver after its retries."};
constexpr Family kAlertsQueued{"gpudoctor_alerts_queued", "gauge",
                               "Alerts waiting behind the one a sink is delivering."};
constexpr Family kAlertsDeliveringSince{"gpudoctor_alerts_delivering_since_timestamp_seconds", "gauge",
                                        "When the delivery under way (with its retries) began; 0 when idle. "
                                        "time() minus this is how long a sink has been stuck."};
constexpr Family kAlertsSuppressed{"gpudoctor_alerts_suppressed_total", "counter",
                                   "Alerts held back by the per-finding rate limit."};
constexpr Family kAlertsDropped{"gpudoctor_alerts_dropped_total", "counter",
                                "Alerts lost because the delivery queue was full."};
constexpr Family kAlertsGrouped{"gpudoctor_alerts_grouped_total", "counter",
                                "Findings never alerted on their own: part of a root-cause finding that was."};
constexpr Family kGpuInfo{"gpudoctor_gpu_info", "gauge",
                          "Identity of each GPU and the slot it sits in; always 1. Join on gpu or uuid."};
constexpr Family kHostInfo{"gpudoctor_host_info", "gauge",
                           "Identity of the machine (board and chassis serials from DMI, empty when unreadable); "
                           "always 1."};
constexpr Family kGpuAccessible{"gpudoctor_gpu_accessible", "gauge",
                                "1 when the GPU could be read; 0 when it is lost or hung."};
constexpr Family kFanSpeed{"gpudoctor_gpu_fan_speed_ratio", "gauge",
                           "Fan speed as a fraction of its maximum (0-1)."};
constexpr Family kEccErrors{"gpudoctor_gpu_ecc_errors_total", "counter",
                            "ECC errors; scope volatile counts since the driver loaded."};
constexpr Family kRetiredPages{"gpudoctor_gpu_retired_pages", "gauge", "Retired memory pages."};
constexpr Family kRemappedRows{"gpudoctor_gpu_remapped_rows", "gauge", "Remapped memory rows."};
constexpr Family kClockEvent{"gpudoctor_gpu_clock_event_active", "gauge",
                             "1 while the named reason holds the clocks down."};
constexpr Family kNvLinkActive{"gpudoctor_gpu_nvlink_active_links", "gauge", "NVLink links that are up."};
constexpr Family kNvLinkErrors{"gpudoctor_gpu_nvlink_errors_total", "counter",
                               "NVLink errors by kind, summed over the links (per-link counts are in the "
                               "JSON snapshot)."};
constexpr Family kXidErrors{"gpudoctor_gpu_xid_errors_total", "counter",
                            "Xid errors seen since the agent started."};
constexpr Family kLastXid{"gpudoctor_gpu_last_xid_code", "gauge", "Code of the most recent Xid error."};
constexpr Family kDcgmXid{"DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."};

constexpr std::array kClockEventBits{
    clock_event::kGpuIdle,
    clock_event::kApplicationsClocksSetting,
    clock_event::kSwPowerCap,
    clock_event::kHwSlowdown,
    clock_event::kSyncBoost,
    clock_event::kSwThermalSlowdown,
    clock_event::kHwThermalSlowdown,
    clock_event::kHwPowerBrakeSlowdown,
    clock_event::kDisplayClockSetting,
};

// An identity field as read, or, for a GPU that no longer answers, as it was
// last seen: the series of a lost GPU keep naming the same card and slot.
std::string Identity(const Field<std::string>& field, std::string KnownGpuIdentity::*known, const GpuSnapshot& gpu) {
  if (field.has_value()) return field.value();
  return gpu.last_known ? (*gpu.last_known).*known : std::string();
}

std::string_view FieldText(const Field<std::string>& field) {
  return field.has_value() ? std::string_view(field.value()) : std::string_view();
}

double Seconds(WallTime time) { return std::chrono::duration<double>(time.time_since_epoch()).count(); }

class Renderer {
 public:
  Renderer(const MetricsInput& input, const MetricsOptions& options, std::string& out)
      : input_(input), options_(options), out_(out) {
    const Snapshot* snapshot = input.snapshot;
    const auto& last = input.status.last_sample_at;
    fresh_ = snapshot && last && input.now - *last <= options.stale_after;
    hostname_ = snapshot ? snapshot->hostname : std::string();
    if (!snapshot) return;
    // dcgm-exporter puts the driver version on every series as a label.
    const std::string_view driver = FieldText(snapshot->driver_version);
    for (const GpuSnapshot& gpu : snapshot->gpus) {
      const std::string index = std::to_string(gpu.index);
      const std::string pci = Identity(gpu.pci_bus_id, &KnownGpuIdentity::pci_bus_id, gpu);
      const std::string uuid = Identity(gpu.uuid, &KnownGpuIdentity::uuid, gpu);
      gpu_labels_.push_back(
          FormatLabels({{"gpu", index}, {"uuid", uuid}, {"pci_bus_id", pci}, {"hostname", hostname_}}));
      std::string dcgm = FormatLabels({{"gpu", index},
                                       {"UUID", uuid},
                                       {"pci_bus_id", NvmlStylePciBusId(pci)},
                                       {"device", "nvidia" + index},
                                       {"modelName", Identity(gpu.name, &KnownGpuIdentity::name, gpu)},
                                       {options.dcgm_hostname_label, hostname_}});
      if (!driver.empty()) {
        dcgm += ',';
        AppendLabel(dcgm, {"DCGM_FI_DRIVER_VERSION", driver});
      }
      dcgm_labels_.push_back(std::move(dcgm));
    }
  }

  void Render() {
    RenderAgent();
    RenderFindings();
    RenderChecklist();
    RenderAlerts();
    if (input_.snapshot) RenderGpuIdentity();
    if (fresh_) {
      for (const GpuReading& reading : kGpuReadings) RenderReading(reading, gpu_labels_);
      RenderGpuLabelled();
    }
    RenderXids();
    if (fresh_ && options_.dcgm_compatible) {
      for (const GpuReading& reading : kDcgmReadings) RenderReading(reading, dcgm_labels_);
    }
  }

 private:
  const std::vector<GpuSnapshot>& Gpus() const { return input_.snapshot->gpus; }
  static bool Readable(const GpuSnapshot& gpu) { return gpu.access_error == AccessError::kNone; }

  void RenderAgent() {
    const AgentStatus& status = input_.status;
    out_.Begin(kUp);
    out_.Sample(fresh_ ? 1 : 0);
    if (!options_.version.empty()) {
      std::string labels;
      AppendLabel(labels, {"version", options_.version});
      for (const auto& [name, value] : options_.build_labels) {
        if (name == "version") continue;
        labels += ',';
        AppendLabel(labels, {name, value});
      }
      out_.Begin(kBuildInfo);
      out_.Sample(labels, 1);
    }
    out_.Begin(kStartTime);
    out_.Sample(Seconds(status.started_at));
    if (input_.snapshot) {
      const MachineIdentity& machine = options_.machine;
      out_.Begin(kHostInfo);
      out_.Sample({},
                  {{"hostname", hostname_},
                   {"board_serial", machine.board_serial},
                   {"chassis_serial", machine.chassis_serial},
                   {"product", machine.product_name}},
                  1);
    }
    if (status.last_sample_at) {
      out_.Begin(kLastSample);
      out_.Sample(Seconds(*status.last_sample_at));
      out_.Begin(kSampleAge);
      out_.Sample(std::max(0.0, std::chrono::duration<double>(input_.now - *status.last_sample_at).count()));
    }
    out_.Begin(kSamples);
    out_.Sample(static_cast<double>(status.samples_total));
    out_.Begin(kProbeHangs);
    out_.Sample(static_cast<double>(status.probe_hangs_total));
    if (status.store) {
      out_.Begin(kStoreOk);
      out_.Sample(status.store->ok ? 1 : 0);
      out_.Begin(kStoreErrors);
      out_.Sample(static_cast<double>(status.store->errors_total));
      out_.Begin(kStoreQueued);
      out_.Sample(static_cast<double>(status.store->queued));
      out_.Begin(kStoreDropped);
      out_.Sample(static_cast<double>(status.store->dropped_total));
    }
    if (fresh_) {
      out_.Begin(kNvmlUp);
      out_.Sample(input_.snapshot->driver_error == AccessError::kNone ? 1 : 0);
      out_.Begin(kGpus);
      out_.Sample(static_cast<double>(Gpus().size()));
    }
  }

  void RenderFindings() {
    out_.Begin(kFinding);
    std::set<std::string> seen;  // one series per label set, as Prometheus requires
    for (const StoredFinding& open : input_.findings) {
      const Finding& f = open.finding;
      std::string gpu = f.gpu && f.gpu->index ? std::to_string(*f.gpu->index) : std::string();
      // `subject` tells apart findings one rule raises for several things
      // (two stalled training jobs); "" for the rest, as `gpu` is for host-wide ones.
      // `part_of` names the root-cause finding's key; alert rules page on part_of="" alone.
      std::string labels = FormatLabels({{"id", f.id},
                                         {"severity", SeverityName(f.severity)},
                                         {"gpu", gpu},
                                         {"subject", f.subject},
                                         {"part_of", f.part_of},
                                         {"hostname", hostname_}});
      if (seen.insert(labels).second) out_.Sample(labels, 1);
    }
    out_.Begin(kFindingsOpen);
    for (Severity severity : {Severity::kCritical, Severity::kWarning, Severity::kUnknown}) {
      auto count = std::count_if(input_.findings.begin(), input_.findings.end(),
                                 [&](const StoredFinding& f) { return f.finding.severity == severity; });
      out_.Sample({}, {{"severity", SeverityName(severity)}}, static_cast<double>(count));
    }
  }

  // One series per item: an item's series changes with its state, as a finding's does.
  void RenderChecklist() {
    out_.Begin(kChecklistItem);
    std::set<std::string> seen;
    for (const ChecklistItem& item : input_.checklist) {
      std::string labels = FormatLabels({{"item", item.title},
                                         {"state", ChecklistStateName(item)},
                                         {"reason", item.checked ? std::string_view() : item.unchecked_reason},
                                         {"hostname", hostname_}});
      if (seen.insert(labels).second) out_.Sample(labels, 1);
    }
  }

  void RenderAlerts() {
    const AlertCounters* alerts = input_.alerts;
    if (!alerts) return;
    out_.Begin(kAlertsDelivered);
    for (const auto& sink : alerts->sinks) {
      out_.Sample({}, {{"sink", sink.name}}, static_cast<double>(sink.delivered));
    }
    out_.Begin(kAlertsFailed);
    for (const auto& sink : alerts->sinks) {
      out_.Sample({}, {{"sink", sink.name}}, static_cast<double>(sink.failed));
    }
    out_.Begin(kAlertsQueued);
    for (const auto& sink : alerts->sinks) {
      out_.Sample({}, {{"sink", sink.name}}, static_cast<double>(sink.queued));
    }
    out_.Begin(kAlertsDeliveringSince);
    for (const auto& sink : alerts->sinks) {
      const double since = sink.delivering_since
                               ? std::chrono::duration<double>(sink.delivering_since->time_since_epoch()).count()
                               : 0.0;
      out_.Sample({}, {{"sink", sink.name}}, since);
    }
    out_.Begin(kAlertsSuppressed);
    out_.Sample(static_cast<double>(alerts->suppressed));
    out_.Begin(kAlertsDropped);
    out_.Sample(static_cast<double>(alerts->dropped));
    out_.Begin(kAlertsGrouped);
    out_.Sample(static_cast<double>(alerts->grouped));
  }

  // Identity and reachability stay visible while stale: they name the GPUs
  // that gpudoctor_up == 0 is about.
  void RenderGpuIdentity() {
    out_.Begin(kGpuInfo);
    for (size_t i = 0; i < Gpus().size(); ++i) {
      const GpuSnapshot& gpu = Gpus()[i];
      out_.Sample(gpu_labels_[i],
                  {{"name", Identity(gpu.name, &KnownGpuIdentity::name, gpu)},
                   {"serial", Identity(gpu.serial, &KnownGpuIdentity::serial, gpu)},
                   {"slot", options_.machine.SlotOf(Identity(gpu.pci_bus_id, &KnownGpuIdentity::pci_bus_id, gpu))},
                   {"identity", IdentityKnowledgeName(IdentityKnowledgeOf(gpu))},
                   {"vbios_version", FieldText(gpu.vbios_version)},
                   {"driver_version", FieldText(input_.snapshot->driver_version)}},
                  1);
    }
    if (!fresh_) return;
    out_.Begin(kGpuAccessible);
    for (size_t i = 0; i < Gpus().size(); ++i) {
      out_.Sample(gpu_labels_[i], Readable(Gpus()[i]) ? 1 : 0);
    }
  }

  void RenderReading(const GpuReading& reading, const std::vector<std::string>& labels) {
    out_.Begin(reading.family);
    for (size_t i = 0; i < Gpus().size(); ++i) {
      if (!Readable(Gpus()[i])) continue;
      if (std::optional<double> value = reading.read(Gpus()[i])) out_.Sample(labels[i], *value);
    }
  }

  // Calls `emit(gpu, labels)` for each readable GPU under `family`.
  template <typename Emit>
  void ForEachReadableGpu(const Family& family, Emit emit) {
    out_.Begin(family);
    for (size_t i = 0; i < Gpus().size(); ++i) {
      if (Readable(Gpus()[i])) emit(Gpus()[i], std::string_view(gpu_labels_[i]));
    }
  }

  void RenderGpuLabelled() {
    ForEachReadableGpu(kFanSpeed, [&](const GpuSnapshot& gpu, std::string_view labels) {
      if (!gpu.fan_speeds_percent.has_value()) return;
      const auto& fans = gpu.fan_speeds_percent.value();
      for (size_t fan = 0; fan < fans.size(); ++fan) {
        out_.Sample(labels, {{"fan", std::to_string(fan)}}, fans[fan] / 100.0);
      }
    });
    ForEachReadableGpu(kEccErrors, [&](const GpuSnapshot& gpu, std::string_view labels) {
      auto put = [&](const Field<uint64_t>& field, std::string_view type, std::string_view scope) {
        if (field.has_value()) {
          out_.Sample(labels, {{"type", type}, {"scope", scope}}, static_cast<double>(field.value()));
        }
      };
      put(gpu.ecc_volatile_corrected, "corrected", "volatile");
      put(gpu.ecc_volatile_uncorrected, "uncorrected", "volatile");
      put(gpu.ecc_aggregate_corrected, "corrected", "aggregate");
      put(gpu.ecc_aggregate_uncorrected, "uncorrected", "aggregate");
    });
    ForEachReadableGpu(kRetiredPages, [&](const GpuSnapshot& gpu, std::string_view labels) {
      if (gpu.retired_pages_sbe.has_value()) {
        out_.Sample(labels, {{"cause", "single_bit_ecc"}}, gpu.retired_pages_sbe.value());
      }
      if (gpu.retired_pages_dbe.has_value()) {
        out_.Sample(labels, {{"cause", "double_bit_ecc"}}, gpu.retired_pages_dbe.value());
      }
    });
    ForEachReadableGpu(kRemappedRows, [&](const GpuSnapshot& gpu, std::string_view labels) {
      if (gpu.remapped_rows_correctable.has_value()) {
        out_.Sample(labels, {{"type", "correctable"}}, gpu.remapped_rows_correctable.value());
      }
      if (gpu.remapped_rows_uncorrectable.has_value()) {
        out_.Sample(labels, {{"type", "uncorrectable"}}, gpu.remapped_rows_uncorrectable.value());
      }
    });
    ForEachReadableGpu(kClockEvent, [&](const GpuSnapshot& gpu, std::string_view labels) {
      if (!gpu.clock_event_reasons.has_value()) return;
      for (uint64_t bit : kClockEventBits) {
        const std::vector<std::string> name = DecodeClockEventReasons(bit);
        if (name.size() != 1) continue;
        out_.Sample(labels, {{"reason", name.front()}}, (gpu.clock_event_reasons.value() & bit) ? 1 : 0);
      }
    });
    // Summed over links: 18 links x 4 kinds per GPU would multiply the series
    // for little gain; findings name the failing link.
    ForEachReadableGpu(kNvLinkActive, [&](const GpuSnapshot& gpu, std::string_view labels) {
      if (!gpu.nvlinks.has_value()) return;
      std::optional<double> active;
      for (const NvLinkInfo& link : gpu.nvlinks.value()) {
        if (link.active.has_value()) active = active.value_or(0) + (link.active.value() ? 1 : 0);
      }
      if (active) out_.Sample(labels, *active);
    });
    ForEachReadableGpu(kNvLinkErrors, [&](const GpuSnapshot& gpu, std::string_view labels) {
      for (const auto& [type, counter] : {std::pair{"replay", &NvLinkInfo::replay_errors},
                                          std::pair{"recovery", &NvLinkInfo::recovery_errors},
                                          std::pair{"crc_flit", &NvLinkInfo::crc_flit_errors},
                                          std::pair{"crc_data", &NvLinkInfo::crc_data_errors}}) {
        if (std::optional<double> total = NvLinkTotal(gpu, counter))
          out_.Sample(labels, {{"type", type}}, *total);
      }
    });
  }

  // Xid tallies are the agent's own counts, so they stay while stale. Every
  // GPU's counter is written from the start, at 0 until its first Xid: a
  // series that first appears at 1 has no earlier sample, so increase() and
  // rate() would miss the first Xid (the Prometheus convention for counters
  // whose labels are known). The last code is written only once there is
  // one, except under dcgm-exporter's name, which writes 0 for "none yet".
  void RenderXids() {
    const std::vector<GpuXidTally>& xids = input_.status.xids;
    const size_t gpus = input_.snapshot ? Gpus().size() : 0;
    if (xids.empty() && gpus == 0) return;
    auto tally_at = [&](uint32_t index) -> const GpuXidTally* {
      for (const GpuXidTally& t : xids)
        if (t.gpu_index == index) return &t;
      return nullptr;
    };
    auto in_snapshot = [&](uint32_t index) {
      for (size_t i = 0; i < gpus; ++i)
        if (Gpus()[i].index == index) return true;
      return false;
    };
    auto labels_for = [&](uint32_t index, bool dcgm) {
      const std::string_view host_label = dcgm ? std::string_view(options_.dcgm_hostname_label) : "hostname";
      return FormatLabels({{"gpu", std::to_string(index)}, {host_label, hostname_}});
    };
    // Each GPU the snapshot lists, then any GPU with a tally that it does not.
    auto each = [&](const std::vector<std::string>& labels, bool dcgm, auto&& value) {
      for (size_t i = 0; i < gpus; ++i) {
        if (auto v = value(tally_at(Gpus()[i].index))) out_.Sample(labels[i], *v);
      }
      for (const GpuXidTally& t : xids) {
        if (in_snapshot(t.gpu_index)) continue;
        if (auto v = value(&t)) out_.Sample(labels_for(t.gpu_index, dcgm), *v);
      }
    };
    out_.Begin(kXidErrors);
    each(gpu_labels_, false, [](const GpuXidTally* t) { return std::optional<double>(t ? t->count : 0); });
    if (!xids.empty()) {
      out_.Begin(kLastXid);
      each(gpu_labels_, false, [](const GpuXidTally* t) {
        return t ? std::optional<double>(static_cast<double>(t->last_xid)) : std::nullopt;
      });
    }
    if (!options_.dcgm_compatible) return;
    out_.Begin(kDcgmXid);
    each(dcgm_labels_, true,
         [](const GpuXidTally* t) { return std::optional<double>(t ? static_cast<double>(t->last_xid) : 0.0); });
  }

  const MetricsInput& input_;
  const MetricsOptions& options_;
  Exposition out_;
  bool fresh_ = false;
  std::string hostname_;
  std::vector<std::string> gpu_labels_;   // by position in snapshot->gpus
  std::vector<std::string> dcgm_labels_;  // likewise
};

}  // namespace

std::string RenderPrometheusMetrics(const MetricsInput& input, const MetricsOptions& options) {
  // Room for a typical scrape up front: regrowing a 100 KB string costs more
  // than writing it. With GPM, 8 H100s take about 86 KB, 171 KB with the dcgm names.
  const size_t gpus = input.snapshot ? input.snapshot->gpus.size() : 0;
  std::string out;
  out.reserve(8 * 1024 + gpus * (options.dcgm_compatible ? 22 * 1024 : 11 * 1024));
  Renderer(input, options, out).Render();
  return out;
}

std::vector<std::string_view> MetricFamilyNames() {
  std::vector<std::string_view> names;
  for (const Family* f :
       {&kUp, &kNvmlUp, &kBuildInfo, &kStartTime, &kLastSample, &kSampleAge, &kSamples, &kProbeHangs, &kGpus,
        &kFinding, &kFindingsOpen, &kChecklistItem, &kAlertsDelivered, &kAlertsFailed, &kAlertsQueued,
        &kAlertsDeliveringSince, &kAlertsSuppressed, &kAlertsDropped, &kAlertsGrouped, &kHostInfo, &kGpuInfo,
        &kGpuAccessible, &kFanSpeed, &kEccErrors, &kRetiredPages, &kRemappedRows, &kClockEvent, &kNvLinkActive,
        &kNvLinkErrors, &kXidErrors, &kLastXid, &kDcgmXid, &kStoreOk, &kStoreErrors, &kStoreQueued,
        &kStoreDropped}) {
    names.push_back(f->name);
  }
  for (const GpuReading& r : kGpuReadings) names.push_back(r.family.name);
  for (const GpuReading& r : kDcgmReadings) names.push_back(r.family.name);
  return names;
}

std::string NvmlStylePciBusId(std::string_view canonical) {
  // canonical: "dddd:bb:dd.f"; anything else is passed through unchanged.
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  char tail = 0;
  const std::string text(canonical);
  if (std::sscanf(text.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &device, &function, &tail) != 4) {
    return text;
  }
  return fmt::format("{:08X}:{:02X}:{:02X}.{:X}", domain, bus, device, function);
}

}  // namespace gpudoctor
