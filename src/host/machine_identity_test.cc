#include "host/machine_identity.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/scratch_dir.h"

namespace gpudoctor {
namespace {

class NoCommands final : public CommandRunner {
 public:
  CommandResult Run(const std::vector<std::string>&, Duration) override { return {}; }
};

class MachineIdentityTest : public ::testing::Test {
 protected:
  void Write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(dir_.File(path)).parent_path());
    dir_.Write(path, text);
  }
  MachineIdentity Read() {
    NoCommands runner;
    LinuxHostEnv env(dir_.path().string(), runner);
    return ReadMachineIdentity(env);
  }
  testing::ScratchDir dir_;
};

TEST_F(MachineIdentityTest, ReadsSerialsAndSlots) {
  Write("sys/class/dmi/id/board_serial", "PM1234567890\n");
  Write("sys/class/dmi/id/chassis_serial", "CN7X9\n");
  Write("sys/class/dmi/id/product_name", "PowerEdge XE9680\n");
  Write("sys/bus/pci/slots/3/address", "0000:17:00\n");
  Write("sys/bus/pci/slots/7/address", "0000:3b:00\n");
  MachineIdentity machine = Read();
  EXPECT_EQ(machine.board_serial, "PM1234567890");
  EXPECT_EQ(machine.chassis_serial, "CN7X9");
  EXPECT_EQ(machine.product_name, "PowerEdge XE9680");
  EXPECT_EQ(machine.SlotOf("0000:17:00.0"), "3");
  EXPECT_EQ(machine.SlotOf("00000000:3B:00.0"), "7");  // NVML's spelling
  EXPECT_EQ(machine.SlotOf("0000:5d:00.0"), "");
  EXPECT_EQ(machine.SlotOf("not a bus id"), "");
}

TEST_F(MachineIdentityTest, PlaceholdersAndMissingFilesAreEmpty) {
  Write("sys/class/dmi/id/board_serial", "To Be Filled By O.E.M.\n");
  Write("sys/class/dmi/id/chassis_serial", "0123456789");
  Write("sys/bus/pci/slots/1/power", "1\n");  // a slot without an address
  MachineIdentity machine = Read();
  EXPECT_EQ(machine, MachineIdentity{});
}

}  // namespace
}  // namespace gpudoctor
