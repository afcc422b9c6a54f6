// PciDeviceNames: how a log presentation names the PCI device an event is
// about. Only NVIDIA display and 3D controllers are GPUs: an AER error logged
// by an Intel root port is about "PCIe port 0000:00:03.0", and when the
// machine's topology is known, the port is named with the GPUs behind it.
//
// What a device is comes, best first, from sysfs (its vendor and class, read
// by the caller on the machine the log is from), from the kernel driver that
// wrote the line ("pcieport 0000:00:03.0: ..." is a port, "nvidia ..." or
// NVRM a GPU), or from the vendor id an AER status line gives
// ("device [8086:6f08]").
//
//   PciDeviceNames names({{"0000:00:03.0", 0x8086, 0x060400, ""},
//                         {"0000:01:00.0", 0x10de, 0x030200, "0000:00:03.0"}});
//   names.Name(aer_event)  // "PCIe port 0000:00:03.0 (upstream of GPU 0000:01:00.0)"
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/pci_device.h"
#include "logs/event.h"

namespace gpudoctor {

enum class PciDeviceKind { kGpu, kPort, kOther };

class PciDeviceNames {
 public:
  // `devices`: the bus of the machine the log is from, or none when unknown.
  explicit PciDeviceNames(std::vector<PciDevice> devices = {});

  // What the device at `pci_bus_id` is, judged by sysfs, else by the first
  // of `lines` that tells (lines about other devices are passed over).
  PciDeviceKind KindOf(std::string_view pci_bus_id, std::span<const LogEvent> lines) const;
  // "GPU 0000:01:00.0", "PCIe port 0000:00:03.0 (upstream of GPU 0000:01:00.0)",
  // "PCI device 0000:00:1f.0 (mlx5_core)".
  std::string Name(std::string_view pci_bus_id, std::span<const LogEvent> lines) const;
  // The device `event` names; empty when it names none.
  std::string Name(const LogEvent& event) const;

 private:
  // The GPUs below `port` in the topology.
  std::vector<std::string> GpusBelow(const std::string& port) const;

  std::map<std::string, PciDevice, std::less<>> devices_;  // by normalised bus id
};

}  // namespace gpudoctor
