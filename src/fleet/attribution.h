// Card or slot? Attributes GPU errors to the card (the serial) or to the slot
// it sat in (host + PCI address: the slot, riser or board), from the history
// of which serial sat where and the errors seen there. Pure: the history comes
// in (fleet_history.h reads it from Prometheus), verdicts go out.
//
// The rules (docs/fleet.md):
//   - errors that follow one serial into two or more slots: the card;
//   - errors in one slot from two or more serials (none of them a bad card): the slot;
//   - a card that erred in one slot, then ran clean elsewhere for `clean_for`: the slot,
//     or nothing if the slot's new card is clean too (the move itself may have fixed it);
//   - a card moved too recently to tell: a swap under way;
//   - a card that erred in one slot and never moved: the swap experiment that would tell.
//
//   std::vector<Verdict> verdicts = AttributeErrors(placements, episodes, now, {.clean_for = 24h});
#pragma once

#include <compare>
#include <optional>
#include <tuple>
#include <string>
#include <vector>

#include "common/clock.h"

namespace gpudoctor {

// Where a card sits: the host and the PCI address (a fixed slot on a board);
// `slot_name` is the firmware's name for it, for people.
struct SlotKey {
  std::string hostname;
  std::string pci_bus_id;
  std::string slot_name;
  auto operator<=>(const SlotKey& other) const {
    return std::tie(hostname, pci_bus_id) <=> std::tie(other.hostname, other.pci_bus_id);
  }
  bool operator==(const SlotKey& other) const {
    return hostname == other.hostname && pci_bus_id == other.pci_bus_id;
  }
  std::string Describe() const;  // "gpu-07 0000:17:00.0 (slot 3)"
};

// One stay of a card in a slot.
struct Placement {
  std::string serial;
  SlotKey slot;
  WallTime from;
  WallTime to;        // the last time it was seen there
  std::string model;  // "NVIDIA H100 80GB HBM3", for choosing a swap partner
  std::string gpu;    // NVML's index there
};

enum class ErrorKind { kXid, kUncorrectableEcc, kRowRemap, kPcieReplays, kFellOffBus };
const char* ErrorKindName(ErrorKind kind);  // "xid", "uncorrectable_ecc", ...

// Errors seen in a slot at a time (one query step's worth).
struct ErrorEpisode {
  SlotKey slot;
  WallTime time;
  ErrorKind kind = ErrorKind::kXid;
  double count = 1;
};

enum class Blame { kCard, kSlot, kUndetermined };
const char* BlameName(Blame blame);  // "card", "slot", "undetermined"

// Move `serial` from `from` to `to`, and the good card `partner` from `to` into `from`.
struct SwapProposal {
  std::string serial;
  SlotKey from;
  std::string partner;
  SlotKey to;
};

struct Verdict {
  Blame blame = Blame::kUndetermined;
  std::string serial;  // the suspect card (for a slot: the last card that erred there)
  SlotKey slot;        // the slot it erred in (for a card: the last one)
  double confidence = 0;  // 0-1
  std::string summary;    // one line
  std::vector<std::string> evidence;  // which serial, where, when, what
  std::optional<SwapProposal> proposal;
  bool swap_pending = false;  // a move was seen, too recent to judge
};

struct AttributionOptions {
  // How long a card (or slot) must run clean after a move to count as clean.
  Duration clean_for = std::chrono::hours(24);
  // How far after a placement's last sighting an error still belongs to it (a query step).
  Duration slack = std::chrono::minutes(5);
};

std::vector<Verdict> AttributeErrors(const std::vector<Placement>& placements,
                                     const std::vector<ErrorEpisode>& episodes, WallTime now,
                                     const AttributionOptions& options = {});

}  // namespace gpudoctor
