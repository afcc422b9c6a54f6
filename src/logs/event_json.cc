#include "logs/event_json.h"

#include <nlohmann/json.hpp>

#include "common/byte_runs.h"
#include "common/json_text.h"
#include "common/text.h"

namespace gpudoctor {

namespace {

using json = nlohmann::ordered_json;

json OptionalTime(const std::optional<WallTime>& time) { return time ? json(FormatIsoUtc(*time)) : json(nullptr); }

json OptionalText(const std::string& text) { return text.empty() ? json(nullptr) : json(text); }

std::string JoinTags(const std::vector<std::string>& tags) {
  std::string out;
  for (const std::string& tag : tags) out += (out.empty() ? "" : ", ") + tag;
  return out;
}

}  // namespace

Advice AdviceFor(const LogEvent& event, const LogCatalog& catalog) {
  Advice advice;
  const KindInfo* kind = catalog.FindKind(event.kind);
  advice.title = catalog.TitleOf(event);
  if (kind) {
    advice.causes = kind->causes;
    advice.cause = kind->cause;
    advice.action = kind->action;
  }
  if (event.kind == "xid" && event.xid) {
    if (const XidInfo* xid = catalog.FindXid(*event.xid)) {
      advice.causes = xid->causes;
      advice.cause = xid->name + (xid->causes.empty() ? "." : ". Likely causes: " + JoinTags(xid->causes) + ".");
      advice.action = xid->action;
    } else {
      advice.cause = "Xid " + std::to_string(*event.xid) + " is not in the catalog.";
    }
  }
  if (event.kind == "nvswitch_sxid") {
    auto code = ParseInt<uint32_t>(event.Field("sxid"));
    if (const SxidInfo* sxid = code ? catalog.FindSxid(*code) : nullptr) advice.action = sxid->action;
  }
  // What the line itself says to do (logs/event_details.h) is the most specific advice.
  if (std::string_view decoded = event.Field("action"); !decoded.empty()) advice.action = std::string(decoded);
  return advice;
}

json LogEventToJson(const LogEvent& event, const LogCatalog& catalog) {
  json fields = json::object();
  for (const EventField& field : event.fields) fields[field.name] = field.value;
  return json{
      {"kind", event.kind},
      {"severity", EventSeverityName(event.severity)},
      {"title", catalog.TitleOf(event)},
      {"time", OptionalTime(event.time)},
      {"time_is_utc", event.time_is_utc},
      {"time_estimated", event.time_estimated},
      {"uptime", event.uptime_seconds ? json(*event.uptime_seconds) : json(nullptr)},
      {"host", OptionalText(event.host)},
      {"pci", OptionalText(event.pci_bus_id)},
      {"xid", event.xid ? json(*event.xid) : json(nullptr)},
      {"pid", event.pid ? json(*event.pid) : json(nullptr)},
      {"process", OptionalText(event.process)},
      {"gpu_uuid", OptionalText(event.gpu_uuid)},
      {"gpu_serial", OptionalText(event.gpu_serial)},
      {"message", event.message},
      {"detail", event.detail},
      {"fields", fields},
      {"raw", event.raw},
      {"source", event.source},
      {"line", event.line_number},
  };
}

json IncidentToJson(const Incident& incident, const LogCatalog& catalog) {
  Advice advice = AdviceFor(incident.headline, catalog);
  json counts = json::object();
  for (const auto& [label, count] : incident.counts) counts[label] = count;
  json examples = json::array();
  for (const LogEvent& event : incident.examples) examples.push_back(event.raw);
  return json{
      {"subject", incident.subject},
      {"severity", EventSeverityName(incident.severity)},
      {"title", advice.title},
      {"count", incident.event_count},
      {"chain", incident.chain},
      {"counts", counts},
      {"first_time", OptionalTime(incident.first_time)},
      {"last_time", OptionalTime(incident.last_time)},
      {"first_uptime", incident.first_uptime ? json(*incident.first_uptime) : json(nullptr)},
      {"last_uptime", incident.last_uptime ? json(*incident.last_uptime) : json(nullptr)},
      {"host", OptionalText(incident.host)},
      {"pci", OptionalText(incident.pci_bus_id)},
      {"gpu_uuid", OptionalText(incident.gpu_uuid)},
      {"gpu_serial", OptionalText(incident.gpu_serial)},
      {"causes", advice.causes},
      {"cause", advice.cause},
      {"action", advice.action},
      {"source", incident.source},
      {"first_line", incident.first_line},
      {"last_line", incident.last_line},
      {"examples", examples},
  };
}

json XidInfoToJson(const XidInfo& xid) {
  return json{{"xid", xid.code},         {"name", xid.name},       {"mnemonic", OptionalText(xid.mnemonic)},
              {"severity", EventSeverityName(xid.severity)}, {"causes", xid.causes},
              {"also", xid.also_kinds},  {"action", xid.action}};
}

json SxidInfoToJson(const SxidInfo& sxid) {
  return json{{"sxid", sxid.code},
              {"name", sxid.name},
              {"severity", EventSeverityName(sxid.severity)},
              {"action", sxid.action}};
}

json XidDecodingToJson(const XidDecodeTables& tables, uint32_t xid) {
  json rows = json::array();
  for (const NvLink5Row& row : tables.nvlink5) {
    if (row.xid != xid) continue;
    rows.push_back(json{{"units", row.units},
                        {"error_status", row.error_status},
                        {"subcode", row.subcode ? json(*row.subcode) : json(nullptr)},
                        {"fatal", row.fatal},
                        {"immediate", row.immediate},
                        {"investigatory", row.investigatory}});
  }
  if (xid == 74) {
    for (const Xid74Bits& bits : tables.xid74_bits) {
      rows.push_back(json{{"register", bits.register_index},
                          {"bits", bits.bits},
                          {"severity", EventSeverityName(bits.severity)},
                          {"meaning", bits.meaning},
                          {"action", bits.step}});
    }
  }
  if (xid == 154) {
    for (const RecoveryAction& action : tables.recovery_actions) {
      rows.push_back(json{{"recovery", action.action}, {"wordings", action.names}, {"action", action.step}});
    }
  }
  return rows;
}

json KindInfoToJson(const KindInfo& kind) {
  return json{{"kind", kind.name},
              {"title", kind.title},
              {"severity", EventSeverityName(kind.severity)},
              {"scope", kind.scope == EventScope::kHost ? "host" : "gpu"},
              {"causes", kind.causes},
              {"cause", kind.cause},
              {"action", kind.action}};
}

std::string JsonLine(const json& value) { return ToJsonText(value); }

namespace {

// A JSON string as JsonLine writes it. ASCII text is escaped here the way
// nlohmann's serializer does; text with any other byte goes through nlohmann
// itself, which checks the UTF-8 and replaces what is not.
bool NeedsEscape(char c) { return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20; }

void AppendString(std::string& out, std::string_view text) {
  const size_t start = out.size();
  out.push_back('"');
  size_t run = 0;  // start of the bytes not yet written
  auto plain = [](unsigned char c) { return c < 0x80 && !NeedsEscape(static_cast<char>(c)); };
  for (size_t i = EndOfRun(text, 0, plain, ByteRunWord::kJsonStringPlain); i < text.size();
       i = EndOfRun(text, i + 1, plain, ByteRunWord::kJsonStringPlain)) {
    const char c = text[i];
    if (static_cast<unsigned char>(c) >= 0x80) {  // not ASCII: nlohmann checks the UTF-8 and replaces what is not
      out.resize(start);
      out += JsonLine(json(std::string(text)));
      return;
    }
    out.append(text.substr(run, i - run));
    run = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: {
        static constexpr char kHex[] = "0123456789abcdef";
        const char escaped[] = {'\\', 'u', '0', '0', kHex[(c >> 4) & 0xf], kHex[c & 0xf]};
        out.append(escaped, sizeof escaped);
      }
    }
  }
  out.append(text.substr(run));
  out.push_back('"');
}

}  // namespace

