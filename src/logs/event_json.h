// The JSON form of events and incidents, as printed by `gpudoctor logs --json`
// (one object per line) and documented in docs/events.md. Keys are stable;
// a value the log did not give is null.
//
//   std::cout << JsonLine(LogEventToJson(event)) << '\n';
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "logs/catalog.h"
#include "logs/event.h"
#include "logs/incidents.h"

namespace gpudoctor {

nlohmann::ordered_json LogEventToJson(const LogEvent& event, const LogCatalog& catalog = LogCatalog::Builtin());
nlohmann::ordered_json IncidentToJson(const Incident& incident, const LogCatalog& catalog = LogCatalog::Builtin());
nlohmann::ordered_json XidInfoToJson(const XidInfo& xid);
nlohmann::ordered_json SxidInfoToJson(const SxidInfo& sxid);
// The rows that decode Xid `xid`'s lines (Xid 74, 144-150, 154); empty for others.
nlohmann::ordered_json XidDecodingToJson(const XidDecodeTables& tables, uint32_t xid);
nlohmann::ordered_json KindInfoToJson(const KindInfo& kind);

// One line of JSON; bytes that are not UTF-8 become U+FFFD.
std::string JsonLine(const nlohmann::ordered_json& value);

// Appends JsonLine(LogEventToJson(event, catalog)) to `out`, byte for byte,
// without building the JSON object first: `logs --json` writes every event of
// a log, and a storm has millions.
void AppendLogEventJsonLine(std::string& out, const LogEvent& event, const LogCatalog& catalog = LogCatalog::Builtin());

// The cause and action text for an event: the Xid's entry for Xid events,
// else the kind's.
struct Advice {
  std::string title;
  std::vector<std::string> causes;  // tags
  std::string cause;
  std::string action;
};
Advice AdviceFor(const LogEvent& event, const LogCatalog& catalog = LogCatalog::Builtin());

}  // namespace gpudoctor
