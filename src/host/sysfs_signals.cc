#include <re2/re2.h>

#include <algorithm>
#include <cmath>

#include "common/text.h"
#include "host/host_parsers.h"
#include "host/readers.h"

namespace gpudoctor::host_internal {
namespace {

constexpr std::string_view kPciDevices = "/sys/bus/pci/devices";

std::optional<uint32_t> ReadHex(const HostEnv& env, const std::string& path) {
  Result<std::string> text = env.ReadFile(path, 64);
  if (!text) return std::nullopt;
  std::string_view value = Trim(*text);
  if (StartsWith(value, "0x") || StartsWith(value, "0X")) value.remove_prefix(2);
  return ParseInt<uint32_t>(value, 16);
}

Result<uint32_t> ParseWidth(std::string_view text) {
  auto width = ParseInt<uint32_t>(text);
  // A device that fell off the bus can report 0 or 255 ("x255").
  if (!width || *width == 0 || *width > 32) return Error{"link width '" + std::string(Trim(text)) + "'"};
  return *width;
}

PcieLink ReadLink(const HostEnv& env, const std::string& device_dir) {
  PcieLink link;
  link.current_speed_gts = ReadParsed<double>(env, device_dir + "/current_link_speed", ParsePcieSpeed);
  link.max_speed_gts = ReadParsed<double>(env, device_dir + "/max_link_speed", ParsePcieSpeed);
  link.current_width = ReadParsed<uint32_t>(env, device_dir + "/current_link_width", ParseWidth);
  link.max_width = ReadParsed<uint32_t>(env, device_dir + "/max_link_width", ParseWidth);
  return link;
}

Field<std::vector<PciGpuDevice>> ReadPciGpus(const HostEnv& env) {
  if (!env.Exists(kPciDevices)) return Field<std::vector<PciGpuDevice>>::NotSupported();
  Result<std::vector<DirEntry>> entries = env.ListDir(kPciDevices);
  if (!entries) return Field<std::vector<PciGpuDevice>>::Failed(entries.error().message);
  std::vector<PciGpuDevice> gpus;
  for (const DirEntry& entry : *entries) {
    const std::string dir = std::string(kPciDevices) + "/" + entry.name;
    const PciDevice identity{.vendor_id = ReadHex(env, dir + "/vendor").value_or(0),
                             .class_code = ReadHex(env, dir + "/class").value_or(0)};
    if (!identity.IsNvidiaGpu()) continue;
    PciGpuDevice device;
    device.pci_bus_id = NormalizePciBusId(entry.name).value_or(entry.name);
    device.class_code = identity.class_code;
    device.device_id = ReadHex(env, dir + "/device").value_or(0);
    if (Result<std::string> driver = env.ReadLink(dir + "/driver")) {
      std::string_view target = *driver;
      device.driver = std::string(target.substr(target.rfind('/') + 1));
    }
    device.link = ReadLink(env, dir);
    gpus.push_back(std::move(device));
  }
  std::sort(gpus.begin(), gpus.end(),
            [](const PciGpuDevice& a, const PciGpuDevice& b) { return a.pci_bus_id < b.pci_bus_id; });
  return Field<std::vector<PciGpuDevice>>::Value(std::move(gpus));
}

// The bridge or port above the device at `device_dir`: /sys/bus/pci/devices
// entries link to "../../../devices/pci0000:00/0000:00:03.0/0000:01:00.0",
// whose parent directory is the upstream device (or the host bridge, "pci0000:00").
std::string UpstreamOf(const HostEnv& env, const std::string& device_dir) {
  Result<std::string> target = env.ReadLink(device_dir);
  if (!target) return "";
  std::vector<std::string_view> parts = Split(*target, '/');
  if (parts.size() < 2) return "";
  std::string_view parent = parts[parts.size() - 2];
  std::optional<std::string> id = NormalizePciBusId(parent);
  return id && EqualsIgnoreCase(*id, parent) ? *id : "";
}

struct HwmonKind {
  std::string_view prefix;
  SensorKind kind;
  std::string_view unit;
  double scale;  // sysfs unit -> `unit`
};
constexpr HwmonKind kHwmonKinds[] = {
    {"temp", SensorKind::kTemperature, "C", 1e-3}, {"fan", SensorKind::kFan, "RPM", 1},
    {"in", SensorKind::kVoltage, "V", 1e-3},       {"power", SensorKind::kPower, "W", 1e-6},
    {"curr", SensorKind::kCurrent, "A", 1e-3},
};

std::optional<double> ReadNumber(const HostEnv& env, const std::string& path) {
  Result<std::string> text = env.ReadFile(path, 64);
  if (!text) return std::nullopt;
  auto value = ParseDouble(*text);
  if (!value || !std::isfinite(*value)) return std::nullopt;
  return value;
}

bool FlagSet(const HostEnv& env, const std::string& path) { return ReadNumber(env, path).value_or(0) != 0; }

// One hwmon chip: every <kind><n>_input with its label, limits and alarms.
void ReadHwmonChip(const HostEnv& env, const std::string& dir, std::vector<Sensor>& sensors) {
  Result<std::vector<DirEntry>> files = env.ListDir(dir);
  if (!files) return;
  std::string chip = "hwmon";
  if (Result<std::string> name = env.ReadFile(dir + "/name", 128)) chip = std::string(Trim(*name));
  static const RE2 kInput(R"(^([a-z]+)(\d+)_input$)");
  std::vector<std::string> inputs;
  for (const DirEntry& file : *files) inputs.push_back(file.name);
  std::sort(inputs.begin(), inputs.end());
  for (const std::string& file : inputs) {
    std::string prefix, number;
    if (!RE2::FullMatch(file, kInput, &prefix, &number)) continue;
    auto kind = std::find_if(std::begin(kHwmonKinds), std::end(kHwmonKinds),
                             [&](const HwmonKind& k) { return k.prefix == prefix; });
    if (kind == std::end(kHwmonKinds)) continue;
    const std::string base = dir + "/" + prefix + number;
    Sensor sensor;
    sensor.source = "hwmon:" + chip;
    sensor.kind = kind->kind;
    sensor.unit = std::string(kind->unit);
    Result<std::string> label = env.ReadFile(base + "_label", 128);
    sensor.name = label ? std::string(Trim(*label)) : prefix + number;
    std::optional<double> raw = ReadNumber(env, base + "_input");
    if (!raw) {
      sensor.status = SensorStatus::kNoReading;
      sensors.push_back(std::move(sensor));
      continue;
    }
    sensor.value = *raw * kind->scale;
    std::optional<double> critical = ReadNumber(env, base + "_crit");
    std::optional<double> maximum = ReadNumber(env, base + "_max");
    if (FlagSet(env, base + "_crit_alarm") || FlagSet(env, base + "_fault") ||
        (kind->kind == SensorKind::kTemperature && critical && *critical > 0 && *raw >= *critical)) {
      sensor.status = SensorStatus::kCritical;
    } else if (FlagSet(env, base + "_alarm") || FlagSet(env, base + "_max_alarm") ||
               (kind->kind == SensorKind::kTemperature && maximum && *maximum > 0 && *raw >= *maximum)) {
      sensor.status = SensorStatus::kWarning;
    }
    sensor.detail = prefix + number + "_input=" + std::to_string(static_cast<long long>(*raw));
    if (critical) sensor.detail += " crit=" + std::to_string(static_cast<long long>(*critical));
    if (maximum) sensor.detail += " max=" + std::to_string(static_cast<long long>(*maximum));
    sensors.push_back(std::move(sensor));
  }
}

Field<std::vector<Sensor>> ReadHwmon(const HostEnv& env) {
  constexpr std::string_view kHwmon = "/sys/class/hwmon";
  if (!env.Exists(kHwmon)) return Field<std::vector<Sensor>>::NotSupported();
  Result<std::vector<DirEntry>> chips = env.ListDir(kHwmon);
  if (!chips) return Field<std::vector<Sensor>>::Failed(chips.error().message);
  std::vector<std::string> names;
  for (const DirEntry& chip : *chips) names.push_back(chip.name);
  std::sort(names.begin(), names.end());
  std::vector<Sensor> sensors;
  for (const std::string& name : names) ReadHwmonChip(env, std::string(kHwmon) + "/" + name, sensors);
  return Field<std::vector<Sensor>>::Value(std::move(sensors));
}

Field<std::string> ReadNvidiaModuleVersion(const HostEnv& env) {
  Field<std::string> version = ReadParsed<std::string>(env, "/sys/module/nvidia/version", ParseNvidiaModuleVersion);
  if (!version.not_supported()) return version;
  return ReadParsed<std::string>(env, "/proc/driver/nvidia/version", ParseNvidiaModuleVersion);
}

Field<bool> ReadNouveauLoaded(const HostEnv& env) {
  if (!env.Exists("/sys/module")) return Field<bool>::NotSupported();
  return Field<bool>::Value(env.Exists("/sys/module/nouveau"));
}

}  // namespace

void ReadSysfsSignals(const HostEnv& env, HostSignals& signals) {
  signals.online_cpus = ReadParsed<uint32_t>(env, "/sys/devices/system/cpu/online", ParseCpuList);
  signals.pci_gpus = ReadPciGpus(env);
  signals.hwmon_sensors = ReadHwmon(env);
  signals.nvidia_module_version = ReadNvidiaModuleVersion(env);
  signals.nvidia_driver_built_at =
      ReadParsed<WallTime>(env, "/proc/driver/nvidia/version", ParseNvidiaDriverBuildDate);
  signals.nouveau_loaded = ReadNouveauLoaded(env);
}

}  // namespace gpudoctor::host_internal

namespace gpudoctor {

Field<std::vector<PciDevice>> ReadPciDevices(const HostEnv& env) {
  using host_internal::kPciDevices, host_internal::ReadHex, host_internal::UpstreamOf;
  if (!env.Exists(kPciDevices)) return Field<std::vector<PciDevice>>::NotSupported();
  Result<std::vector<DirEntry>> entries = env.ListDir(kPciDevices);
  if (!entries) return Field<std::vector<PciDevice>>::Failed(entries.error().message);
  std::vector<PciDevice> devices;
  for (const DirEntry& entry : *entries) {
    const std::string dir = std::string(kPciDevices) + "/" + entry.name;
    devices.push_back({NormalizePciBusId(entry.name).value_or(entry.name), ReadHex(env, dir + "/vendor").value_or(0),
                       ReadHex(env, dir + "/class").value_or(0), UpstreamOf(env, dir)});
  }
  std::sort(devices.begin(), devices.end(),
            [](const PciDevice& a, const PciDevice& b) { return a.pci_bus_id < b.pci_bus_id; });
  return Field<std::vector<PciDevice>>::Value(std::move(devices));
}

}  // namespace gpudoctor
