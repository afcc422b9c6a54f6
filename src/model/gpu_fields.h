// The list of a GPU's scalar fields, in one place, so every piece of code that
// walks all fields (JSON in both directions, the probe's wire format, marking
// a GPU unreadable) stays in step with the model.
//
//   VisitScalarGpuFields(visitor, gpu);  // visitor(const char* key, Field<T>& field)
//   constexpr size_t i = ScalarGpuFieldIndex<&GpuSnapshot::temperature_c>();  // its position
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "model/snapshot.h"

namespace gpudoctor {

// One scalar field: its stable key and where it lives in a GpuSnapshot.
template <typename Member>
struct ScalarGpuField {
  const char* key;
  Member member;
};
template <typename Member>
ScalarGpuField(const char*, Member) -> ScalarGpuField<Member>;

inline constexpr std::tuple kScalarGpuFields = {
    ScalarGpuField{"name", &GpuSnapshot::name},
    ScalarGpuField{"uuid", &GpuSnapshot::uuid},
    ScalarGpuField{"serial", &GpuSnapshot::serial},
    ScalarGpuField{"board_part_number", &GpuSnapshot::board_part_number},
    ScalarGpuField{"vbios_version", &GpuSnapshot::vbios_version},
    ScalarGpuField{"persistence_mode", &GpuSnapshot::persistence_mode},
    ScalarGpuField{"inforom_valid", &GpuSnapshot::inforom_valid},
    ScalarGpuField{"pci_bus_id", &GpuSnapshot::pci_bus_id},
    ScalarGpuField{"pcie_generation_current", &GpuSnapshot::pcie_generation_current},
    ScalarGpuField{"pcie_generation_max", &GpuSnapshot::pcie_generation_max},
    ScalarGpuField{"pcie_width_current", &GpuSnapshot::pcie_width_current},
    ScalarGpuField{"pcie_width_max", &GpuSnapshot::pcie_width_max},
    ScalarGpuField{"pcie_replay_count", &GpuSnapshot::pcie_replay_count},
    ScalarGpuField{"temperature_c", &GpuSnapshot::temperature_c},
    ScalarGpuField{"memory_temperature_c", &GpuSnapshot::memory_temperature_c},
    ScalarGpuField{"temperature_slowdown_c", &GpuSnapshot::temperature_slowdown_c},
    ScalarGpuField{"temperature_shutdown_c", &GpuSnapshot::temperature_shutdown_c},
    ScalarGpuField{"temperature_max_operating_c", &GpuSnapshot::temperature_max_operating_c},
    ScalarGpuField{"memory_temperature_max_c", &GpuSnapshot::memory_temperature_max_c},
    ScalarGpuField{"fan_speeds_percent", &GpuSnapshot::fan_speeds_percent},
    ScalarGpuField{"power_draw_w", &GpuSnapshot::power_draw_w},
    ScalarGpuField{"power_limit_w", &GpuSnapshot::power_limit_w},
    ScalarGpuField{"power_default_limit_w", &GpuSnapshot::power_default_limit_w},
    ScalarGpuField{"total_energy_mj", &GpuSnapshot::total_energy_mj},
    ScalarGpuField{"sm_clock_mhz", &GpuSnapshot::sm_clock_mhz},
    ScalarGpuField{"memory_clock_mhz", &GpuSnapshot::memory_clock_mhz},
    ScalarGpuField{"clock_event_reasons", &GpuSnapshot::clock_event_reasons},
    ScalarGpuField{"utilization_gpu_percent", &GpuSnapshot::utilization_gpu_percent},
    ScalarGpuField{"utilization_memory_percent", &GpuSnapshot::utilization_memory_percent},
    ScalarGpuField{"encoder_utilization_percent", &GpuSnapshot::encoder_utilization_percent},
    ScalarGpuField{"decoder_utilization_percent", &GpuSnapshot::decoder_utilization_percent},
    ScalarGpuField{"memory_total_bytes", &GpuSnapshot::memory_total_bytes},
    ScalarGpuField{"memory_used_bytes", &GpuSnapshot::memory_used_bytes},
    ScalarGpuField{"memory_free_bytes", &GpuSnapshot::memory_free_bytes},
    ScalarGpuField{"memory_reserved_bytes", &GpuSnapshot::memory_reserved_bytes},
    ScalarGpuField{"ecc_enabled", &GpuSnapshot::ecc_enabled},
    ScalarGpuField{"ecc_volatile_corrected", &GpuSnapshot::ecc_volatile_corrected},
    ScalarGpuField{"ecc_volatile_uncorrected", &GpuSnapshot::ecc_volatile_uncorrected},
    ScalarGpuField{"ecc_aggregate_corrected", &GpuSnapshot::ecc_aggregate_corrected},
    ScalarGpuField{"ecc_aggregate_uncorrected", &GpuSnapshot::ecc_aggregate_uncorrected},
    ScalarGpuField{"retired_pages_sbe", &GpuSnapshot::retired_pages_sbe},
    ScalarGpuField{"retired_pages_dbe", &GpuSnapshot::retired_pages_dbe},
    ScalarGpuField{"retired_pages_pending", &GpuSnapshot::retired_pages_pending},
    ScalarGpuField{"remapped_rows_correctable", &GpuSnapshot::remapped_rows_correctable},
    ScalarGpuField{"remapped_rows_uncorrectable", &GpuSnapshot::remapped_rows_uncorrectable},
    ScalarGpuField{"remapped_rows_pending", &GpuSnapshot::remapped_rows_pending},
    ScalarGpuField{"remapped_rows_failure", &GpuSnapshot::remapped_rows_failure},
    ScalarGpuField{"fabric_state", &GpuSnapshot::fabric_state},
    ScalarGpuField{"fabric_status", &GpuSnapshot::fabric_status},
    ScalarGpuField{"fabric_clique_id", &GpuSnapshot::fabric_clique_id},
    ScalarGpuField{"fabric_cluster_uuid", &GpuSnapshot::fabric_cluster_uuid},
    ScalarGpuField{"fabric_health_mask", &GpuSnapshot::fabric_health_mask},
    ScalarGpuField{"gpm_supported", &GpuSnapshot::gpm_supported},
    ScalarGpuField{"gpm_graphics_active", &GpuSnapshot::gpm_graphics_active},
    ScalarGpuField{"gpm_sm_active", &GpuSnapshot::gpm_sm_active},
    ScalarGpuField{"gpm_sm_occupancy", &GpuSnapshot::gpm_sm_occupancy},
    ScalarGpuField{"gpm_tensor_active", &GpuSnapshot::gpm_tensor_active},
    ScalarGpuField{"gpm_fp64_active", &GpuSnapshot::gpm_fp64_active},
    ScalarGpuField{"gpm_fp32_active", &GpuSnapshot::gpm_fp32_active},
    ScalarGpuField{"gpm_fp16_active", &GpuSnapshot::gpm_fp16_active},
    ScalarGpuField{"gpm_dram_active", &GpuSnapshot::gpm_dram_active},
    ScalarGpuField{"gpm_pcie_tx_bytes_per_second", &GpuSnapshot::gpm_pcie_tx_bytes_per_second},
    ScalarGpuField{"gpm_pcie_rx_bytes_per_second", &GpuSnapshot::gpm_pcie_rx_bytes_per_second},
    ScalarGpuField{"gpm_nvlink_tx_bytes_per_second", &GpuSnapshot::gpm_nvlink_tx_bytes_per_second},
    ScalarGpuField{"gpm_nvlink_rx_bytes_per_second", &GpuSnapshot::gpm_nvlink_rx_bytes_per_second},
    ScalarGpuField{"gpm_nvlink_bytes_total", &GpuSnapshot::gpm_nvlink_bytes_total},
};
inline constexpr size_t kScalarGpuFieldCount = std::tuple_size_v<std::remove_const_t<decltype(kScalarGpuFields)>>;

template <typename Io, typename Gpu>
void VisitScalarGpuFields(Io& io, Gpu& g) {
  std::apply([&](const auto&... field) { (io(field.key, g.*(field.member)), ...); }, kScalarGpuFields);
}

// The position of a field in kScalarGpuFields, found at compile time: a
// member that is not a scalar field does not compile.
template <auto Member>
consteval size_t ScalarGpuFieldIndex() {
  size_t found = kScalarGpuFieldCount;
  [&]<size_t... I>(std::index_sequence<I...>) {
    auto match = [&](size_t index, auto member) {
      if constexpr (std::is_same_v<decltype(member), decltype(Member)>) {
        if (member == Member) found = index;
      }
    };
    (match(I, std::get<I>(kScalarGpuFields).member), ...);
  }(std::make_index_sequence<kScalarGpuFieldCount>());
  if (found == kScalarGpuFieldCount) throw "not a scalar field of GpuSnapshot";
  return found;
}

template <typename Io, typename Link>
void VisitNvLinkFields(Io& io, Link& l) {
  io("active", l.active);
  io("replay_errors", l.replay_errors);
  io("recovery_errors", l.recovery_errors);
  io("crc_flit_errors", l.crc_flit_errors);
  io("crc_data_errors", l.crc_data_errors);
}

}  // namespace gpudoctor
