// LogEvent: one GPU- or host-relevant event recognised in a kernel or system
// log line. The `kind` names are a stable interface (docs/events.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/clock.h"

namespace gpudoctor {

enum class EventSeverity { kInfo, kWarning, kCritical };
const char* EventSeverityName(EventSeverity severity);  // "info", "warning", "critical"

struct LogEvent {
  std::string kind;  // "xid", "gpu_off_bus", "pcie_aer", "hung_task", ...
  EventSeverity severity = EventSeverity::kInfo;
  // Wall time when the log gives one. `time_precise` is false when the log
  // only gave seconds-since-boot or a year-less date that was guessed.
  std::optional<WallTime> time;
  std::optional<double> uptime_seconds;  // the kernel's [ 123.456] stamp, when present
  bool time_is_utc = false;
  std::string host;
  std::string pci_bus_id;  // "0000:bb:dd.f", empty when not in the line
  std::optional<uint32_t> xid;
  std::optional<uint32_t> pid;
  std::string process;
  std::string gpu_uuid;    // when the log links it to the PCI id
  std::string gpu_serial;
  std::string message;     // the meaningful part of the line, prefix removed
  std::string detail;      // kind-specific extras, e.g. "Corrected, Data Link Layer, Timeout"
  std::string raw;         // the raw line (joined, for wrapped NVRM messages)
  std::string source;      // file name, "/dev/kmsg", "journal"
  uint64_t line_number = 0;
};

}  // namespace gpudoctor
