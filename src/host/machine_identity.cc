#include "host/machine_identity.h"

#include <algorithm>
#include <array>
#include <optional>

#include "common/text.h"

namespace gpudoctor {
namespace {

// Values vendors leave in unset DMI fields; none names a machine.
bool IsPlaceholder(std::string_view value) {
  std::string lower = ToLower(value);
  constexpr std::array kPlaceholders{"to be filled by o.e.m.", "default string", "not specified", "system serial number",
                                     "chassis serial number", "0123456789", "none", "n/a", "0"};
  return std::find(kPlaceholders.begin(), kPlaceholders.end(), lower) != kPlaceholders.end();
}

std::string ReadDmiField(const HostEnv& env, std::string_view name) {
  auto text = env.ReadFile("/sys/class/dmi/id/" + std::string(name), 4096);
  if (!text) return {};
  std::string value(Trim(*text));
  return IsPlaceholder(value) ? std::string() : value;
}

// "0000:17:00.0" -> "0000:17:00"; a slot's address file names the device without its function.
std::string_view WithoutFunction(std::string_view pci_bus_id) {
  size_t dot = pci_bus_id.rfind('.');
  return dot == std::string_view::npos ? pci_bus_id : pci_bus_id.substr(0, dot);
}

}  // namespace

std::string MachineIdentity::SlotOf(std::string_view pci_bus_id) const {
  std::optional<std::string> normal = NormalizePciBusId(pci_bus_id);
  if (!normal) return {};
  auto found = slots.find(std::string(WithoutFunction(*normal)));
  return found == slots.end() ? std::string() : found->second;
}

MachineIdentity ReadMachineIdentity(const HostEnv& env) {
  MachineIdentity machine{.board_serial = ReadDmiField(env, "board_serial"),
                          .chassis_serial = ReadDmiField(env, "chassis_serial"),
                          .product_name = ReadDmiField(env, "product_name")};
  constexpr std::string_view kSlots = "/sys/bus/pci/slots";
  auto entries = env.ListDir(kSlots);
  if (!entries) return machine;
  for (const DirEntry& entry : *entries) {
    auto address = env.ReadFile(std::string(kSlots) + "/" + entry.name + "/address", 256);
    if (!address) continue;
    std::string key = ToLower(Trim(*address));
    if (!key.empty()) machine.slots.emplace(std::move(key), entry.name);
  }
  return machine;
}

}  // namespace gpudoctor
