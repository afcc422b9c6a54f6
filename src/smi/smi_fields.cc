#include "smi/smi_fields.h"

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/text.h"
#include "smi/smi_values.h"

namespace gpudoctor::smi {
namespace {

// ---- How a reading is stored ------------------------------------------------

using Store = void (*)(GpuSnapshot& gpu, std::string_view value);

template <typename>
struct FieldValue;
template <typename T>
struct FieldValue<Field<T>> {
  using type = T;
};
// The T of the Field<T> that `member` points to.
template <auto member>
using ValueOf = typename FieldValue<std::remove_cvref_t<decltype(std::declval<GpuSnapshot&>().*member)>>::type;

template <auto member>
void Text(GpuSnapshot& gpu, std::string_view value) {
  gpu.*member = TextField(value);
}

template <auto member>
void Number(GpuSnapshot& gpu, std::string_view value) {
  gpu.*member = NumberField<ValueOf<member>>(value);
}

// A second spelling of a reading, used only when the first gave no value
// (instantaneous power where the average is N/A, for example).
template <auto member>
void NumberIfNoValue(GpuSnapshot& gpu, std::string_view value) {
  if (!(gpu.*member).has_value()) Number<member>(gpu, value);
}

template <auto member>
void Mebibytes(GpuSnapshot& gpu, std::string_view value) {
  gpu.*member = MebibytesField(value);
}

template <auto member>
void Flag(GpuSnapshot& gpu, std::string_view value) {
  gpu.*member = FlagField(value);
}

// Newer drivers split ECC counts by memory (SRAM, DRAM); the model holds
// their sum, as NVML's total does. A failed part makes the sum unknown; an
// N/A part adds nothing.
template <auto member>
void AddCount(GpuSnapshot& gpu, std::string_view value) {
  Field<uint64_t>& total = gpu.*member;
  Field<uint64_t> part = NumberField<uint64_t>(value);
  if (total.failed() || part.not_supported()) return;
  if (part.failed()) {
    total = part;
    return;
  }
  if (part.value() > UINT64_MAX - total.value_or(0)) {
    total = Field<uint64_t>::Failed("the error counts add up to more than 2^64");
    return;
  }
  total = Field<uint64_t>::Value(total.value_or(0) + part.value());
}

void BusId(GpuSnapshot& gpu, std::string_view value) { gpu.pci_bus_id = PciBusIdField(value); }

void FanSpeed(GpuSnapshot& gpu, std::string_view value) { gpu.fan_speeds_percent = FanSpeedField(value); }

// One "Active" / "Not Active" line of the clock event reasons.
template <uint64_t bit>
void ClockEventReason(GpuSnapshot& gpu, std::string_view value) {
  Field<uint64_t>& mask = gpu.clock_event_reasons;
  Field<bool> active = FlagField(value);
  if (mask.failed() || active.not_supported()) return;
  if (active.failed()) {
    mask = Field<uint64_t>::Failed(active.error());
    return;
  }
  mask = Field<uint64_t>::Value(mask.value_or(0) | (active.value() ? bit : 0));
}

void ClockEventMask(GpuSnapshot& gpu, std::string_view value) {
  Field<uint64_t> mask = HexMaskField(value);
  if (mask.has_value() && gpu.clock_event_reasons.has_value()) mask.value() |= gpu.clock_event_reasons.value();
  gpu.clock_event_reasons = mask;
}

// "Processes : None" in text, an empty <processes> element in XML.
void ProcessList(GpuSnapshot& gpu, std::string_view value) {
  value = Trim(value);
  if (value.empty() || value == "None") {
    gpu.processes = Field<std::vector<ProcessInfo>>::Value({});
    return;
  }
  Field<std::string> other = TextField(value);
  if (other.not_supported()) {
    gpu.processes = Field<std::vector<ProcessInfo>>::NotSupported();
  } else {
    std::string why = other.failed() ? other.error() : "unexpected value \"" + std::string(value) + "\"";
    gpu.processes = Field<std::vector<ProcessInfo>>::Failed(std::move(why));
  }
}

// Each "Process ID" starts a process; the lines after it describe that process.
void ProcessId(GpuSnapshot& gpu, std::string_view value) {
  if (!gpu.processes.has_value()) gpu.processes = Field<std::vector<ProcessInfo>>::Value({});
  ProcessInfo process;
  process.pid = ParseInt<uint32_t>(value).value_or(0);  // 0: no readable pid was printed
  gpu.processes.value().push_back(std::move(process));
}

ProcessInfo* LastProcess(GpuSnapshot& gpu) {
  if (!gpu.processes.has_value() || gpu.processes.value().empty()) return nullptr;
  return &gpu.processes.value().back();
}

void ProcessName(GpuSnapshot& gpu, std::string_view value) {
  if (ProcessInfo* process = LastProcess(gpu)) process->name = TextField(value).value_or("");
}

void ProcessMemory(GpuSnapshot& gpu, std::string_view value) {
  if (ProcessInfo* process = LastProcess(gpu)) process->used_memory_bytes = MebibytesField(value);
}

// nvidia-smi's words for the NVLink fabric registration ("Not Started", "In Progress", "Completed") as the
// states NVML's fabric info gives; "N/A" off NVSwitch systems.
void FabricState(GpuSnapshot& gpu, std::string_view value) {
  Field<std::string> text = TextField(value);
  if (text.has_value()) text.value() = ReplaceAll(ToLower(text.value()), " ", "_");
  gpu.fabric_state = text;
}

// "Success", or why the registration failed.
void FabricStatus(GpuSnapshot& gpu, std::string_view value) {
  Field<std::string> text = TextField(value);
  if (text.has_value() && EqualsIgnoreCase(text.value(), "Success")) text.value() = "success";
  gpu.fabric_status = text;
}

// ---- The tables ----------------------------------------------------------------

struct Reading {
  std::string_view name;
  Store store;
};

using G = GpuSnapshot;
namespace ce = clock_event;

// `nvidia-smi -q`, by section path. Drivers before 535 say "Clocks Throttle
// Reasons"; CanonicalName reads those as "clocks event reasons".
constexpr Reading kQueryTextReadings[] = {
    {"product name", Text<&G::name>},
    {"gpu uuid", Text<&G::uuid>},
    {"serial number", Text<&G::serial>},
    {"board part number", Text<&G::board_part_number>},
    {"vbios version", Text<&G::vbios_version>},
    {"persistence mode", Flag<&G::persistence_mode>},
    {"pci/bus id", BusId},
    {"pci/gpu link info/pcie generation/current", Number<&G::pcie_generation_current>},
    {"pci/gpu link info/pcie generation/max", Number<&G::pcie_generation_max>},
    {"pci/gpu link info/link width/current", Number<&G::pcie_width_current>},
    {"pci/gpu link info/link width/max", Number<&G::pcie_width_max>},
    {"pci/replays since reset", Number<&G::pcie_replay_count>},
    {"fan speed", FanSpeed},
    {"clocks event reasons/idle", ClockEventReason<ce::kGpuIdle>},
    {"clocks event reasons/applications clocks setting", ClockEventReason<ce::kApplicationsClocksSetting>},
    {"clocks event reasons/sw power cap", ClockEventReason<ce::kSwPowerCap>},
    {"clocks event reasons/hw slowdown", ClockEventReason<ce::kHwSlowdown>},
    {"clocks event reasons/hw thermal slowdown", ClockEventReason<ce::kHwThermalSlowdown>},
    {"clocks event reasons/hw power brake slowdown", ClockEventReason<ce::kHwPowerBrakeSlowdown>},
    {"clocks event reasons/sync boost", ClockEventReason<ce::kSyncBoost>},
    {"clocks event reasons/sw thermal slowdown", ClockEventReason<ce::kSwThermalSlowdown>},
    {"clocks event reasons/display clock setting", ClockEventReason<ce::kDisplayClockSetting>},
    {"fb memory usage/total", Mebibytes<&G::memory_total_bytes>},
    {"fb memory usage/used", Mebibytes<&G::memory_used_bytes>},
    {"fb memory usage/free", Mebibytes<&G::memory_free_bytes>},
    {"utilization/gpu", Number<&G::utilization_gpu_percent>},
    {"utilization/memory", Number<&G::utilization_memory_percent>},
    {"ecc mode/current", Flag<&G::ecc_enabled>},
    // Before Ampere: one total per error kind.
    {"ecc errors/volatile/single bit/total", Number<&G::ecc_volatile_corrected>},
    {"ecc errors/volatile/double bit/total", Number<&G::ecc_volatile_uncorrected>},
    {"ecc errors/aggregate/single bit/total", Number<&G::ecc_aggregate_corrected>},
    {"ecc errors/aggregate/double bit/total", Number<&G::ecc_aggregate_uncorrected>},
    // Ampere and later: counts per memory, summed.
    {"ecc errors/volatile/sram correctable", AddCount<&G::ecc_volatile_corrected>},
    {"ecc errors/volatile/dram correctable", AddCount<&G::ecc_volatile_corrected>},
    {"ecc errors/volatile/sram uncorrectable", AddCount<&G::ecc_volatile_uncorrected>},
    {"ecc errors/volatile/sram uncorrectable parity", AddCount<&G::ecc_volatile_uncorrected>},
    {"ecc errors/volatile/sram uncorrectable sec-ded", AddCount<&G::ecc_volatile_uncorrected>},
    {"ecc errors/volatile/dram uncorrectable", AddCount<&G::ecc_volatile_uncorrected>},
    {"ecc errors/aggregate/sram correctable", AddCount<&G::ecc_aggregate_corrected>},
    {"ecc errors/aggregate/dram correctable", AddCount<&G::ecc_aggregate_corrected>},
    {"ecc errors/aggregate/sram uncorrectable", AddCount<&G::ecc_aggregate_uncorrected>},
    {"ecc errors/aggregate/sram uncorrectable parity", AddCount<&G::ecc_aggregate_uncorrected>},
    {"ecc errors/aggregate/sram uncorrectable sec-ded", AddCount<&G::ecc_aggregate_uncorrected>},
    {"ecc errors/aggregate/dram uncorrectable", AddCount<&G::ecc_aggregate_uncorrected>},
    {"retired pages/single bit ecc", Number<&G::retired_pages_sbe>},
    {"retired pages/double bit ecc", Number<&G::retired_pages_dbe>},
    {"retired pages/pending page blacklist", Flag<&G::retired_pages_pending>},
    {"retired pages/pending page retirement", Flag<&G::retired_pages_pending>},
    {"retired pages/pending", Flag<&G::retired_pages_pending>},
    {"remapped rows/correctable error", Number<&G::remapped_rows_correctable>},
    {"remapped rows/uncorrectable error", Number<&G::remapped_rows_uncorrectable>},
    {"remapped rows/pending", Flag<&G::remapped_rows_pending>},
    {"remapped rows/remapping failure occurred", Flag<&G::remapped_rows_failure>},
    {"fabric/state", FabricState},
    {"fabric/status", FabricStatus},
    // Drivers from 550 print thresholds as T.Limit margins, which are not
    // temperatures; only the absolute spellings are read.
    {"temperature/gpu current temp", Number<&G::temperature_c>},
    {"temperature/gpu shutdown temp", Number<&G::temperature_shutdown_c>},
    {"temperature/gpu slowdown temp", Number<&G::temperature_slowdown_c>},
    {"temperature/gpu max operating temp", Number<&G::temperature_max_operating_c>},
    {"temperature/memory current temp", Number<&G::memory_temperature_c>},
    {"temperature/memory max operating temp", Number<&G::memory_temperature_max_c>},
    {"power readings/power draw", Number<&G::power_draw_w>},
    {"power readings/power limit", Number<&G::power_limit_w>},
    {"power readings/enforced power limit", NumberIfNoValue<&G::power_limit_w>},
    {"power readings/default power limit", Number<&G::power_default_limit_w>},
    {"gpu power readings/power draw", Number<&G::power_draw_w>},
    {"gpu power readings/average power draw", Number<&G::power_draw_w>},
    {"gpu power readings/instantaneous power draw", NumberIfNoValue<&G::power_draw_w>},
    {"gpu power readings/current power limit", Number<&G::power_limit_w>},
    {"gpu power readings/default power limit", Number<&G::power_default_limit_w>},
    {"clocks/sm", Number<&G::sm_clock_mhz>},
    {"clocks/memory", Number<&G::memory_clock_mhz>},
    {"processes", ProcessList},
    {"processes/process id", ProcessId},
    {"processes/name", ProcessName},
    {"processes/used gpu memory", ProcessMemory},
};

// `nvidia-smi -q -x`, by element path below <gpu>. Old <clocks_throttle_reasons>
// elements are read as <clocks_event_reasons>.
constexpr Reading kXmlReadings[] = {
    {"product_name", Text<&G::name>},
    {"uuid", Text<&G::uuid>},
    {"serial", Text<&G::serial>},
    {"board_part_number", Text<&G::board_part_number>},
    {"vbios_version", Text<&G::vbios_version>},
    {"persistence_mode", Flag<&G::persistence_mode>},
    {"pci/pci_bus_id", BusId},
    {"pci/pci_gpu_link_info/pcie_gen/current_link_gen", Number<&G::pcie_generation_current>},
    {"pci/pci_gpu_link_info/pcie_gen/max_link_gen", Number<&G::pcie_generation_max>},
    {"pci/pci_gpu_link_info/link_widths/current_link_width", Number<&G::pcie_width_current>},
    {"pci/pci_gpu_link_info/link_widths/max_link_width", Number<&G::pcie_width_max>},
    {"pci/replay_counter", Number<&G::pcie_replay_count>},
    {"fan_speed", FanSpeed},
    {"clocks_event_reasons/clocks_event_reason_gpu_idle", ClockEventReason<ce::kGpuIdle>},
    {"clocks_event_reasons/clocks_event_reason_applications_clocks_setting",
     ClockEventReason<ce::kApplicationsClocksSetting>},
    {"clocks_event_reasons/clocks_event_reason_sw_power_cap", ClockEventReason<ce::kSwPowerCap>},
    {"clocks_event_reasons/clocks_event_reason_hw_slowdown", ClockEventReason<ce::kHwSlowdown>},
    {"clocks_event_reasons/clocks_event_reason_hw_thermal_slowdown", ClockEventReason<ce::kHwThermalSlowdown>},
    {"clocks_event_reasons/clocks_event_reason_hw_power_brake_slowdown",
     ClockEventReason<ce::kHwPowerBrakeSlowdown>},
    {"clocks_event_reasons/clocks_event_reason_sync_boost", ClockEventReason<ce::kSyncBoost>},
    {"clocks_event_reasons/clocks_event_reason_sw_thermal_slowdown", ClockEventReason<ce::kSwThermalSlowdown>},
    {"clocks_event_reasons/clocks_event_reason_display_clocks_setting", ClockEventReason<ce::kDisplayClockSetting>},
    {"fb_memory_usage/total", Mebibytes<&G::memory_total_bytes>},
    {"fb_memory_usage/used", Mebibytes<&G::memory_used_bytes>},
    {"fb_memory_usage/free", Mebibytes<&G::memory_free_bytes>},
    {"utilization/gpu_util", Number<&G::utilization_gpu_percent>},
    {"utilization/memory_util", Number<&G::utilization_memory_percent>},
    {"ecc_mode/current_ecc", Flag<&G::ecc_enabled>},
    {"ecc_errors/volatile/single_bit/total", Number<&G::ecc_volatile_corrected>},
    {"ecc_errors/volatile/double_bit/total", Number<&G::ecc_volatile_uncorrected>},
    {"ecc_errors/aggregate/single_bit/total", Number<&G::ecc_aggregate_corrected>},
    {"ecc_errors/aggregate/double_bit/total", Number<&G::ecc_aggregate_uncorrected>},
    {"ecc_errors/volatile/sram_correctable", AddCount<&G::ecc_volatile_corrected>},
    {"ecc_errors/volatile/dram_correctable", AddCount<&G::ecc_volatile_corrected>},
    {"ecc_errors/volatile/sram_uncorrectable", AddCount<&G::ecc_volatile_uncorrected>},
    {"ecc_errors/volatile/sram_uncorrectable_parity", AddCount<&G::ecc_volatile_uncorrected>},
    {"ecc_errors/volatile/sram_uncorrectable_secded", AddCount<&G::ecc_volatile_uncorrected>},
    {"ecc_errors/volatile/dram_uncorrectable", AddCount<&G::ecc_volatile_uncorrected>},
    {"ecc_errors/aggregate/sram_correctable", AddCount<&G::ecc_aggregate_corrected>},
    {"ecc_errors/aggregate/dram_correctable", AddCount<&G::ecc_aggregate_corrected>},
    {"ecc_errors/aggregate/sram_uncorrectable", AddCount<&G::ecc_aggregate_uncorrected>},
    {"ecc_errors/aggregate/sram_uncorrectable_parity", AddCount<&G::ecc_aggregate_uncorrected>},
    {"ecc_errors/aggregate/sram_uncorrectable_secded", AddCount<&G::ecc_aggregate_uncorrected>},
    {"ecc_errors/aggregate/dram_uncorrectable", AddCount<&G::ecc_aggregate_uncorrected>},
    {"retired_pages/multiple_single_bit_retirement/retired_count", Number<&G::retired_pages_sbe>},
    {"retired_pages/double_bit_retirement/retired_count", Number<&G::retired_pages_dbe>},
    {"retired_pages/pending_blacklist", Flag<&G::retired_pages_pending>},
    {"retired_pages/pending_retirement", Flag<&G::retired_pages_pending>},
    {"remapped_rows/remapped_row_corr", Number<&G::remapped_rows_correctable>},
    {"remapped_rows/remapped_row_unc", Number<&G::remapped_rows_uncorrectable>},
    {"remapped_rows/remapped_row_pending", Flag<&G::remapped_rows_pending>},
    {"fabric/state", FabricState},
    {"fabric/status", FabricStatus},
    {"remapped_rows/remapped_row_failure", Flag<&G::remapped_rows_failure>},
    {"temperature/gpu_temp", Number<&G::temperature_c>},
    {"temperature/gpu_temp_max_threshold", Number<&G::temperature_shutdown_c>},
    {"temperature/gpu_temp_slow_threshold", Number<&G::temperature_slowdown_c>},
    {"temperature/gpu_temp_max_gpu_threshold", Number<&G::temperature_max_operating_c>},
    {"temperature/memory_temp", Number<&G::memory_temperature_c>},
    {"temperature/gpu_temp_max_mem_threshold", Number<&G::memory_temperature_max_c>},
    {"power_readings/power_draw", Number<&G::power_draw_w>},
    {"power_readings/power_limit", Number<&G::power_limit_w>},
    {"power_readings/enforced_power_limit", NumberIfNoValue<&G::power_limit_w>},
    {"power_readings/default_power_limit", Number<&G::power_default_limit_w>},
    {"gpu_power_readings/power_draw", Number<&G::power_draw_w>},
    {"gpu_power_readings/average_power_draw", Number<&G::power_draw_w>},
    {"gpu_power_readings/instant_power_draw", NumberIfNoValue<&G::power_draw_w>},
    {"gpu_power_readings/current_power_limit", Number<&G::power_limit_w>},
    {"gpu_power_readings/default_power_limit", Number<&G::power_default_limit_w>},
    {"clocks/sm_clock", Number<&G::sm_clock_mhz>},
    {"clocks/mem_clock", Number<&G::memory_clock_mhz>},
    {"processes", ProcessList},
    {"processes/process_info/pid", ProcessId},
    {"processes/process_info/process_name", ProcessName},
    {"processes/process_info/used_memory", ProcessMemory},
};

// `--query-gpu`, by column name (see `nvidia-smi --help-query-gpu`), with
// the short aliases nvidia-smi accepts. clocks_throttle_reasons.* columns are
// read as clocks_event_reasons.*.
constexpr Reading kCsvReadings[] = {
    {"name", Text<&G::name>},
    {"gpu_name", Text<&G::name>},
    {"uuid", Text<&G::uuid>},
    {"gpu_uuid", Text<&G::uuid>},
    {"serial", Text<&G::serial>},
    {"gpu_serial", Text<&G::serial>},
    {"vbios_version", Text<&G::vbios_version>},
    {"persistence_mode", Flag<&G::persistence_mode>},
    {"pci.bus_id", BusId},
    {"gpu_bus_id", BusId},
    {"pcie.link.gen.current", Number<&G::pcie_generation_current>},
    {"pcie.link.gen.max", Number<&G::pcie_generation_max>},
    {"pcie.link.width.current", Number<&G::pcie_width_current>},
    {"pcie.link.width.max", Number<&G::pcie_width_max>},
    {"fan.speed", FanSpeed},
    {"clocks_event_reasons.active", ClockEventMask},
    {"clocks_event_reasons.gpu_idle", ClockEventReason<ce::kGpuIdle>},
    {"clocks_event_reasons.applications_clocks_setting", ClockEventReason<ce::kApplicationsClocksSetting>},
    {"clocks_event_reasons.sw_power_cap", ClockEventReason<ce::kSwPowerCap>},
    {"clocks_event_reasons.hw_slowdown", ClockEventReason<ce::kHwSlowdown>},
    {"clocks_event_reasons.hw_thermal_slowdown", ClockEventReason<ce::kHwThermalSlowdown>},
    {"clocks_event_reasons.hw_power_brake_slowdown", ClockEventReason<ce::kHwPowerBrakeSlowdown>},
    {"clocks_event_reasons.sync_boost", ClockEventReason<ce::kSyncBoost>},
    {"clocks_event_reasons.sw_thermal_slowdown", ClockEventReason<ce::kSwThermalSlowdown>},
    {"clocks_event_reasons.display_clock_setting", ClockEventReason<ce::kDisplayClockSetting>},
    {"memory.total", Mebibytes<&G::memory_total_bytes>},
    {"memory.used", Mebibytes<&G::memory_used_bytes>},
    {"memory.free", Mebibytes<&G::memory_free_bytes>},
    {"utilization.gpu", Number<&G::utilization_gpu_percent>},
    {"utilization.memory", Number<&G::utilization_memory_percent>},
    {"ecc.mode.current", Flag<&G::ecc_enabled>},
    {"ecc.errors.corrected.volatile.total", Number<&G::ecc_volatile_corrected>},
    {"ecc.errors.uncorrected.volatile.total", Number<&G::ecc_volatile_uncorrected>},
    {"ecc.errors.corrected.aggregate.total", Number<&G::ecc_aggregate_corrected>},
    {"ecc.errors.uncorrected.aggregate.total", Number<&G::ecc_aggregate_uncorrected>},
    {"retired_pages.single_bit_ecc.count", Number<&G::retired_pages_sbe>},
    {"retired_pages.sbe", Number<&G::retired_pages_sbe>},
    {"retired_pages.double_bit.count", Number<&G::retired_pages_dbe>},
    {"retired_pages.dbe", Number<&G::retired_pages_dbe>},
    {"retired_pages.pending", Flag<&G::retired_pages_pending>},
    {"remapped_rows.correctable", Number<&G::remapped_rows_correctable>},
    {"remapped_rows.uncorrectable", Number<&G::remapped_rows_uncorrectable>},
    {"remapped_rows.pending", Flag<&G::remapped_rows_pending>},
    {"remapped_rows.failure", Flag<&G::remapped_rows_failure>},
    {"temperature.gpu", Number<&G::temperature_c>},
    {"temperature.memory", Number<&G::memory_temperature_c>},
    {"power.draw", Number<&G::power_draw_w>},
    {"power.draw.average", Number<&G::power_draw_w>},
    {"power.draw.instant", NumberIfNoValue<&G::power_draw_w>},
    {"power.limit", Number<&G::power_limit_w>},
    {"enforced.power.limit", NumberIfNoValue<&G::power_limit_w>},
    {"power.default_limit", Number<&G::power_default_limit_w>},
    {"clocks.current.sm", Number<&G::sm_clock_mhz>},
    {"clocks.sm", Number<&G::sm_clock_mhz>},
    {"clocks.current.memory", Number<&G::memory_clock_mhz>},
    {"clocks.mem", Number<&G::memory_clock_mhz>},
};

// Drivers before 535 called clock event reasons "throttle reasons".
std::string CanonicalName(std::string_view name) {
  std::string canonical(name);
  for (std::string_view old_word : {"throttle reason", "throttle_reason"}) {
    for (size_t at = canonical.find(old_word); at != std::string::npos; at = canonical.find(old_word, at)) {
      canonical.replace(at, std::string_view("throttle").size(), "event");
    }
  }
  return canonical;
}

using ReadingIndex = std::unordered_map<std::string_view, Store>;

ReadingIndex IndexReadings(std::span<const Reading> readings) {
  ReadingIndex index;
  for (const Reading& reading : readings) index.emplace(reading.name, reading.store);
  return index;
}

Store FindStore(ReadingNaming naming, std::string_view name) {
  static const ReadingIndex kQueryText = IndexReadings(kQueryTextReadings);
  static const ReadingIndex kXml = IndexReadings(kXmlReadings);
  static const ReadingIndex kCsv = IndexReadings(kCsvReadings);
  const ReadingIndex& index = naming == ReadingNaming::kQueryText ? kQueryText
                              : naming == ReadingNaming::kXml     ? kXml
                                                                  : kCsv;
  std::string canonical;
  if (name.find("throttle") != std::string_view::npos) name = canonical = CanonicalName(name);
  auto found = index.find(name);
  return found == index.end() ? nullptr : found->second;
}

}  // namespace

bool IsKnownGpuReading(ReadingNaming naming, std::string_view name) { return FindStore(naming, name) != nullptr; }

bool ApplyGpuReading(ReadingNaming naming, std::string_view name, std::string_view value, GpuSnapshot& gpu) {
  Store store = FindStore(naming, name);
  if (store == nullptr) return false;
  store(gpu, Trim(value));
  return true;
}

}  // namespace gpudoctor::smi
