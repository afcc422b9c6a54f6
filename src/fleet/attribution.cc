#include "fleet/attribution.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/text.h"

namespace gpudoctor {
namespace {

constexpr size_t kErrorKinds = 5;

// Everything one card did wrong in one slot.
struct Tally {
  WallTime first = WallTime::max();
  WallTime last = WallTime::min();
  double counts[kErrorKinds] = {};

  void Add(const ErrorEpisode& episode) {
    first = std::min(first, episode.time);
    last = std::max(last, episode.time);
    counts[static_cast<size_t>(episode.kind)] += episode.count;
  }
  std::string What() const {
    std::vector<std::string> parts;
    for (size_t kind = 0; kind < kErrorKinds; ++kind) {
      if (counts[kind] > 0) {
        parts.push_back(fmt::format("{:g} {}", counts[kind], ErrorKindName(static_cast<ErrorKind>(kind))));
      }
    }
    return fmt::format("{}", fmt::join(parts, ", "));
  }
};

std::string Span(WallTime from, WallTime to) {
  return from == to ? FormatIsoUtc(from) : FormatIsoUtc(from) + " to " + FormatIsoUtc(to);
}

std::string SerialName(const std::string& serial) { return serial.empty() ? "an unidentified card" : serial; }

class Attributor {
 public:
  Attributor(const std::vector<Placement>& placements, WallTime now, const AttributionOptions& options)
      : placements_(placements), now_(now), options_(options) {}

  void Add(const ErrorEpisode& episode) {
    const Placement* placed = PlacementAt(episode.slot, episode.time);
    const std::string serial = placed ? placed->serial : std::string();
    SlotKey slot = placed ? placed->slot : episode.slot;
    by_serial_[serial][slot].Add(episode);
    by_slot_[slot][serial].Add(episode);
  }

  std::vector<Verdict> Judge() {
    std::vector<Verdict> verdicts;
    std::set<std::string> cards;
    for (const auto& [serial, slots] : by_serial_) {
      if (!serial.empty() && slots.size() >= 2) {
        cards.insert(serial);
        verdicts.push_back(CardVerdict(serial, slots));
      }
    }
    std::set<std::string> explained = cards;
    for (const auto& [slot, serials] : by_slot_) {
      std::vector<std::string> erred;
      for (const auto& [serial, tally] : serials) {
        if (!serial.empty() && !cards.contains(serial)) erred.push_back(serial);
      }
      if (erred.size() >= 2) {
        verdicts.push_back(SlotVerdict(slot, erred));
        explained.insert(erred.begin(), erred.end());
      }
    }
    for (const auto& [serial, slots] : by_serial_) {
      if (explained.contains(serial)) continue;
      for (const auto& [slot, tally] : slots) verdicts.push_back(SingleSlotVerdict(serial, slot, tally));
    }
    std::stable_sort(verdicts.begin(), verdicts.end(), [](const Verdict& a, const Verdict& b) {
      return (a.blame != Blame::kUndetermined) > (b.blame != Blame::kUndetermined) ||
             ((a.blame != Blame::kUndetermined) == (b.blame != Blame::kUndetermined) && a.confidence > b.confidence);
    });
    return verdicts;
  }

 private:
  const Placement* PlacementAt(const SlotKey& slot, WallTime time) const {
    // The card whose stay covers the time; only when none does, one seen within the slack (an
    // error between two samples): the newest begun by then, else the first to begin after.
    auto covers = [time](const Placement& p) { return p.from <= time && time <= p.to; };
    auto better = [&](const Placement& a, const Placement& b) {
      if (covers(a) != covers(b)) return covers(a);
      const bool a_began = a.from <= time, b_began = b.from <= time;
      if (a_began != b_began) return a_began;
      return a_began ? a.from > b.from : a.from < b.from;
    };
    const Placement* best = nullptr;
    for (const Placement& p : placements_) {
      if (!(p.slot == slot) || time < p.from - options_.slack || time > p.to + options_.slack) continue;
      if (!best || better(p, *best)) best = &p;
    }
    return best;
  }

  std::string Evidence(const std::string& serial, const SlotKey& slot, const Tally& tally) const {
    return fmt::format("{} in {}: {} ({})", SerialName(serial), slot.Describe(), tally.What(),
                       Span(tally.first, tally.last));
  }

  Verdict CardVerdict(const std::string& serial, const std::map<SlotKey, Tally>& slots) const {
    Verdict verdict{.blame = Blame::kCard, .serial = serial, .confidence = slots.size() >= 3 ? 0.95 : 0.85};
    WallTime latest = WallTime::min();
    for (const auto& [slot, tally] : slots) {
      verdict.evidence.push_back(Evidence(serial, slot, tally));
      if (tally.last > latest) {
        latest = tally.last;
        verdict.slot = slot;
      }
    }
    verdict.summary = fmt::format("the card: errors followed serial {} into {} slots; replace or RMA it", serial,
                                  slots.size());
    return verdict;
  }

  Verdict SlotVerdict(const SlotKey& slot, const std::vector<std::string>& serials) const {
    Verdict verdict{.blame = Blame::kSlot, .slot = slot, .confidence = serials.size() >= 3 ? 0.95 : 0.85};
    WallTime latest = WallTime::min();
    for (const std::string& serial : serials) {
      const Tally& tally = by_slot_.at(slot).at(serial);
      verdict.evidence.push_back(Evidence(serial, slot, tally));
      if (tally.last > latest) {
        latest = tally.last;
        verdict.serial = serial;
      }
    }
    verdict.summary = fmt::format("the slot: {} different cards erred in {}; check its riser, cabling and board",
                                  serials.size(), slot.Describe());
    return verdict;
  }

