// PciDevice: one device on the PCI bus as sysfs describes it: what it is
// (vendor and class) and where it sits (the bridge or port above it). The
// host module reads them; log presentations name devices by them, so a
// PCIe port is never called a GPU.
//
//   PciDevice port{"0000:00:03.0", 0x8086, 0x060400, ""};
//   port.IsBridge();  // true: a root or switch port
#pragma once

#include <cstdint>
#include <string>

namespace gpudoctor {

inline constexpr uint32_t kNvidiaVendorId = 0x10de;

struct PciDevice {
  std::string pci_bus_id;       // "0000:00:03.0"
  uint32_t vendor_id = 0;       // 0x8086
  uint32_t class_code = 0;      // 0x060400
  std::string upstream_bus_id;  // the bridge or port above it; empty below a host bridge

  // An NVIDIA VGA or 3D controller.
  bool IsNvidiaGpu() const {
    const uint32_t subclass = class_code >> 8;
    return vendor_id == kNvidiaVendorId && (subclass == 0x0300 || subclass == 0x0302);
  }
  // A PCI-to-PCI bridge: a root port or a switch port.
  bool IsBridge() const { return (class_code >> 8) == 0x0604; }
  bool operator==(const PciDevice&) const = default;
};

}  // namespace gpudoctor
