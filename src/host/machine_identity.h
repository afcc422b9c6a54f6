// MachineIdentity: which physical machine and which slot each GPU sits in,
// for telling a bad card from a bad slot across a fleet (docs/fleet.md).
//
// The board and chassis serials come from the firmware's DMI tables
// (/sys/class/dmi/id, readable by root only on most machines); slot names
// from the PCI hotplug slots the firmware describes (/sys/bus/pci/slots/*/address).
// Anything unreadable is left empty: the fleet then keys a slot by host and
// PCI address alone.
//
//   MachineIdentity machine = ReadMachineIdentity(env);
//   machine.board_serial             // "PM1234567890", or "" when not readable
//   machine.SlotOf("0000:17:00.0")  // "3" (the slot whose address is 0000:17:00), or ""
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "host/host_env.h"

namespace gpudoctor {

struct MachineIdentity {
  std::string board_serial;
  std::string chassis_serial;
  std::string product_name;  // "PowerEdge XE9680"
  std::map<std::string, std::string> slots;  // "0000:17:00" (domain:bus:device) -> slot name

  // The slot name of a PCI function "dddd:bb:dd.f"; "" when no slot claims it.
  std::string SlotOf(std::string_view pci_bus_id) const;
  bool operator==(const MachineIdentity&) const = default;
};

// Never fails: what cannot be read (no DMI, no permission, no slots) stays empty.
// Placeholder serials firmware leaves unset ("To Be Filled By O.E.M.", "0123456789") count as empty.
MachineIdentity ReadMachineIdentity(const HostEnv& env);

}  // namespace gpudoctor
