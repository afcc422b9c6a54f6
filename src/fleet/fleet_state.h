// FleetState: what every gpudoctor agent of a fleet says now, read from
// Prometheus (fleet_reader.h) or from the agents themselves. The fleet views
// (the checklist, the offenders, one card's history) are built from it and
// from FleetHistory (attribution.h); nothing here reads a history database.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"

namespace gpudoctor {

struct FleetFinding {
  std::string id;        // the rule ("xid_recent")
  std::string severity;  // "critical", "warning", "unknown"
  std::string gpu;       // index, "" for host-wide findings
  std::string subject;   // tells apart findings one rule raises for several things
  std::string part_of;   // the root-cause finding's key; "" for a root cause
  bool operator==(const FleetFinding&) const = default;
};

// One weekly-checklist item as a host's agent judged it (gpudoctor_checklist_item).
struct FleetChecklistState {
  std::string title;
  std::string state;   // ok, warning, critical, unknown, or "unchecked" (health/checklist.h kUncheckedState)
  std::string reason;  // for unchecked: why its rules judged nothing; "" when they gave no reason
  bool operator==(const FleetChecklistState&) const = default;
};

struct FleetGpu {
  std::string index;
  std::string uuid;
  std::string serial;
  std::string pci_bus_id;
  std::string slot;  // the firmware's slot name; "" when it names none
  std::string name;  // "NVIDIA H100 80GB HBM3"
  std::optional<bool> accessible;  // nullopt: not reported (a stale agent)
  bool operator==(const FleetGpu&) const = default;
};

struct FleetHost {
  std::string instance;  // the scrape target or agent URL
  std::string hostname;  // the agent's hostname label; the instance when never seen
  std::string board_serial;
  // False when the host cannot be judged now: the scrape fails, the agent's
  // samples are stale, or it did not answer. `trouble` says which.
  bool answering = true;
  std::string trouble;
  std::optional<double> sample_age_seconds;
  std::vector<FleetGpu> gpus;
  std::vector<FleetFinding> findings;  // open now
  // The agent's checklist; nullopt when it exports none (an agent older than
  // gpudoctor_checklist_item, or one that has not judged a sample yet).
  std::optional<std::vector<FleetChecklistState>> checklist;
  bool operator==(const FleetHost&) const = default;
};

struct FleetState {
  WallTime at;
  std::string source;  // "prometheus http://...", "agents FILE"
  std::vector<FleetHost> hosts;
};

}  // namespace gpudoctor
