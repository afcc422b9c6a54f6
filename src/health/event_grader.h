// EventGrader: what the rules need to know about log events - how bad an
// Xid or an event kind is, and what to do about it.
//
// The log engine's LogCatalog knows this; CatalogEventGrader (in
// health/catalog_event_grader.h) adapts it. Without a grader, each event's
// own severity is used and the rule's generic text explains it.
//
//   CatalogEventGrader grader(LogCatalog::Builtin());
//   input.event_grader = &grader;
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "health/finding.h"
#include "logs/event.h"

namespace gpudoctor {

struct EventGrade {
  Severity severity = Severity::kWarning;
  std::string title;                    // "GPU has fallen off the bus"
  std::vector<std::string> cause_tags;  // hardware, driver, application, thermal, power, PCIe, memory, NVLink, GSP
  std::string cause;                    // may be empty
  std::string action;                   // may be empty
};

class EventGrader {
 public:
  virtual ~EventGrader() = default;
  virtual std::optional<EventGrade> GradeXid(uint32_t code) const = 0;
  virtual std::optional<EventGrade> GradeKind(std::string_view kind) const = 0;
};

// info -> ok (listed, not a problem), warning -> warning, critical -> critical.
Severity SeverityForEvent(EventSeverity severity);

}  // namespace gpudoctor
