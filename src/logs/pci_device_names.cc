#include "logs/pci_device_names.h"

#include <re2/re2.h>

#include <optional>

#include "common/text.h"

namespace gpudoctor {
namespace {

// The kernel driver that wrote `event`'s line about the device at `bus`
// ("pcieport 0000:00:03.0: AER: ..." -> "pcieport"); empty when the line
// starts otherwise or is about another device.
std::string LineDriver(const LogEvent& event, std::string_view bus) {
  static const RE2 kDevicePrefix(R"(^(\S+) ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):)");
  std::string driver, id;
  if (!RE2::PartialMatch(event.message, kDevicePrefix, &driver, &id)) return "";
  return NormalizePciBusId(id) == NormalizePciBusId(bus) ? driver : "";
}

// What one line says the device at `bus` is, when it says.
std::optional<PciDeviceKind> KindFromLine(const LogEvent& event, std::string_view bus) {
  if (NormalizePciBusId(event.pci_bus_id) != NormalizePciBusId(bus)) return std::nullopt;
  const std::string driver = LineDriver(event, bus);
  if (driver == "pcieport") return PciDeviceKind::kPort;
  if (driver == "nvidia" || StartsWith(event.message, "NVRM") || event.xid) return PciDeviceKind::kGpu;
  if (!driver.empty() && driver != "pci") return PciDeviceKind::kOther;  // "pci" is the core, any device
  // An AER status line: "device [8086:6f08] error status/mask=...".
  if (std::string_view device = event.Field("device_id"); device.size() > 4 && device[4] == ':') {
    return ParseInt<uint32_t>(device.substr(0, 4), 16) == kNvidiaVendorId ? PciDeviceKind::kGpu
                                                                           : PciDeviceKind::kOther;
  }
  return std::nullopt;
}

PciDeviceKind KindFromSysfs(const PciDevice& device) {
  if (device.IsNvidiaGpu()) return PciDeviceKind::kGpu;
  return device.IsBridge() ? PciDeviceKind::kPort : PciDeviceKind::kOther;
}

}  // namespace

PciDeviceNames::PciDeviceNames(std::vector<PciDevice> devices) {
  for (PciDevice& device : devices) {
    device.pci_bus_id = NormalizePciBusId(device.pci_bus_id).value_or(device.pci_bus_id);
    device.upstream_bus_id = NormalizePciBusId(device.upstream_bus_id).value_or(device.upstream_bus_id);
    devices_.emplace(device.pci_bus_id, std::move(device));
  }
}

PciDeviceKind PciDeviceNames::KindOf(std::string_view pci_bus_id, std::span<const LogEvent> lines) const {
  auto known = devices_.find(NormalizePciBusId(pci_bus_id).value_or(std::string(pci_bus_id)));
  if (known != devices_.end()) return KindFromSysfs(known->second);
  for (const LogEvent& line : lines)
    if (std::optional<PciDeviceKind> kind = KindFromLine(line, pci_bus_id)) return *kind;
  return PciDeviceKind::kOther;  // only an NVIDIA device is a GPU, and nothing says this one is
}

std::string PciDeviceNames::Name(std::string_view pci_bus_id, std::span<const LogEvent> lines) const {
  const std::string bus = NormalizePciBusId(pci_bus_id).value_or(std::string(pci_bus_id));
  switch (KindOf(bus, lines)) {
    case PciDeviceKind::kGpu: return "GPU " + bus;
    case PciDeviceKind::kPort: {
      const std::vector<std::string> gpus = GpusBelow(bus);
      if (gpus.empty()) return "PCIe port " + bus;
      std::string list;
      for (size_t i = 0; i < gpus.size(); ++i)
        list += (i == 0 ? "" : i + 1 == gpus.size() ? " and " : ", ") + ("GPU " + gpus[i]);
      return "PCIe port " + bus + " (upstream of " + list + ")";
    }
    case PciDeviceKind::kOther: break;
  }
  for (const LogEvent& line : lines)
    if (std::string driver = LineDriver(line, bus); !driver.empty() && driver != "pci")
      return "PCI device " + bus + " (" + driver + ")";
  return "PCI device " + bus;
}

std::string PciDeviceNames::Name(const LogEvent& event) const {
  if (event.pci_bus_id.empty()) return "";
  return Name(event.pci_bus_id, std::span<const LogEvent>(&event, 1));
}

std::vector<std::string> PciDeviceNames::GpusBelow(const std::string& port) const {
  std::vector<std::string> gpus;
  for (const auto& [bus, device] : devices_) {
    if (!device.IsNvidiaGpu()) continue;
    // Up the chain of bridges; a bound on the depth guards against a loop in odd data.
    std::string upstream = device.upstream_bus_id;
    for (int depth = 0; depth < 32 && !upstream.empty() && upstream != port; ++depth) {
      auto above = devices_.find(upstream);
      upstream = above == devices_.end() ? "" : above->second.upstream_bus_id;
    }
    if (upstream == port) gpus.push_back(bus);
  }
  return gpus;
}

}  // namespace gpudoctor
