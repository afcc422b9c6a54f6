#include "scenario.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "common/text.h"
#include "model/snapshot.h"
#include "nvml_codes.h"

namespace gpudoctor::fake_nvml {
namespace {

// ---------------------------------------------------------------------------
// Field table.

struct GpuFieldInfo {
  GpuField field;
  std::string_view key;
  FieldKind kind;
  double max = kForever;  // largest value a number may take
};

constexpr GpuFieldInfo kGpuFields[] = {
    {GpuField::kName, "name", FieldKind::kText},
    {GpuField::kUuid, "uuid", FieldKind::kText},
    {GpuField::kSerial, "serial", FieldKind::kText},
    {GpuField::kBoardPartNumber, "board_part_number", FieldKind::kText},
    {GpuField::kVbiosVersion, "vbios_version", FieldKind::kText},
    {GpuField::kPciBusId, "pci_bus_id", FieldKind::kText},
    {GpuField::kFabricClusterUuid, "fabric_cluster_uuid", FieldKind::kText},
    {GpuField::kPersistenceMode, "persistence_mode", FieldKind::kFlag},
    {GpuField::kEccEnabled, "ecc_enabled", FieldKind::kFlag},
    {GpuField::kRetiredPagesPending, "retired_pages_pending", FieldKind::kFlag},
    {GpuField::kRemappedRowsPending, "remapped_rows_pending", FieldKind::kFlag},
    {GpuField::kRemappedRowsFailure, "remapped_rows_failure", FieldKind::kFlag},
    {GpuField::kInforomValid, "inforom_valid", FieldKind::kFlag},
    {GpuField::kGpmSupported, "gpm_supported", FieldKind::kFlag},
    {GpuField::kClockEventReasons, "clock_event_reasons", FieldKind::kMask},
    {GpuField::kPcieGenerationCurrent, "pcie_generation_current", FieldKind::kNumber, 6},
    {GpuField::kPcieGenerationMax, "pcie_generation_max", FieldKind::kNumber, 6},
    {GpuField::kPcieWidthCurrent, "pcie_width_current", FieldKind::kNumber, 32},
    {GpuField::kPcieWidthMax, "pcie_width_max", FieldKind::kNumber, 32},
    {GpuField::kPcieReplayCount, "pcie_replay_count", FieldKind::kNumber},
    {GpuField::kTemperatureC, "temperature_c", FieldKind::kNumber},
    {GpuField::kMemoryTemperatureC, "memory_temperature_c", FieldKind::kNumber},
    {GpuField::kTemperatureSlowdownC, "temperature_slowdown_c", FieldKind::kNumber},
    {GpuField::kTemperatureShutdownC, "temperature_shutdown_c", FieldKind::kNumber},
    {GpuField::kTemperatureMaxOperatingC, "temperature_max_operating_c", FieldKind::kNumber},
    {GpuField::kMemoryTemperatureMaxC, "memory_temperature_max_c", FieldKind::kNumber},
    {GpuField::kPowerDrawW, "power_draw_w", FieldKind::kNumber},
    {GpuField::kPowerLimitW, "power_limit_w", FieldKind::kNumber},
    {GpuField::kPowerDefaultLimitW, "power_default_limit_w", FieldKind::kNumber},
    {GpuField::kTotalEnergyMj, "total_energy_mj", FieldKind::kNumber},
    {GpuField::kSmClockMhz, "sm_clock_mhz", FieldKind::kNumber},
    {GpuField::kMemoryClockMhz, "memory_clock_mhz", FieldKind::kNumber},
    {GpuField::kUtilizationGpuPercent, "utilization_gpu_percent", FieldKind::kNumber, 100},
    {GpuField::kUtilizationMemoryPercent, "utilization_memory_percent", FieldKind::kNumber, 100},
    {GpuField::kEncoderUtilizationPercent, "encoder_utilization_percent", FieldKind::kNumber, 100},
    {GpuField::kDecoderUtilizationPercent, "decoder_utilization_percent", FieldKind::kNumber, 100},
    {GpuField::kMemoryTotalMib, "memory_total_mib", FieldKind::kNumber},
    {GpuField::kMemoryUsedMib, "memory_used_mib", FieldKind::kNumber},
    {GpuField::kMemoryReservedMib, "memory_reserved_mib", FieldKind::kNumber},
    {GpuField::kEccVolatileCorrected, "ecc_volatile_corrected", FieldKind::kNumber},
    {GpuField::kEccVolatileUncorrected, "ecc_volatile_uncorrected", FieldKind::kNumber},
    {GpuField::kEccAggregateCorrected, "ecc_aggregate_corrected", FieldKind::kNumber},
    {GpuField::kEccAggregateUncorrected, "ecc_aggregate_uncorrected", FieldKind::kNumber},
    {GpuField::kRetiredPagesSbe, "retired_pages_sbe", FieldKind::kNumber},
    {GpuField::kRetiredPagesDbe, "retired_pages_dbe", FieldKind::kNumber},
    {GpuField::kRemappedRowsCorrectable, "remapped_rows_correctable", FieldKind::kNumber},
    {GpuField::kRemappedRowsUncorrectable, "remapped_rows_uncorrectable", FieldKind::kNumber},
    {GpuField::kFabricState, "fabric_state", FieldKind::kNumber, NVML_GPU_FABRIC_STATE_COMPLETED},
    {GpuField::kFabricStatus, "fabric_status", FieldKind::kNumber, NVML_ERROR_UNKNOWN},
    {GpuField::kFabricCliqueId, "fabric_clique_id", FieldKind::kNumber, UINT32_MAX},
    {GpuField::kFabricHealthMask, "fabric_health_mask", FieldKind::kNumber, UINT32_MAX},
    {GpuField::kGpmGraphicsUtilPercent, "gpm_graphics_util_percent", FieldKind::kNumber, 100},
    {GpuField::kGpmSmUtilPercent, "gpm_sm_util_percent", FieldKind::kNumber, 100},
    {GpuField::kGpmSmOccupancyPercent, "gpm_sm_occupancy_percent", FieldKind::kNumber, 100},
    {GpuField::kGpmTensorUtilPercent, "gpm_tensor_util_percent", FieldKind::kNumber, 100},
    {GpuField::kGpmFp64UtilPercent, "gpm_fp64_util_percent", FieldKind::kNumber, 100},
    {GpuField::kGpmFp32UtilPercent, "gpm_fp32_util_percent", FieldKind::kNumber, 100},
    {GpuField::kGpmFp16UtilPercent, "gpm_fp16_util_percent", FieldKind::kNumber, 100},
    {GpuField::kGpmDramBwUtilPercent, "gpm_dram_bw_util_percent", FieldKind::kNumber, 100},
    {GpuField::kGpmPcieTxMibPerSecond, "gpm_pcie_tx_mib_per_second", FieldKind::kNumber},
    {GpuField::kGpmPcieRxMibPerSecond, "gpm_pcie_rx_mib_per_second", FieldKind::kNumber},
    {GpuField::kGpmNvLinkTxMibPerSecond, "gpm_nvlink_tx_mib_per_second", FieldKind::kNumber},
    {GpuField::kGpmNvLinkRxMibPerSecond, "gpm_nvlink_rx_mib_per_second", FieldKind::kNumber},
    {GpuField::kFanSpeedsPercent, "fan_speeds_percent", FieldKind::kStructured, 100},
    {GpuField::kProcesses, "processes", FieldKind::kStructured},
    {GpuField::kNvLink, "nvlink", FieldKind::kStructured},
};
static_assert(std::size(kGpuFields) == kGpuFieldCount);

constexpr const GpuFieldInfo& InfoOf(GpuField field) { return kGpuFields[static_cast<size_t>(field)]; }
constexpr bool FieldTableIsInEnumOrder() {
  for (size_t i = 0; i < kGpuFieldCount; ++i)
    if (static_cast<size_t>(kGpuFields[i].field) != i) return false;
  return true;
}
static_assert(FieldTableIsInEnumOrder());

// Keys of a GPU table that are settings rather than readable fields.
constexpr std::string_view kNotSupportedKey = "not_supported";
constexpr std::string_view kNvLinkCountKey = "nvlink_count";
constexpr std::string_view kPciDeviceIdKey = "pci_device_id";
constexpr std::string_view kPciSubsystemIdKey = "pci_subsystem_id";
constexpr std::string_view kJitterKey = "jitter";

// Keys that must differ between GPUs, so [defaults] may not set them.
bool MustBeUnique(GpuField field) {
  return field == GpuField::kUuid || field == GpuField::kSerial || field == GpuField::kPciBusId;
}

// ---------------------------------------------------------------------------
// Reading TOML. A ParseFailure thrown anywhere below ends the parse; it never
// leaves this file.

struct ParseFailure {
  uint32_t line;
  std::string message;
};

uint32_t LineOf(const toml::node& node) { return node.source().begin.line; }

[[noreturn]] void Fail(const toml::node& node, std::string message) {
  throw ParseFailure{LineOf(node), std::move(message)};
}

double ReadNumber(const toml::node& node, std::string_view what) {
  if (auto integer = node.value_exact<int64_t>()) return static_cast<double>(*integer);
  if (auto real = node.value_exact<double>()) {
    if (!std::isfinite(*real)) Fail(node, fmt::format("{} must be a finite number", what));
    return *real;
  }
  Fail(node, fmt::format("{} must be a number", what));
}

double ReadNonNegative(const toml::node& node, std::string_view what, double max = kForever) {
  double value = ReadNumber(node, what);
  if (value < 0) Fail(node, fmt::format("{} must not be negative", what));
  if (value > max) Fail(node, fmt::format("{} must be at most {}", what, max));
  return value;
}

uint64_t ReadUnsigned(const toml::node& node, std::string_view what, uint64_t max) {
  auto value = node.value_exact<int64_t>();
  if (!value) Fail(node, fmt::format("{} must be an integer", what));
  if (*value < 0 || static_cast<uint64_t>(*value) > max)
    Fail(node, fmt::format("{} must be between 0 and {}", what, max));
  return static_cast<uint64_t>(*value);
}

bool ReadBool(const toml::node& node, std::string_view what) {
  auto value = node.value_exact<bool>();
  if (!value) Fail(node, fmt::format("{} must be true or false", what));
  return *value;
}

std::string ReadString(const toml::node& node, std::string_view what) {
  auto value = node.value_exact<std::string>();
  if (!value) Fail(node, fmt::format("{} must be a string", what));
  return *value;
}

const toml::array& ReadArray(const toml::node& node, std::string_view what) {
  const toml::array* array = node.as_array();
  if (array == nullptr) Fail(node, fmt::format("{} must be a list", what));
  return *array;
}

const toml::table& ReadTable(const toml::node& node, std::string_view what) {
  const toml::table* table = node.as_table();
  if (table == nullptr) Fail(node, fmt::format("{} must be a table", what));
  return *table;
}

// Scenario seconds: a duration string ("90s", "5m", "250ms") or a number of seconds.
double ReadSeconds(const toml::node& node, std::string_view what) {
  if (auto text = node.value_exact<std::string>()) {
    auto duration = ParseDuration(*text);
    if (!duration) Fail(node, fmt::format("{}: \"{}\" is not a duration (like \"90s\", \"5m\", \"2h\")", what, *text));
    return std::chrono::duration<double>(*duration).count();
  }
  if (node.is_number()) return ReadNonNegative(node, what);
  Fail(node, fmt::format("{} must be a duration like \"90s\" or a number of seconds", what));
}

// Number fields whose values may also be given by name: the fabric state
// ("completed") and the fabric status, an NVML return code ("not_ready").
bool IsNamedField(std::string_view key) { return key == "fabric_state" || key == "fabric_status"; }

std::optional<double> NamedValue(std::string_view key, std::string_view name) {
  if (key == "fabric_state") {
    constexpr std::string_view kStates[] = {"not_supported", "not_started", "in_progress", "completed"};
    for (size_t state = 0; state < std::size(kStates); ++state)
      if (name == kStates[state]) return static_cast<double>(state);
    return std::nullopt;
  }
  if (key == "fabric_status") {
    if (auto code = NvmlCodeFromName(name)) return static_cast<double>(*code);
  }
  return std::nullopt;
}

double ReadNumberOrName(const toml::node& node, std::string_view key, double max) {
  if (auto text = node.value_exact<std::string>(); text && IsNamedField(key)) {
    if (auto value = NamedValue(key, *text)) return *value;
    Fail(node, fmt::format("\"{}\" is not a value of {}", *text, key));
  }
  return ReadNonNegative(node, key, max);
}

nvmlReturn_t ReadErrorCode(const toml::node& node, std::string_view what) {
  if (node.is_integer()) return static_cast<nvmlReturn_t>(ReadUnsigned(node, what, INT32_MAX));
  if (auto text = node.value_exact<std::string>()) {
    if (auto code = NvmlCodeFromName(*text)) return *code;
    Fail(node, fmt::format("{}: \"{}\" is not an NVML return code (like \"gpu_is_lost\")", what, *text));
  }
  Fail(node, fmt::format("{} must be an NVML return code name or number", what));
}

CallSet ReadCalls(const toml::node& node) {
  std::string pattern = ReadString(node, "call");
  auto calls = MatchCalls(pattern);
  if (!calls) Fail(node, fmt::format("call \"{}\" is not an NVML function the library exports", pattern));
  return *calls;
}

// Hands out a table's entries by key and reports any key nobody asked for.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string_view what) : table_(table), what_(what) {}

