// LogEvent: one GPU- or host-relevant event recognised in a kernel or system
// log line. The `kind` names and field names are a stable interface
// (docs/events.md).
//
//   [  35.563936] NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.
//   -> {kind "xid", severity critical, xid 79, pci_bus_id "0000:01:00.0", ...}
//      {kind "gpu_off_bus", severity critical, pci_bus_id "0000:01:00.0", ...}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"

namespace gpudoctor {

enum class EventSeverity { kInfo, kWarning, kCritical };
const char* EventSeverityName(EventSeverity severity);  // "info", "warning", "critical"
std::optional<EventSeverity> EventSeverityFromName(std::string_view name);

// A kind-specific detail taken from the line, e.g. {"aer_severity", "Corrected"}.
struct EventField {
  std::string name;
  std::string value;
  bool operator==(const EventField&) const = default;
};

struct LogEvent {
  std::string kind;  // "xid", "gpu_off_bus", "pcie_aer", "hung_task", ...
  EventSeverity severity = EventSeverity::kInfo;
  // Wall time when the log gives one. `time_is_utc` is true only when the log
  // stated the zone (ISO stamps with an offset, kernel uptime plus boot time);
  // otherwise the time was read as local time with an assumed UTC offset.
  // `time_estimated` is true when part of it was guessed: a year-less syslog
  // date (year inferred) or a minute-precision `dmesg -H` stamp.
  std::optional<WallTime> time;
  bool time_is_utc = false;
  bool time_estimated = false;
  std::optional<double> uptime_seconds;  // the kernel's [ 123.456] stamp, when present
  std::string host;
  std::string pci_bus_id;  // "0000:bb:dd.f", empty when not in the line
  std::optional<uint32_t> xid;
  std::optional<uint32_t> pid;
  std::string process;
  std::string gpu_uuid;    // when the log links it to the PCI id
  std::string gpu_serial;
  std::string message;     // the meaningful part of the line, prefix removed
  std::string detail;      // `fields` as text: "aer_severity=Corrected, aer_type=Data Link Layer"
  std::vector<EventField> fields;
  std::string raw;         // the raw line (joined, for wrapped NVRM messages)
  std::string source;      // file name, "/dev/kmsg", "journal"
  uint64_t line_number = 0;
  // A storm of identical events is kept as a few of them (EventCollector):
  // with `repeats` > 0 this one stands for 1 + `repeats` of them, from
  // `repeats_from` to `time`; `raw` and `line_number` are the last one's.
  uint64_t repeats = 0;
  std::optional<WallTime> repeats_from;
  // The repeats differed in their details (their own pids, addresses, counters) and came at any pace: a crowd
  // of one kind on one device folded to bound memory, not a storm of identical lines a second apart.
  bool repeats_differ = false;

  // The value of detail field `name`, or empty.
  std::string_view Field(std::string_view name) const;
};

// How many log lines (or reports) `event` stands for: 1 + its repeats.
inline uint64_t Occurrences(const LogEvent& event) { return 1 + event.repeats; }

}  // namespace gpudoctor
