#include "logs/pci_device_names.h"

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

LogEvent Line(std::string pci_bus_id, std::string message) {
  LogEvent event;
  event.kind = "pcie_aer";
  event.pci_bus_id = std::move(pci_bus_id);
  event.message = std::move(message);
  return event;
}

// Real lines of testdata/kernel_logs/001.log and 047.log.
const LogEvent kRootPortAer =
    Line("0000:00:03.0", "pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0");
const LogEvent kGpuXid = [] {
  LogEvent event = Line("0000:01:00.0", "NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.");
  event.kind = "xid";
  event.xid = 79;
  return event;
}();

TEST(PciDeviceNames, APortIsNamedAsAPortByTheDriverThatLogged) {
  PciDeviceNames names;
  EXPECT_EQ(names.KindOf("0000:00:03.0", {&kRootPortAer, 1}), PciDeviceKind::kPort);
  EXPECT_EQ(names.Name(kRootPortAer), "PCIe port 0000:00:03.0");
  EXPECT_EQ(names.Name(kGpuXid), "GPU 0000:01:00.0");
}

TEST(PciDeviceNames, TheTopologyNamesTheGpusBehindAPort) {
  PciDeviceNames names({{"0000:00:03.0", 0x8086, 0x060400, ""},
                        {"0000:01:00.0", 0x10de, 0x030200, "0000:00:03.0"},
                        {"0000:00:1f.0", 0x8086, 0x060100, ""}});
  EXPECT_EQ(names.Name(kRootPortAer), "PCIe port 0000:00:03.0 (upstream of GPU 0000:01:00.0)");
}

TEST(PciDeviceNames, GpusBehindASwitchAreUpstreamOfTheRootPortToo) {
  PciDeviceNames names({{"0000:00:01.0", 0x8086, 0x060400, ""},
                        {"0000:02:00.0", 0x1000, 0x060400, "0000:00:01.0"},
                        {"0000:03:00.0", 0x10de, 0x030200, "0000:02:00.0"},
                        {"0000:04:00.0", 0x10de, 0x030200, "0000:02:00.0"}});
  EXPECT_EQ(names.Name("0000:00:01.0", {}), "PCIe port 0000:00:01.0 (upstream of GPU 0000:03:00.0 and GPU 0000:04:00.0)");
}

TEST(PciDeviceNames, SysfsOutranksTheLine) {
  // An NVIDIA device by sysfs is a GPU whatever driver wrote the line.
  PciDeviceNames names({{"0000:3b:00.0", 0x10de, 0x030200, ""}});
  EXPECT_EQ(names.Name(Line("0000:3b:00.0", "pci 0000:3b:00.0: something")), "GPU 0000:3b:00.0");
}

TEST(PciDeviceNames, OnlyAnNvidiaDeviceIsAGpu) {
  PciDeviceNames names;
  LogEvent status = Line("0000:00:03.0", "0000:00:03.0:   device [8086:6f08] error status/mask=00001000/00002000");
  status.fields.push_back({"device_id", "8086:6f08"});
  EXPECT_EQ(names.Name(status), "PCI device 0000:00:03.0");
  status.fields[0].value = "10de:2330";
  EXPECT_EQ(names.Name(status), "GPU 0000:00:03.0");

  EXPECT_EQ(names.Name(Line("0000:5e:00.0", "mlx5_core 0000:5e:00.0: AER: Corrected error")),
            "PCI device 0000:5e:00.0 (mlx5_core)");
  EXPECT_EQ(names.Name(Line("0000:5e:00.0", "something without a driver")), "PCI device 0000:5e:00.0");
  EXPECT_EQ(names.Name(Line("", "no device at all")), "");
}

TEST(PciDeviceNames, ALineAboutAnotherDeviceTellsNothing) {
  // "pcieport 0000:00:03.0: ..." reports an error of the device below it.
  LogEvent event = Line("0000:01:00.0", "pcieport 0000:00:03.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0");
  EXPECT_EQ(PciDeviceNames().Name(event), "PCI device 0000:01:00.0");
}

}  // namespace
}  // namespace gpudoctor