  const toml::node* Optional(std::string_view key) {
    known_.emplace_back(key);
    return table_.get(key);
  }
  const toml::node& Required(std::string_view key) {
    const toml::node* node = Optional(key);
    if (node == nullptr) Fail(table_, fmt::format("{} needs \"{}\"", what_, key));
    return *node;
  }
  void RejectUnknownKeys() const {
    for (auto&& [key, node] : table_)
      if (std::find(known_.begin(), known_.end(), key.str()) == known_.end())
        Fail(node, fmt::format("unknown key \"{}\" in {}", key.str(), what_));
  }
  const toml::table& table() const { return table_; }

 private:
  const toml::table& table_;
  std::string what_;
  std::vector<std::string_view> known_;
};

// ---------------------------------------------------------------------------
// Defaults: a healthy, idle 8x H100 SXM5 80GB server.

constexpr uint32_t kDefaultGpuCount = 8;
constexpr uint32_t kMaxGpuCount = 256;
constexpr uint32_t kDefaultNvLinkCount = 18;
// PCI buses of the eight GPUs in a typical HGX H100 board.
constexpr std::array<uint32_t, 8> kDefaultPciBuses{0x1b, 0x43, 0x52, 0x61, 0x9d, 0xc3, 0xd1, 0xdf};

// Unique per index because Mix64 is a bijection and `high` is kept whole.
std::string DefaultUuid(uint32_t index) {
  uint64_t high = Mix64(2ULL * index + 1);
  uint64_t low = Mix64(2ULL * index + 2);
  return fmt::format("GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", high >> 32, (high >> 16) & 0xffff, high & 0xffff,
                     low >> 48, low & 0xffffffffffffULL);
}

GpuSpec DefaultGpu(uint32_t index) {
  GpuSpec gpu;
  gpu.index = index;
  auto set_text = [&](GpuField field, std::string value) { gpu.text[static_cast<size_t>(field)] = std::move(value); };
  set_text(GpuField::kName, "NVIDIA H100 80GB HBM3");
  set_text(GpuField::kUuid, DefaultUuid(index));
  set_text(GpuField::kSerial, std::to_string(1654922013100ULL + index));
  set_text(GpuField::kBoardPartNumber, "692-2G520-0200-000");
  set_text(GpuField::kVbiosVersion, "96.00.99.00.01");
  set_text(GpuField::kPciBusId, fmt::format("{:04x}:{:02x}:00.0", index / kDefaultPciBuses.size(),
                                            kDefaultPciBuses[index % kDefaultPciBuses.size()]));
  auto set = [&](GpuField field, double value) { gpu.tracks[static_cast<size_t>(field)].set_base(value); };
  set(GpuField::kPersistenceMode, 1);
  set(GpuField::kEccEnabled, 1);
  set(GpuField::kInforomValid, 1);
  set(GpuField::kClockEventReasons, static_cast<double>(clock_event::kGpuIdle));
  set(GpuField::kPcieGenerationCurrent, 5);
  set(GpuField::kPcieGenerationMax, 5);
  set(GpuField::kPcieWidthCurrent, 16);
  set(GpuField::kPcieWidthMax, 16);
  set(GpuField::kTemperatureC, 34);
  set(GpuField::kMemoryTemperatureC, 42);
  set(GpuField::kTemperatureSlowdownC, 89);
  set(GpuField::kTemperatureShutdownC, 92);
  set(GpuField::kTemperatureMaxOperatingC, 87);
  set(GpuField::kMemoryTemperatureMaxC, 95);
  set(GpuField::kPowerDrawW, 72);
  set(GpuField::kPowerLimitW, 700);
  set(GpuField::kPowerDefaultLimitW, 700);
  set(GpuField::kSmClockMhz, 345);
  set(GpuField::kMemoryClockMhz, 2619);
  set(GpuField::kMemoryTotalMib, 81559);
  set(GpuField::kMemoryReservedMib, 561);
  // GPM is off unless a scenario turns it on, so scenarios written before it
  // keep their meaning; examples/hopper-gpm.toml turns it on.
  set(GpuField::kGpmSupported, 0);
  gpu.nvlinks.resize(kDefaultNvLinkCount);
  // H100 replaces page retirement with row remapping.
  for (GpuField field : {GpuField::kRetiredPagesSbe, GpuField::kRetiredPagesDbe, GpuField::kRetiredPagesPending})
    gpu.not_supported.set(static_cast<size_t>(field));
  return gpu;
}

// ---------------------------------------------------------------------------
// GPU tables ([defaults] and [gpu.N]).

uint64_t ReadClockEventReasons(const toml::node& node) {
  uint64_t mask = 0;
  for (const toml::node& item : ReadArray(node, "clock_event_reasons")) {
    std::string name = ReadString(item, "a clock event reason");
    auto bit = ClockEventReasonBit(name);
    if (!bit) Fail(item, fmt::format("\"{}\" is not a clock event reason (like \"sw_power_cap\")", name));
    mask |= *bit;
  }
  return mask;
}

std::vector<ProcessSpec> ReadProcesses(const toml::node& node) {
  std::vector<ProcessSpec> processes;
  for (const toml::node& item : ReadArray(node, "processes")) {
    TableReader reader(ReadTable(item, "a process"), "a process");
    ProcessSpec process;
    const toml::node& pid = reader.Required("pid");
    process.pid = static_cast<uint32_t>(ReadUnsigned(pid, "pid", UINT32_MAX));
    process.name = ReadString(reader.Required("name"), "name");
    process.used_memory_mib.set_base(ReadNonNegative(reader.Required("used_memory_mib"), "used_memory_mib"));
    if (const toml::node* start = reader.Optional("start")) process.start = ReadSeconds(*start, "start");
    if (const toml::node* stop = reader.Optional("stop")) process.stop = ReadSeconds(*stop, "stop");
    reader.RejectUnknownKeys();
    for (const ProcessSpec& other : processes)
      if (other.pid == process.pid) Fail(pid, fmt::format("pid {} is listed twice", process.pid));
    processes.push_back(std::move(process));
  }
  return processes;
}

void ApplyNvLinkEntries(const toml::node& node, std::vector<NvLinkSpec>& links) {
  for (const toml::node& item : ReadArray(node, "nvlink")) {
    TableReader reader(ReadTable(item, "an nvlink entry"), "an nvlink entry");
    const toml::node& link_node = reader.Required("link");
    uint64_t link = ReadUnsigned(link_node, "link", NVML_NVLINK_MAX_LINKS - 1);
    if (link >= links.size()) Fail(link_node, fmt::format("link {} is beyond nvlink_count ({})", link, links.size()));
    NvLinkSpec& spec = links[link];
    if (const toml::node* active = reader.Optional("active")) spec.active.set_base(ReadBool(*active, "active"));
    for (size_t counter = 0; counter < kNvLinkCounterKeys.size(); ++counter)
      if (const toml::node* value = reader.Optional(kNvLinkCounterKeys[counter]))
        spec.errors[counter].set_base(ReadNonNegative(*value, kNvLinkCounterKeys[counter]));
    reader.RejectUnknownKeys();
  }
}

void ApplyGpuField(const GpuFieldInfo& info, const toml::node& node, GpuSpec& gpu) {
  size_t slot = static_cast<size_t>(info.field);
  switch (info.kind) {
    case FieldKind::kText: {
      std::string text = ReadString(node, info.key);
      if (info.field == GpuField::kPciBusId) {
        auto normalized = NormalizePciBusId(text);
        if (!normalized) Fail(node, fmt::format("\"{}\" is not a PCI bus id (like \"0000:1b:00.0\")", text));
        text = *normalized;
      }
      gpu.text[slot] = std::move(text);
      return;
    }
    case FieldKind::kFlag: gpu.tracks[slot].set_base(ReadBool(node, info.key)); return;
    case FieldKind::kMask: gpu.tracks[slot].set_base(static_cast<double>(ReadClockEventReasons(node))); return;
    case FieldKind::kNumber:
      gpu.tracks[slot].set_base(ReadNumberOrName(node, info.key, info.max));
      if (info.field == GpuField::kMemoryUsedMib) gpu.memory_used_from_processes = false;
      if (info.field == GpuField::kTotalEnergyMj) gpu.energy_from_power = false;
      return;
    case FieldKind::kStructured: break;
  }
  switch (info.field) {
    case GpuField::kFanSpeedsPercent:
      gpu.fan_speeds_percent.clear();
      for (const toml::node& item : ReadArray(node, info.key))
        gpu.fan_speeds_percent.emplace_back(ReadNonNegative(item, "a fan speed", info.max));
      return;
    case GpuField::kProcesses: gpu.processes = ReadProcesses(node); return;
    case GpuField::kNvLink: ApplyNvLinkEntries(node, gpu.nvlinks); return;
    default: return;
  }
}

std::bitset<kGpuFieldCount> ReadNotSupported(const toml::node& node) {
  std::bitset<kGpuFieldCount> fields;
  for (const toml::node& item : ReadArray(node, kNotSupportedKey)) {
    std::string key = ReadString(item, "a not_supported entry");
    auto field = GpuFieldFromKey(key);
    if (!field) Fail(item, fmt::format("\"{}\" in not_supported is not a GPU field", key));
    fields.set(static_cast<size_t>(*field));
  }
  return fields;
}

// `jitter = { temperature_c = 1.5, ... }` replaces the GPU's jitter.
void ApplyJitter(const toml::node& node, GpuSpec& gpu) {
  for (Track& track : gpu.tracks) track.set_jitter(0, 0);
  for (auto&& [key, value] : ReadTable(node, kJitterKey)) {
    auto field = GpuFieldFromKey(key.str());
    if (!field || KindOf(*field) != FieldKind::kNumber || *field == GpuField::kMemoryUsedMib ||
        *field == GpuField::kTotalEnergyMj)
      Fail(value, fmt::format("jitter: \"{}\" is not a number field that can jitter", key.str()));
    size_t slot = static_cast<size_t>(*field);
    gpu.tracks[slot].set_jitter(ReadNonNegative(value, key.str()), Mix64(gpu.index * kGpuFieldCount + slot));
  }
}

// Applies one [defaults] or [gpu.N] table on top of `gpu`.
void ApplyGpuTable(const toml::table& table, bool is_defaults, GpuSpec& gpu) {
  // nvlink_count first: the nvlink entries refer to it.
  if (const toml::node* count = table.get(kNvLinkCountKey))
    gpu.nvlinks.resize(ReadUnsigned(*count, kNvLinkCountKey, NVML_NVLINK_MAX_LINKS));
  for (auto&& [key, node] : table) {
    std::string_view name = key.str();
    if (name == kNvLinkCountKey) continue;
    if (name == kNotSupportedKey) {
      gpu.not_supported = ReadNotSupported(node);
    } else if (name == kJitterKey) {
      ApplyJitter(node, gpu);
    } else if (name == kPciDeviceIdKey) {
      gpu.pci_device_id = static_cast<uint32_t>(ReadUnsigned(node, name, UINT32_MAX));
    } else if (name == kPciSubsystemIdKey) {
      gpu.pci_subsystem_id = static_cast<uint32_t>(ReadUnsigned(node, name, UINT32_MAX));
    } else if (auto field = GpuFieldFromKey(name)) {
      if (is_defaults && MustBeUnique(*field))
        Fail(node, fmt::format("\"{}\" must differ between GPUs: set it under [gpu.N], not [defaults]", name));
      ApplyGpuField(InfoOf(*field), node, gpu);
    } else {
      Fail(node, fmt::format("unknown key \"{}\" in {}", name, is_defaults ? "[defaults]" : "a [gpu.N] table"));
    }
  }
}

// ---------------------------------------------------------------------------
// Targets: which GPUs an entry applies to.

uint32_t ReadGpuIndex(const toml::node& node, size_t gpu_count) {
  uint64_t index = ReadUnsigned(node, "gpu", UINT32_MAX);
  if (index >= gpu_count) Fail(node, fmt::format("gpu {} does not exist (gpu_count is {})", index, gpu_count));
  return static_cast<uint32_t>(index);
}

std::optional<uint32_t> ReadOptionalGpu(TableReader& reader, size_t gpu_count) {
  if (const toml::node* gpu = reader.Optional("gpu")) return ReadGpuIndex(*gpu, gpu_count);
  return std::nullopt;
}

// `gpu = N`, `gpus = [..]`, or neither for every GPU.
std::vector<uint32_t> ReadGpuTargets(TableReader& reader, size_t gpu_count) {
  const toml::node* one = reader.Optional("gpu");
  const toml::node* many = reader.Optional("gpus");
  if (one != nullptr && many != nullptr) Fail(*many, "give either gpu or gpus, not both");
  std::vector<uint32_t> targets;
  if (one != nullptr) {
    targets.push_back(ReadGpuIndex(*one, gpu_count));
  } else if (many != nullptr) {
    for (const toml::node& item : ReadArray(*many, "gpus")) targets.push_back(ReadGpuIndex(item, gpu_count));
  } else {
    for (uint32_t index = 0; index < gpu_count; ++index) targets.push_back(index);
  }
  return targets;
}

TimeWindow ReadWindow(TableReader& reader) {
  TimeWindow window;
  if (const toml::node* from = reader.Optional("from")) window.from = ReadSeconds(*from, "from");
  if (const toml::node* until = reader.Optional("until")) {
    window.until = ReadSeconds(*until, "until");
    if (window.until <= window.from) Fail(*until, "until must be later than from");
  }
  return window;
}

// ---------------------------------------------------------------------------
// Timeline.

// What one timeline entry does to each track it names.
struct Change {
  enum class Kind { kSet, kRamp, kRise } kind;
  double at = 0;
  double value = 0;  // kSet: the value; kRamp: the target; kRise: per second
  double over = kForever;
  void ApplyTo(Track& track) const {
    switch (kind) {
      case Kind::kSet: track.Set(at, value); break;
      case Kind::kRamp: track.Ramp(at, value, over); break;
      case Kind::kRise: track.Rise(at, value, over); break;
    }
  }
};

// The kind of value a timeline field holds, for checking `set`, `to` and `rate`.
struct TimelineValueKind {
  FieldKind kind;
  double max;
};

Change ReadChange(TableReader& reader, const toml::node& field_node, std::string_view field_name,
                  TimelineValueKind value_kind) {
  Change change{Change::Kind::kSet};
  change.at = ReadSeconds(reader.Required("at"), "at");
  const toml::node* set = reader.Optional("set");
  const toml::node* to = reader.Optional("to");
  const toml::node* rate = reader.Optional("rate");
  const toml::node* over = reader.Optional("over");
  const toml::node* per = reader.Optional("per");
  int given = (set != nullptr) + (to != nullptr) + (rate != nullptr);
  if (given != 1) Fail(reader.table(), "a timeline entry needs exactly one of set, to (a ramp) or rate (a rise)");
  bool numeric = value_kind.kind == FieldKind::kNumber;
  if (!numeric && set == nullptr)
    Fail(field_node, fmt::format("\"{}\" can only change with set, not ramp or rise", field_name));
  if (per != nullptr && rate == nullptr) Fail(*per, "per goes with rate");
  if (set != nullptr) {
    if (over != nullptr) Fail(*over, "over goes with to or rate, not set");
    switch (value_kind.kind) {
      case FieldKind::kFlag: change.value = ReadBool(*set, field_name); break;
      case FieldKind::kMask: change.value = static_cast<double>(ReadClockEventReasons(*set)); break;
      default: change.value = ReadNumberOrName(*set, field_name, value_kind.max); break;
    }
    return change;
  }
  if (to != nullptr) {
    if (over == nullptr) Fail(reader.table(), "a ramp (to) needs over, the time it takes");
    change.kind = Change::Kind::kRamp;
    change.value = ReadNonNegative(*to, "to", value_kind.max);
    change.over = ReadSeconds(*over, "over");
    return change;
  }
  change.kind = Change::Kind::kRise;
  double per_seconds = per != nullptr ? ReadSeconds(*per, "per") : 1.0;
  if (per_seconds <= 0) Fail(*per, "per must be longer than zero");
  change.value = ReadNonNegative(*rate, "rate") / per_seconds;
  if (over != nullptr) change.over = ReadSeconds(*over, "over");
  return change;
}

// Sub-item selectors: `fan = N`, `link = N` (all when absent), `pid = N`.
std::vector<size_t> SelectItems(TableReader& reader, std::string_view key, size_t count, uint32_t gpu) {
  if (const toml::node* node = reader.Optional(key)) {
    uint64_t item = ReadUnsigned(*node, key, UINT32_MAX);
    if (item >= count) Fail(*node, fmt::format("gpu {} has no {} {} (it has {})", gpu, key, item, count));
    return {static_cast<size_t>(item)};
  }
  std::vector<size_t> all(count);
  for (size_t i = 0; i < count; ++i) all[i] = i;
  return all;
}

constexpr std::string_view kProcessMemoryField = "processes.used_memory_mib";
constexpr std::string_view kNvLinkFieldPrefix = "nvlink.";

void ApplyTimelineEntry(const toml::table& table, std::vector<GpuSpec>& gpus) {
  TableReader reader(table, "a [[timeline]] entry");
  const toml::node& field_node = reader.Required("field");
  std::string field_name = ReadString(field_node, "field");
  std::vector<uint32_t> targets = ReadGpuTargets(reader, gpus.size());

  // Resolve the field name to the tracks it means on one GPU, and to the kind
  // of value those tracks hold.
  std::optional<GpuField> field = GpuFieldFromKey(field_name);
  std::optional<size_t> nvlink_counter;
  bool nvlink_active = false;
  TimelineValueKind value_kind{FieldKind::kNumber, kForever};
  if (field_name == kProcessMemoryField) {
    // number, any size
  } else if (StartsWith(field_name, kNvLinkFieldPrefix)) {
    std::string_view counter = std::string_view(field_name).substr(kNvLinkFieldPrefix.size());
    nvlink_active = counter == "active";
    auto found = std::find(kNvLinkCounterKeys.begin(), kNvLinkCounterKeys.end(), counter);
    if (found != kNvLinkCounterKeys.end()) nvlink_counter = static_cast<size_t>(found - kNvLinkCounterKeys.begin());
    if (!nvlink_active && !nvlink_counter)
      Fail(field_node,
           fmt::format("\"{}\" is not an nvlink field (active, {})", field_name, fmt::join(kNvLinkCounterKeys, ", ")));
    if (nvlink_active) value_kind = {FieldKind::kFlag, 1};
  } else if (!field) {
    Fail(field_node, fmt::format("\"{}\" is not a GPU field", field_name));
  } else if (InfoOf(*field).kind == FieldKind::kText) {
    Fail(field_node, fmt::format("\"{}\" is fixed for the whole scenario", field_name));
  } else if (*field == GpuField::kProcesses || *field == GpuField::kNvLink) {
    Fail(field_node,
         fmt::format("use \"{}\" or \"nvlink.<counter>\" to change part of \"{}\"", kProcessMemoryField, field_name));
  } else if (*field == GpuField::kFanSpeedsPercent) {
    value_kind = {FieldKind::kNumber, InfoOf(*field).max};
  } else {
    value_kind = {InfoOf(*field).kind, InfoOf(*field).max};
  }
  Change change = ReadChange(reader, field_node, field_name, value_kind);

  std::vector<Track*> tracks;
  const toml::node* pid_node = field_name == kProcessMemoryField ? &reader.Required("pid") : nullptr;
  for (uint32_t index : targets) {
    GpuSpec& gpu = gpus[index];
    if (pid_node != nullptr) {
      uint64_t pid = ReadUnsigned(*pid_node, "pid", UINT32_MAX);
      auto process =
          std::find_if(gpu.processes.begin(), gpu.processes.end(), [&](const ProcessSpec& p) { return p.pid == pid; });
      if (process == gpu.processes.end()) Fail(*pid_node, fmt::format("gpu {} has no process with pid {}", index, pid));
      tracks.push_back(&process->used_memory_mib);
    } else if (nvlink_active || nvlink_counter) {
      for (size_t link : SelectItems(reader, "link", gpu.nvlinks.size(), index))
        tracks.push_back(nvlink_active ? &gpu.nvlinks[link].active : &gpu.nvlinks[link].errors[*nvlink_counter]);
    } else if (*field == GpuField::kFanSpeedsPercent) {
      for (size_t fan : SelectItems(reader, "fan", gpu.fan_speeds_percent.size(), index))
        tracks.push_back(&gpu.fan_speeds_percent[fan]);
    } else {
      if (*field == GpuField::kMemoryUsedMib && gpu.memory_used_from_processes)
        Fail(field_node, fmt::format("gpu {} derives memory_used_mib from its processes; give memory_used_mib a "
                                     "value to change it on the timeline",
                                     index));
      if (*field == GpuField::kTotalEnergyMj && gpu.energy_from_power)
        Fail(field_node, fmt::format("gpu {} derives total_energy_mj from its power draw; give total_energy_mj a "
                                     "value to change it on the timeline",
                                     index));
      tracks.push_back(&gpu.tracks[static_cast<size_t>(*field)]);
    }
  }
  reader.RejectUnknownKeys();
  for (Track* track : tracks) change.ApplyTo(*track);
}

// ---------------------------------------------------------------------------
// Faults and events.

void ReadGpuLost(const toml::table& table, std::vector<GpuSpec>& gpus) {
  TableReader reader(table, "a [[gpu_lost]] entry");
  uint32_t gpu = ReadGpuIndex(reader.Required("gpu"), gpus.size());
  double at = 0;
  if (const toml::node* node = reader.Optional("at")) at = ReadSeconds(*node, "at");
  reader.RejectUnknownKeys();
  gpus[gpu].lost_at = std::min(gpus[gpu].lost_at, at);
}

void CheckGpuCallsNamed(const toml::node& call_node, const CallSet& calls, const std::optional<uint32_t>& gpu) {
  if (!gpu) return;
  for (size_t i = 0; i < kNvmlCallCount; ++i)
    if (calls.test(i) && IsDeviceCall(static_cast<NvmlCall>(i))) return;
  Fail(call_node, "this call does not act on one GPU; leave out gpu");
}

HangFault ReadHang(const toml::table& table, size_t gpu_count) {
  TableReader reader(table, "a [[hang]] entry");
  HangFault hang;
  const toml::node& call = reader.Required("call");
  hang.calls = ReadCalls(call);
  hang.gpu = ReadOptionalGpu(reader, gpu_count);
  CheckGpuCallsNamed(call, hang.calls, hang.gpu);
  hang.window = ReadWindow(reader);
  if (const toml::node* duration = reader.Optional("duration")) {
    if (duration->value_exact<std::string>() != "forever") hang.seconds = ReadSeconds(*duration, "duration");
  }
  reader.RejectUnknownKeys();
  return hang;
}

CallErrorFault ReadCallError(const toml::table& table, size_t gpu_count) {
  TableReader reader(table, "a [[call_error]] entry");
  CallErrorFault fault;
  const toml::node& call = reader.Required("call");
  fault.calls = ReadCalls(call);
  fault.error = ReadErrorCode(reader.Required("error"), "error");
  fault.gpu = ReadOptionalGpu(reader, gpu_count);
  CheckGpuCallsNamed(call, fault.calls, fault.gpu);
  fault.window = ReadWindow(reader);
  reader.RejectUnknownKeys();
  return fault;
}

InitFailure ReadInitFailure(const toml::table& table) {
  TableReader reader(table, "an [[init_failure]] entry");
  InitFailure failure;
  const toml::node& error = reader.Required("error");
  failure.error = ReadErrorCode(error, "error");
  if (failure.error == NVML_SUCCESS) Fail(error, "an init failure needs an error, not success");
  failure.window = ReadWindow(reader);
  reader.RejectUnknownKeys();
  return failure;
}

XidSpec ReadXid(const toml::table& table, size_t gpu_count) {
  TableReader reader(table, "an [[xid]] entry");
  XidSpec xid;
  xid.gpu = ReadGpuIndex(reader.Required("gpu"), gpu_count);
  xid.at = ReadSeconds(reader.Required("at"), "at");
  xid.xid = ReadUnsigned(reader.Required("xid"), "xid", UINT32_MAX);
  reader.RejectUnknownKeys();
  return xid;
}

// Calls `read` for each table of an array of tables ([[name]]).
template <typename Read>
void ForEachTable(const toml::node* node, std::string_view name, Read&& read) {
  if (node == nullptr) return;
  const toml::array* array = node->as_array();
  if (array == nullptr) Fail(*node, fmt::format("{} must be written as [[{}]] tables", name, name));
  for (const toml::node& item : *array) read(ReadTable(item, fmt::format("a [[{}]] entry", name)));
}

// ---------------------------------------------------------------------------
// The whole file.

Scenario ReadScenario(const toml::table& root) {
  TableReader reader(root, "the scenario");
  Scenario scenario;
  if (const toml::node* node = reader.Optional("description")) scenario.description = ReadString(*node, "description");
  if (const toml::node* node = reader.Optional("time_scale")) {
    scenario.time_scale = ReadNumber(*node, "time_scale");
    if (scenario.time_scale <= 0) Fail(*node, "time_scale must be greater than zero");
  }
  if (const toml::node* node = reader.Optional("start")) scenario.start = ReadSeconds(*node, "start");
  scenario.driver_version = "550.54.15";
  scenario.nvml_version = "12.550.54.15";
  scenario.cuda_driver_version = 12040;
  if (const toml::node* node = reader.Optional("driver_version"))
    scenario.driver_version = ReadString(*node, "driver_version");
  if (const toml::node* node = reader.Optional("nvml_version"))
    scenario.nvml_version = ReadString(*node, "nvml_version");
  if (const toml::node* node = reader.Optional("cuda_driver_version"))
    scenario.cuda_driver_version = static_cast<int>(ReadUnsigned(*node, "cuda_driver_version", INT32_MAX));
  if (const toml::node* node = reader.Optional("xid_lookback"))
    scenario.xid_lookback = ReadSeconds(*node, "xid_lookback");

  uint32_t gpu_count = kDefaultGpuCount;
  if (const toml::node* node = reader.Optional("gpu_count"))
    gpu_count = static_cast<uint32_t>(ReadUnsigned(*node, "gpu_count", kMaxGpuCount));

  const toml::table* defaults = nullptr;
  if (const toml::node* node = reader.Optional("defaults")) defaults = &ReadTable(*node, "[defaults]");
  std::map<uint32_t, const toml::table*> overrides;
  if (const toml::node* node = reader.Optional("gpu")) {
    for (auto&& [key, value] : ReadTable(*node, "[gpu]")) {
      auto index = ParseInt<uint32_t>(key.str());
      if (!index) Fail(value, fmt::format("[gpu.{}]: GPU tables are named by index, like [gpu.3]", key.str()));
      if (*index >= gpu_count) Fail(value, fmt::format("[gpu.{}]: gpu_count is {}", *index, gpu_count));
      overrides[*index] = &ReadTable(value, fmt::format("[gpu.{}]", *index));
    }
  }
  for (uint32_t index = 0; index < gpu_count; ++index) {
    GpuSpec gpu = DefaultGpu(index);
    if (defaults != nullptr) ApplyGpuTable(*defaults, /*is_defaults=*/true, gpu);
    if (auto found = overrides.find(index); found != overrides.end())
      ApplyGpuTable(*found->second, /*is_defaults=*/false, gpu);
    scenario.gpus.push_back(std::move(gpu));
  }
  for (uint32_t a = 0; a < gpu_count; ++a) {
    for (uint32_t b = a + 1; b < gpu_count; ++b) {
      for (GpuField field : {GpuField::kUuid, GpuField::kSerial, GpuField::kPciBusId}) {
        if (scenario.gpus[a].Text(field) != scenario.gpus[b].Text(field)) continue;
        auto later = overrides.find(b);
        Fail(later != overrides.end() ? static_cast<const toml::node&>(*later->second) : root,
             fmt::format("gpu {} and gpu {} have the same {}", a, b, KeyOf(field)));
      }
    }
  }

  ForEachTable(reader.Optional("timeline"), "timeline",
               [&](const toml::table& table) { ApplyTimelineEntry(table, scenario.gpus); });
  ForEachTable(reader.Optional("gpu_lost"), "gpu_lost",
               [&](const toml::table& table) { ReadGpuLost(table, scenario.gpus); });
  reader.Optional("cuda");  // the fake CUDA driver's table (testing/fake_cuda)
  ForEachTable(reader.Optional("hang"), "hang",
               [&](const toml::table& table) { scenario.hangs.push_back(ReadHang(table, gpu_count)); });
  ForEachTable(reader.Optional("call_error"), "call_error",
               [&](const toml::table& table) { scenario.call_errors.push_back(ReadCallError(table, gpu_count)); });
  ForEachTable(reader.Optional("init_failure"), "init_failure",
               [&](const toml::table& table) { scenario.init_failures.push_back(ReadInitFailure(table)); });
  ForEachTable(reader.Optional("xid"), "xid",
               [&](const toml::table& table) { scenario.xids.push_back(ReadXid(table, gpu_count)); });
  std::stable_sort(scenario.xids.begin(), scenario.xids.end(),
                   [](const XidSpec& a, const XidSpec& b) { return a.at < b.at; });
  reader.RejectUnknownKeys();
  return scenario;
}

}  // namespace

