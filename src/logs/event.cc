#include "logs/event.h"

namespace gpudoctor {

const char* EventSeverityName(EventSeverity severity) {
  switch (severity) {
    case EventSeverity::kInfo: return "info";
    case EventSeverity::kWarning: return "warning";
    case EventSeverity::kCritical: return "critical";
  }
  return "info";
}

std::optional<EventSeverity> EventSeverityFromName(std::string_view name) {
  if (name == "info") return EventSeverity::kInfo;
  if (name == "warning") return EventSeverity::kWarning;
  if (name == "critical") return EventSeverity::kCritical;
  return std::nullopt;
}

std::string_view LogEvent::Field(std::string_view name) const {
  for (const EventField& field : fields) {
    if (field.name == name) return field.value;
  }
  return {};
}

}  // namespace gpudoctor
