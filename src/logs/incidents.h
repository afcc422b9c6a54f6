// Incidents: related events grouped so a person reads one story instead of a
// thousand lines. Events of the same GPU (or the same host-wide kind) that
// follow each other within `window` form one incident; a storm of 10,000
// identical Xid 95 lines is one incident with a count and its first and last
// times. A PCIe error on a port followed within the window by the loss of one
// GPU is put in front of that GPU's incident as its probable cause
// (AER -> fallen off the bus -> Xid 79).
//
//   std::vector<Incident> incidents = GroupIncidents(events, std::chrono::minutes(5));
//
// Pure: time comes from the events, never from a clock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "logs/catalog.h"
#include "logs/event.h"

namespace gpudoctor {

struct Incident {
  std::string subject;  // "0000:01:00.0", "GPU6", "GPU:0", "host", "nvidia driver"
  std::string pci_bus_id, gpu_uuid, gpu_serial, host;
  EventSeverity severity = EventSeverity::kInfo;  // the worst of its events
  uint64_t event_count = 0;
  std::optional<WallTime> first_time, last_time;
  std::optional<double> first_uptime, last_uptime;
  std::string source;
  uint64_t first_line = 0, last_line = 0;
  // What happened, in the order first seen: "pcie_aer", "xid 79", "gpu_off_bus".
  std::vector<std::string> chain;
  std::map<std::string, uint64_t> counts;  // per chain label
  LogEvent headline;               // the first of the most severe events
  std::vector<LogEvent> examples;  // the first few events and the last one
};

inline constexpr Duration kDefaultIncidentWindow = std::chrono::minutes(5);

class IncidentGrouper {
 public:
  explicit IncidentGrouper(Duration window = kDefaultIncidentWindow,
                           const LogCatalog& catalog = LogCatalog::Builtin());
  void Add(const LogEvent& event);
  // The incidents, ordered by their first event.
  std::vector<Incident> Finish();

 private:
  std::string SubjectOf(const LogEvent& event) const;
  bool Continues(const Incident& incident, const LogEvent& event) const;
  void AttachPcieCauses(std::vector<Incident>& incidents) const;

  Duration window_;
  const LogCatalog& catalog_;
  std::vector<Incident> incidents_;
  std::map<std::string, size_t> open_by_subject_;  // subject -> index of its latest incident
};

std::vector<Incident> GroupIncidents(const std::vector<LogEvent>& events,
                                     Duration window = kDefaultIncidentWindow,
                                     const LogCatalog& catalog = LogCatalog::Builtin());

// "xid 79" for Xid events, else the kind.
std::string ChainLabel(const LogEvent& event);

}  // namespace gpudoctor
