// The fleet views `gpudoctor fleet` prints and serves:
//   - the weekly checklist for every host at once, worst first, hosts that do not answer on top;
//   - the top offenders: GPUs and hosts by open findings and errors over a range;
//   - one card's history across hosts and slots, with the card-or-slot verdict.
//
//   FleetChecklist checklist = BuildFleetChecklist(state, config.checklist);
//   Offenders top = RankOffenders(state, &history, verdicts, 10);
//   CardHistory card = HistoryOfCard("1320621034567", history, verdicts);
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "fleet/attribution.h"
#include "fleet/fleet_history.h"
#include "fleet/fleet_state.h"
#include "health/health_config.h"

namespace gpudoctor {

// One checklist item of one host. Passed (shown as such) only when `checked`
// is true and `severity` is ok.
struct FleetChecklistCell {
  // The worst of its findings, or of the state its agent exports: ok,
  // warning, critical, unknown; unknown too when not known (below).
  std::string severity = "ok";
  // Whether the item's rules judged anything on the host: false when its
  // agent says none did (`check`'s "not checked"); nullopt when not known (the
  // host does not answer, or its agent exports no state for the item).
  std::optional<bool> checked;
  // The findings behind it ("xid_recent gpu 3; gpu_lost gpu 3"), "not
  // checked: REASON", "not known: ..."; "" when ok or the host does not answer.
  std::string summary;
  std::vector<FleetFinding> findings;  // worst first
};

struct FleetChecklistRow {
  std::string hostname;
  std::string instance;
  bool answering = true;
  std::string trouble;  // why not, when not
  std::string worst = "ok";  // of all its open findings, as `check` judges the host
  std::vector<FleetChecklistCell> items;   // one per FleetChecklist::titles
  // Open findings on no checklist item, less those told under a root cause (part_of).
  std::vector<FleetFinding> other;
};

struct FleetChecklist {
  std::vector<std::string> titles;
  std::vector<FleetChecklistRow> rows;  // not answering first, then worst first
  size_t hosts_not_answering = 0;
  size_t hosts_critical = 0;
  size_t hosts_warning = 0;
};

// Findings fall on items as on the host itself (BuildChecklist over the open
// findings, those part of a root cause included); whether an item was checked
// comes from the state its agent exports.
FleetChecklist BuildFleetChecklist(const FleetState& state, const std::vector<ChecklistEntry>& checklist);

// Like `check`: 2 when a host does not answer or has a critical finding, 1
// for warnings, 0 when every host is well.
int FleetExitStatus(const FleetChecklist& checklist);

struct ErrorCounts {
  double xid = 0;
  double uncorrectable_ecc = 0;
  double row_remap = 0;
  double pcie_replays = 0;
  double fell_off_bus = 0;  // steps in which the GPU could not be read
  double Total() const { return xid + uncorrectable_ecc + row_remap + pcie_replays + fell_off_bus; }
};

struct GpuOffender {
  std::string hostname;
  std::string pci_bus_id;
  std::string gpu;     // index now, "" when no longer seen
  std::string serial;  // the card there now (or last)
  size_t open_critical = 0;
  size_t open_warning = 0;
  std::vector<std::string> open_findings;  // rule ids
  ErrorCounts errors;                      // over the range
  std::optional<Verdict> verdict;          // card or slot, when its errors are attributed
};

struct HostOffender {
  std::string hostname;
  bool answering = true;
  size_t open_critical = 0;
  size_t open_warning = 0;
  size_t gpus_with_errors = 0;
  ErrorCounts errors;
};

struct Offenders {
  bool with_history = false;  // false: ranked by open findings only (no Prometheus range)
  std::vector<GpuOffender> gpus;
  std::vector<HostOffender> hosts;
};

// `history` null: open findings only. At most `top` of each, worst first;
// GPUs and hosts with nothing open and no errors are left out.
Offenders RankOffenders(const FleetState& state, const FleetHistory* history, const std::vector<Verdict>& verdicts,
                        size_t top);

struct CardStay {
  Placement placement;
  ErrorCounts errors;
};

struct CardHistory {
  std::string serial;
  std::vector<CardStay> stays;    // oldest first
  std::vector<Verdict> verdicts;  // those naming this card
};

CardHistory HistoryOfCard(const std::string& serial, const FleetHistory& history,
                          const std::vector<Verdict>& verdicts);

}  // namespace gpudoctor
