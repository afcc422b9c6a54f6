// The form events take in the history's `events` table: one JSON object per
// event, with times in Unix milliseconds so nothing is lost on the way back.
// Internal to src/store; the public JSON of events is logs/event_json.h.
//
//   std::string body = LogEventToRecord(event);
//   std::optional<LogEvent> again = LogEventFromRecord(body);  // nullopt: not a record
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "logs/event.h"
#include "model/snapshot.h"

namespace gpudoctor {

std::string NvmlXidToRecord(const XidEvent& xid);
std::optional<XidEvent> NvmlXidFromRecord(std::string_view body);

std::string LogEventToRecord(const LogEvent& event);
std::optional<LogEvent> LogEventFromRecord(std::string_view body);

}  // namespace gpudoctor