  // Placements of `serial` that began after `since` in a slot other than `slot`, newest last.
  const Placement* MovedAway(const std::string& serial, const SlotKey& slot, WallTime since) const {
    const Placement* latest = nullptr;
    for (const Placement& p : placements_) {
      if (p.serial != serial || p.slot == slot || p.to < since) continue;
      if (!latest || p.from > latest->from) latest = &p;
    }
    return latest;
  }

  // The card that took `slot` after `since`, other than `serial`.
  const Placement* Successor(const SlotKey& slot, const std::string& serial, WallTime since) const {
    const Placement* latest = nullptr;
    for (const Placement& p : placements_) {
      if (!(p.slot == slot) || p.serial == serial || p.to < since) continue;
      if (!latest || p.from > latest->from) latest = &p;
    }
    return latest;
  }

  Verdict SingleSlotVerdict(const std::string& serial, const SlotKey& slot, const Tally& tally) const {
    Verdict verdict{.serial = serial, .slot = slot};
    verdict.evidence.push_back(Evidence(serial, slot, tally));
    if (serial.empty()) {
      verdict.confidence = 0.2;
      verdict.summary = "errors in " + slot.Describe() + " from a card whose serial was never reported";
      return verdict;
    }
    const Placement* moved = MovedAway(serial, slot, tally.last);
    if (!moved) {
      verdict.confidence = 0.3;
      verdict.proposal = ProposeSwap(serial, slot);
      verdict.summary = verdict.proposal
                            ? fmt::format("card or slot? swap {} with the good card {} in {} and watch which errs",
                                          serial, verdict.proposal->partner, verdict.proposal->to.Describe())
                            : fmt::format("card or slot? move {} to another slot and a good card into {}", serial,
                                          slot.Describe());
      return verdict;
    }
    const Duration clean = moved->to - std::max(moved->from, tally.last);
    verdict.evidence.push_back(fmt::format("moved: {} sits in {} since {}, clean for {}", serial,
                                           moved->slot.Describe(), FormatIsoUtc(moved->from),
                                           FormatDuration(clean)));
    const Placement* successor = Successor(slot, serial, tally.last);
    Duration successor_clean{};
    if (successor) {
      successor_clean = successor->to - std::max(successor->from, tally.last);
      verdict.evidence.push_back(fmt::format("{} sits in {} since {}, clean for {}", successor->serial,
                                             slot.Describe(), FormatIsoUtc(successor->from),
                                             FormatDuration(successor_clean)));
    }
    if (clean < options_.clean_for) {
      verdict.confidence = 0.3;
      verdict.swap_pending = true;
      verdict.summary = fmt::format("swap under way: {} has run clean in {} for {} of the {} that tell",
                                    serial, moved->slot.Describe(), FormatDuration(clean),
                                    FormatDuration(options_.clean_for));
      return verdict;
    }
    if (successor && successor_clean >= options_.clean_for) {
      verdict.confidence = 0.4;
      verdict.summary = fmt::format(
          "neither: since the move, {} and the card now in {} have both run clean; reseating may have fixed it",
          serial, slot.Describe());
      return verdict;
    }
    verdict.blame = Blame::kSlot;
    verdict.confidence = 0.6;
    verdict.summary = fmt::format("probably the slot: {} has run clean for {} since it left {}; {}", serial,
                                  FormatDuration(clean), slot.Describe(),
                                  successor ? "the card now there has not run long enough to confirm"
                                            : "put a known good card there to confirm");
    return verdict;
  }

  // A partner for the swap: a card that never erred, seen last on another host
  // in a slot where nothing erred, preferably the same model.
  std::optional<SwapProposal> ProposeSwap(const std::string& serial, const SlotKey& slot) const {
    std::string model;
    for (const Placement& p : placements_) {
      if (p.serial == serial) model = p.model;
    }
    const Placement* best = nullptr;
    for (const Placement& p : placements_) {
      if (p.slot.hostname == slot.hostname || by_serial_.contains(p.serial) || by_slot_.contains(p.slot)) continue;
      if (p.to + 2 * options_.slack < now_) continue;  // no longer there
      auto rank = [&](const Placement& c) { return std::tuple(c.model == model, c.to - c.from); };
      if (!best || rank(p) > rank(*best)) best = &p;
    }
    if (!best) return std::nullopt;
    return SwapProposal{.serial = serial, .from = slot, .partner = best->serial, .to = best->slot};
  }

  const std::vector<Placement>& placements_;
  WallTime now_;
  const AttributionOptions& options_;
  std::map<std::string, std::map<SlotKey, Tally>> by_serial_;
  std::map<SlotKey, std::map<std::string, Tally>> by_slot_;
};

}  // namespace

std::string SlotKey::Describe() const {
  std::string out = hostname + " " + pci_bus_id;
  if (!slot_name.empty()) out += " (slot " + slot_name + ")";
  return out;
}

const char* ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kXid: return "xid";
    case ErrorKind::kUncorrectableEcc: return "uncorrectable_ecc";
    case ErrorKind::kRowRemap: return "row_remap";
    case ErrorKind::kPcieReplays: return "pcie_replays";
    case ErrorKind::kFellOffBus: return "fell_off_bus";
  }
  return "unknown";
}

const char* BlameName(Blame blame) {
  switch (blame) {
    case Blame::kCard: return "card";
    case Blame::kSlot: return "slot";
    case Blame::kUndetermined: return "undetermined";
  }
  return "undetermined";
}

std::vector<Verdict> AttributeErrors(const std::vector<Placement>& placements,
                                     const std::vector<ErrorEpisode>& episodes, WallTime now,
                                     const AttributionOptions& options) {
  Attributor attributor(placements, now, options);
  for (const ErrorEpisode& episode : episodes) attributor.Add(episode);
  return attributor.Judge();
}

}  // namespace gpudoctor
