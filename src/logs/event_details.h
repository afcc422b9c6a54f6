// Event details: what a line says beyond its event's code, decoded with the
// catalog's tables (data/events.toml): the unit, link, sub-code and error
// status of an NVLink5 Xid (144-150), the seven registers of Xid 74, the
// recovery action of Xid 154, the default severity of an SXid.
//
//   LogEvent event = ...;  // kind "xid", xid 149, message "NVRM: Xid (...): 149, NETIR_LINK_EVT Fatal ..."
//   DecodeEventDetails(LogCatalog::Builtin(), event);
//   event.Field("meaning");  // "the other end of the link ... brought it down"
//   event.Field("action");   // what to do about this very line
//
// Decoding adds detail fields (docs/events.md lists them) and may set the
// event's severity from what the line says; it never removes anything.
#pragma once

#include "logs/catalog.h"
#include "logs/event.h"

namespace gpudoctor {

void DecodeEventDetails(const LogCatalog& catalog, LogEvent& event);

}  // namespace gpudoctor
