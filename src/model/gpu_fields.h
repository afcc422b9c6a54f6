// The list of a GPU's scalar fields, in one place, so every piece of code that
// walks all fields (JSON in both directions, marking a GPU unreadable) stays
// in step with the model.
//
//   VisitScalarGpuFields(visitor, gpu);  // visitor(const char* key, Field<T>& field)
#pragma once

#include "model/snapshot.h"

namespace gpudoctor {

template <typename Io, typename Gpu>
void VisitScalarGpuFields(Io& io, Gpu& g) {
  io("name", g.name);
  io("uuid", g.uuid);
  io("serial", g.serial);
  io("board_part_number", g.board_part_number);
  io("vbios_version", g.vbios_version);
  io("persistence_mode", g.persistence_mode);
  io("pci_bus_id", g.pci_bus_id);
  io("pcie_generation_current", g.pcie_generation_current);
  io("pcie_generation_max", g.pcie_generation_max);
  io("pcie_width_current", g.pcie_width_current);
  io("pcie_width_max", g.pcie_width_max);
  io("pcie_replay_count", g.pcie_replay_count);
  io("temperature_c", g.temperature_c);
  io("memory_temperature_c", g.memory_temperature_c);
  io("temperature_slowdown_c", g.temperature_slowdown_c);
  io("temperature_shutdown_c", g.temperature_shutdown_c);
  io("temperature_max_operating_c", g.temperature_max_operating_c);
  io("fan_speeds_percent", g.fan_speeds_percent);
  io("power_draw_w", g.power_draw_w);
  io("power_limit_w", g.power_limit_w);
  io("power_default_limit_w", g.power_default_limit_w);
  io("sm_clock_mhz", g.sm_clock_mhz);
  io("memory_clock_mhz", g.memory_clock_mhz);
  io("clock_event_reasons", g.clock_event_reasons);
  io("utilization_gpu_percent", g.utilization_gpu_percent);
  io("utilization_memory_percent", g.utilization_memory_percent);
  io("memory_total_bytes", g.memory_total_bytes);
  io("memory_used_bytes", g.memory_used_bytes);
  io("memory_free_bytes", g.memory_free_bytes);
  io("ecc_enabled", g.ecc_enabled);
  io("ecc_volatile_corrected", g.ecc_volatile_corrected);
  io("ecc_volatile_uncorrected", g.ecc_volatile_uncorrected);
  io("ecc_aggregate_corrected", g.ecc_aggregate_corrected);
  io("ecc_aggregate_uncorrected", g.ecc_aggregate_uncorrected);
  io("retired_pages_sbe", g.retired_pages_sbe);
  io("retired_pages_dbe", g.retired_pages_dbe);
  io("retired_pages_pending", g.retired_pages_pending);
  io("remapped_rows_correctable", g.remapped_rows_correctable);
  io("remapped_rows_uncorrectable", g.remapped_rows_uncorrectable);
  io("remapped_rows_pending", g.remapped_rows_pending);
  io("remapped_rows_failure", g.remapped_rows_failure);
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