FieldKind KindOf(GpuField field) { return InfoOf(field).kind; }
std::string_view KeyOf(GpuField field) { return InfoOf(field).key; }

std::optional<GpuField> GpuFieldFromKey(std::string_view key) {
  for (const GpuFieldInfo& info : kGpuFields)
    if (info.key == key) return info.field;
  return std::nullopt;
}

std::optional<uint64_t> ClockEventReasonBit(std::string_view name) {
  for (int shift = 0; shift < 64; ++shift) {
    uint64_t bit = uint64_t{1} << shift;
    std::vector<std::string> names = DecodeClockEventReasons(bit);
    if (names.size() == 1 && names[0] == name && name != "other") return bit;
  }
  return std::nullopt;
}

double GpuSpec::Number(GpuField field, double t) const {
  if (field == GpuField::kMemoryUsedMib && memory_used_from_processes) {
    double sum = 0;
    for (const ProcessSpec& process : processes)
      if (process.RunningAt(t)) sum += std::max(0.0, process.used_memory_mib.At(t));
    return sum;
  }
  // Energy is the integral of power; at the base draw that is a product, and it never goes back.
  if (field == GpuField::kTotalEnergyMj && energy_from_power)
    return std::max(0.0, tracks[static_cast<size_t>(GpuField::kPowerDrawW)].base()) * 1000.0 * std::max(0.0, t);
  // Jitter may push a value past its range; the GPU never reports that.
  return std::clamp(tracks[static_cast<size_t>(field)].At(t), 0.0, InfoOf(field).max);
}

Result<Scenario> ParseScenario(std::string_view toml_text, std::string_view file_name) {
  auto error = [&](uint32_t line, std::string_view message) {
    return Error{fmt::format("scenario {}: {}: {}", file_name, line, message)};
  };
  try {
    toml::table root = toml::parse(toml_text, file_name);
    return ReadScenario(root);
  } catch (const toml::parse_error& e) {
    return error(e.source().begin.line, e.description());
  } catch (const ParseFailure& failure) {
    return error(failure.line, failure.message);
  }
}

}  // namespace gpudoctor::fake_nvml