void AppendLogEventJsonLine(std::string& out, const LogEvent& event, const LogCatalog& catalog) {
  // Keys in LogEventToJson's order; each writer puts the key, then the value.
  auto key = [&out](std::string_view name) {
    out += out.back() == '{' ? "\"" : ",\"";
    out += name;
    out += "\":";
  };
  auto text = [&](std::string_view name, std::string_view value) {
    key(name);
    AppendString(out, value);
  };
  auto optional_text = [&](std::string_view name, const std::string& value) {
    key(name);
    if (value.empty()) out += "null";
    else AppendString(out, value);
  };
  auto optional_number = [&](std::string_view name, const std::optional<uint32_t>& value) {
    key(name);
    out += value ? std::to_string(*value) : "null";
  };
  auto boolean = [&](std::string_view name, bool value) {
    key(name);
    out += value ? "true" : "false";
  };

  out.push_back('{');
  text("kind", event.kind);
  text("severity", EventSeverityName(event.severity));
  thread_local std::string title;  // reused: built without an allocation per event
  title.clear();
  catalog.AppendTitleOf(title, event);
  text("title", title);
  key("time");
  if (event.time) {
    out.push_back('"');
    AppendIsoUtc(out, *event.time);  // digits and ASCII punctuation: nothing to escape
    out.push_back('"');
  } else {
    out += "null";
  }
  boolean("time_is_utc", event.time_is_utc);
  boolean("time_estimated", event.time_estimated);
  key("uptime");
  if (event.uptime_seconds) AppendJsonNumber(out, *event.uptime_seconds);  // nlohmann's shortest form
  else out += "null";
  for (const auto& [name, value] : {std::pair{"host", &event.host}, {"pci", &event.pci_bus_id}}) {
    optional_text(name, *value);
  }
  optional_number("xid", event.xid);
  optional_number("pid", event.pid);
  for (const auto& [name, value] :
       {std::pair{"process", &event.process}, {"gpu_uuid", &event.gpu_uuid}, {"gpu_serial", &event.gpu_serial}}) {
    optional_text(name, *value);
  }
  text("message", event.message);
  text("detail", event.detail);
  key("fields");
  out.push_back('{');
  // A name given twice keeps its first place and its last value, as in an ordered_json object.
  for (size_t i = 0; i < event.fields.size(); ++i) {
    const EventField& field = event.fields[i];
    bool seen = false;
    for (size_t j = 0; j < i && !seen; ++j) seen = event.fields[j].name == field.name;
    if (seen) continue;
    const EventField* last = &field;
    for (size_t j = i + 1; j < event.fields.size(); ++j)
      if (event.fields[j].name == field.name) last = &event.fields[j];
    if (out.back() != '{') out.push_back(',');
    AppendString(out, field.name);
    out.push_back(':');
    AppendString(out, last->value);
  }
  out.push_back('}');
  text("raw", event.raw);
  text("source", event.source);
  key("line");
  out += std::to_string(event.line_number);
  out.push_back('}');
}

}  // namespace gpudoctor
