#include "logs/catalog.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "common/input_file.h"
#include "common/text.h"

namespace gpudoctor {


namespace {

// A PCI bus id in any spelling the kernel and the NVIDIA driver use:
// "PCI:0000:41:00", "0000:0a:00.0", "00000000:3B:00.0".
constexpr std::string_view kPciRegex = "(?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\\.[0-7])?)";
// The same without a capture, for a second bus id in one pattern.
constexpr std::string_view kPciRegexNoCapture = "(?:PCI:)?[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\\.[0-7])?";

std::string ExpandPci(std::string regex) {
  bool captured = false;
  for (size_t at = regex.find("{PCI}"); at != std::string::npos; at = regex.find("{PCI}", at)) {
    std::string_view replacement = captured ? kPciRegexNoCapture : kPciRegex;
    regex.replace(at, 5, replacement);
    at += replacement.size();
    captured = true;
  }
  return regex;
}

class TomlReader {
 public:
  explicit TomlReader(std::string origin) : origin_(std::move(origin)) {}

  bool failed() const { return !error_.empty(); }
  Error error() const { return Error{origin_ + ": " + error_}; }
  void Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }

  std::string String(const toml::node_view<const toml::node>& node, std::string_view what, bool required) {
    if (auto value = node.value<std::string>()) return *value;
    if (required || node) Fail(std::string(what) + " must be a string");
    return {};
  }

  std::vector<std::string> Strings(const toml::node_view<const toml::node>& node, std::string_view what) {
    std::vector<std::string> out;
    if (!node) return out;
    const toml::array* array = node.as_array();
    if (!array) {
      Fail(std::string(what) + " must be an array of strings");
      return out;
    }
    for (const toml::node& item : *array) {
      if (auto value = item.value<std::string>()) {
        out.push_back(*value);
      } else {
        Fail(std::string(what) + " must be an array of strings");
      }
    }
    return out;
  }

  EventSeverity Severity(const toml::node_view<const toml::node>& node, std::string_view what,
                         EventSeverity fallback) {
    if (!node) return fallback;
    auto name = node.value<std::string>();
    auto severity = name ? EventSeverityFromName(*name) : std::nullopt;
    if (!severity) {
      Fail(std::string(what) + " must be info, warning or critical");
      return fallback;
    }
    return *severity;
  }

  // An integer in [0, max]; `fallback` when absent and not required.
  uint32_t Unsigned(const toml::node_view<const toml::node>& node, std::string_view what, uint32_t max,
                    bool required) {
    auto value = node.value<int64_t>();
    if (value && *value >= 0 && *value <= max) return static_cast<uint32_t>(*value);
    if (required || node) Fail(std::string(what) + " must be an integer between 0 and " + std::to_string(max));
    return 0;
  }

  std::vector<uint32_t> UnsignedList(const toml::node_view<const toml::node>& node, std::string_view what,
                                     uint32_t max) {
    std::vector<uint32_t> out;
    const toml::array* array = node.as_array();
    if (!array) {
      Fail(std::string(what) + " must be an array of integers");
      return out;
    }
    for (const toml::node& item : *array) out.push_back(Unsigned(toml::node_view<const toml::node>{item}, what, max, true));
    return out;
  }

  std::vector<std::string> Causes(const toml::node_view<const toml::node>& node, std::string_view what) {
    std::vector<std::string> causes = Strings(node, what);
    for (const std::string& cause : causes) {
      if (std::none_of(std::begin(kCauseTags), std::end(kCauseTags),
                       [&](const char* tag) { return cause == tag; })) {
        Fail(std::string(what) + ": unknown cause tag \"" + cause + "\"");
      }
    }
    return causes;
  }

 private:
  std::string origin_;
  std::string error_;
};

// Calls `read` with each table of the array at `key`, as a node view.
template <typename Read>
void ForEachEntry(const toml::table& root, std::string_view key, Read read) {
  if (const toml::array* entries = root[key].as_array()) {
    for (const toml::node& node : *entries) read(toml::node_view<const toml::node>{node});
  }
}

std::vector<SxidInfo> ReadSxids(const toml::table& root, TomlReader& reader) {
  std::vector<SxidInfo> sxids;
  std::set<uint32_t> seen;
  ForEachEntry(root, "sxids", [&](toml::node_view<const toml::node> entry) {
    SxidInfo info;
    info.code = reader.Unsigned(entry["code"], "every sxids entry's code", 0xffff, true);
    std::string where = "sxid " + std::to_string(info.code);
    if (!seen.insert(info.code).second) reader.Fail(where + " is listed twice");
    info.name = reader.String(entry["name"], where + " name", true);
    info.severity = reader.Severity(entry["severity"], where + " severity", EventSeverity::kWarning);
    info.action = reader.String(entry["action"], where + " action", true);
    sxids.push_back(std::move(info));
  });
  std::sort(sxids.begin(), sxids.end(), [](const SxidInfo& a, const SxidInfo& b) { return a.code < b.code; });
  return sxids;
}

XidDecodeTables ReadDecodeTables(const toml::table& root, TomlReader& reader) {
  XidDecodeTables tables;
  if (const toml::table* actions = root["nvlink5_actions"].as_table()) {
    for (const auto& [bucket, text] : *actions) {
      tables.nvlink5_actions[std::string(bucket.str())] =
          reader.String(toml::node_view<const toml::node>{text}, "nvlink5_actions." + std::string(bucket.str()), true);
    }
  }
  ForEachEntry(root, "nvlink5", [&](toml::node_view<const toml::node> entry) {
    NvLink5Row row;
    row.xid = reader.Unsigned(entry["xid"], "an nvlink5 row's xid", 0xffff, true);
    const std::string units = reader.String(entry["unit"], "an nvlink5 row's unit", true);
    for (std::string_view unit : Split(units, '/')) row.units.emplace_back(unit);
    row.error_status = reader.Unsigned(entry["status"], "an nvlink5 row's status", UINT32_MAX, true);
    if (entry["subcode"]) row.subcode = reader.Unsigned(entry["subcode"], "an nvlink5 row's subcode", 63, true);
    row.fatal = entry["fatal"].value_or(false);
    for (auto [bucket, key] : {std::pair{&row.immediate, "now"}, std::pair{&row.investigatory, "then"}}) {
      *bucket = reader.String(entry[key], std::string("an nvlink5 row's ") + key, true);
      if (!tables.nvlink5_actions.count(*bucket)) reader.Fail("nvlink5: no nvlink5_actions entry for " + *bucket);
    }
    tables.nvlink5.push_back(std::move(row));
  });
  ForEachEntry(root, "recovery_actions", [&](toml::node_view<const toml::node> entry) {
    RecoveryAction action;
    action.action = reader.String(entry["action"], "a recovery_actions entry's action", true);
    for (std::string& name : reader.Strings(entry["names"], "recovery_actions names")) action.names.push_back(ToLower(name));
    action.severity = reader.Severity(entry["severity"], "recovery_actions severity", EventSeverity::kWarning);
    action.step = reader.String(entry["step"], "a recovery_actions entry's step", true);
    tables.recovery_actions.push_back(std::move(action));
  });
  ForEachEntry(root, "xid74_bits", [&](toml::node_view<const toml::node> entry) {
    Xid74Bits bits;
    bits.register_index = reader.Unsigned(entry["register"], "an xid74_bits register", 6, true);
    bits.bits = reader.UnsignedList(entry["bits"], "xid74_bits bits", 31);
    bits.severity = reader.Severity(entry["severity"], "xid74_bits severity", EventSeverity::kWarning);
    bits.meaning = reader.String(entry["meaning"], "an xid74_bits meaning", true);
    bits.step = reader.String(entry["step"], "an xid74_bits step", true);
    tables.xid74_bits.push_back(std::move(bits));
  });
  return tables;
}

// [driver]: the subsystems of the NVIDIA driver and its benign messages. A
// function prefix or module tag names one subsystem only.
DriverTables ReadDriverTables(const toml::table& root, TomlReader& reader, const LogCatalog& catalog) {
  DriverTables tables;
  const toml::table* driver = root["driver"].as_table();
  if (driver == nullptr) return tables;
  toml::node_view<const toml::node> node{*driver};
  tables.generic_kind = reader.String(node["generic_kind"], "driver.generic_kind", true);
  if (!catalog.FindKind(tables.generic_kind)) {
    reader.Fail("driver.generic_kind names unknown kind " + tables.generic_kind);
  }
  for (std::string& word : reader.Strings(node["error_words"], "driver.error_words")) {
    if (word.empty() || word != ToLower(word)) reader.Fail("driver.error_words must be lower case and not empty");
    tables.error_words.push_back(std::move(word));
  }
  std::set<std::string> names, prefixes, modules;
  if (const toml::array* entries = node["subsystems"].as_array()) {
    for (const toml::node& item : *entries) {
      toml::node_view<const toml::node> entry{item};
      DriverSubsystem subsystem;
      subsystem.name = reader.String(entry["name"], "a driver.subsystems name", true);
      std::string where = "driver subsystem " + subsystem.name;
      if (!names.insert(subsystem.name).second) reader.Fail(where + " is listed twice");
      subsystem.kind = reader.String(entry["kind"], where + " kind", true);
      if (!catalog.FindKind(subsystem.kind)) reader.Fail(where + " names unknown kind " + subsystem.kind);
      if (entry["severity"]) subsystem.severity = reader.Severity(entry["severity"], where + " severity", {});
      subsystem.functions = reader.Strings(entry["functions"], where + " functions");
      subsystem.modules = reader.Strings(entry["modules"], where + " modules");
      subsystem.folders = reader.Strings(entry["folders"], where + " folders");
      for (const std::string& prefix : subsystem.functions) {
        if (prefix.empty() || !prefixes.insert(prefix).second) {
          reader.Fail(where + ": function prefix '" + prefix + "' is empty or listed twice");
        }
      }
      for (const std::string& module : subsystem.modules) {
        if (!StartsWith(module, "nvidia-") || !modules.insert(module).second) {
          reader.Fail(where + ": module '" + module + "' must start with nvidia- and be listed once");
        }
      }
      tables.subsystems.push_back(std::move(subsystem));
    }
  }
  if (const toml::array* entries = node["benign"].as_array()) {
    for (const toml::node& item : *entries) {
      toml::node_view<const toml::node> entry{item};
      DriverBenign benign;
      benign.function = reader.String(entry["function"], "a driver.benign function", false);
      benign.text = reader.String(entry["text"], "a driver.benign text", false);
      benign.starts = reader.String(entry["starts"], "a driver.benign starts", false);
      benign.reason = reader.String(entry["reason"], "a driver.benign reason", true);
      if (!benign.text.empty() && !benign.starts.empty()) {
        reader.Fail("a driver.benign entry gives text or starts, not both");
      }
      if (benign.text.empty() && benign.starts.empty() && benign.function.empty()) {
        reader.Fail("a driver.benign entry needs a function, a text or a start");
      }
      tables.benign.push_back(std::move(benign));
    }
  }
  return tables;
}

}  // namespace

Result<LogCatalog> LogCatalog::FromToml(std::string_view text, std::string_view origin) {
  // toml++ is built to report syntax errors as exceptions; they stop here.
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& error) {
    std::ostringstream message;
    message << origin << ":" << error.source().begin.line << ": " << error.description();
    return Error{message.str()};
  }
  TomlReader reader{std::string(origin)};
  LogCatalog catalog;
  std::vector<std::pair<std::string, std::string>> kind_advice;  // kind, "xid N"

  if (const toml::table* kinds = root["kinds"].as_table()) {
    for (const auto& [key, node] : *kinds) {
      const std::string name(key.str());
      std::string where = "kinds." + name;
      toml::node_view<const toml::node> kind{node};
      KindInfo info;
      info.name = name;
      info.title = reader.String(kind["title"], where + ".title", true);
      info.severity = reader.Severity(kind["severity"], where + ".severity", EventSeverity::kWarning);
      info.causes = reader.Causes(kind["causes"], where + ".causes");
      info.cause = reader.String(kind["cause"], where + ".cause", true);
      // `advice = "xid 79"`: the Xid's steps, resolved once the Xids are read.
      std::string advice = reader.String(kind["advice"], where + ".advice", false);
      if (advice.empty()) info.action = reader.String(kind["action"], where + ".action", true);
      else if (kind["action"]) reader.Fail(where + " gives both advice and action: one advice text per fault");
      else kind_advice.emplace_back(name, advice);
      std::string scope = reader.String(kind["scope"], where + ".scope", false);
      if (scope == "host") {
        info.scope = EventScope::kHost;
      } else if (!scope.empty() && scope != "gpu") {
        reader.Fail(where + ".scope must be gpu or host");
      }
      int64_t window = kind["window"].value_or<int64_t>(0);
      if (window < 0 || window > 100000) reader.Fail(where + ".window must be 0..100000");
      info.window_lines = static_cast<uint32_t>(std::clamp<int64_t>(window, 0, 100000));
      catalog.kinds_.push_back(std::move(info));
    }
  }
  if (!catalog.FindKind("xid")) reader.Fail("the catalog needs a [kinds.xid] entry");

  std::set<uint32_t> seen_codes;
  if (const toml::array* xids = root["xids"].as_array()) {
    for (const toml::node& node : *xids) {
      toml::node_view<const toml::node> entry{node};
      auto code = entry["code"].value<int64_t>();
      if (!code || *code < 0 || *code > 0xffff) {
        reader.Fail("every xids entry needs a code between 0 and 65535");
        continue;
      }
      std::string where = "xid " + std::to_string(*code);
      XidInfo info;
      info.code = static_cast<uint32_t>(*code);
      if (!seen_codes.insert(info.code).second) reader.Fail(where + " is listed twice");
      info.name = reader.String(entry["name"], where + " name", true);
      info.mnemonic = reader.String(entry["mnemonic"], where + " mnemonic", false);
      info.severity = reader.Severity(entry["severity"], where + " severity", EventSeverity::kWarning);
      info.causes = reader.Causes(entry["causes"], where + " causes");
      info.also_kinds = reader.Strings(entry["also"], where + " also");
      info.steps = reader.Strings(entry["steps"], where + " steps");
      if (info.steps.empty()) {
        info.action = reader.String(entry["action"], where + " action", true);
      } else if (entry["action"]) {
        reader.Fail(where + " gives both steps and action: one advice text per fault");
      } else {
        for (const std::string& step : info.steps) info.action += (info.action.empty() ? "" : " ") + step;
      }
      catalog.xids_.push_back(std::move(info));
    }
  }
  std::sort(catalog.xids_.begin(), catalog.xids_.end(),
            [](const XidInfo& a, const XidInfo& b) { return a.code < b.code; });
  for (const auto& [kind, advice] : kind_advice) {
    std::optional<uint32_t> code = XidOfAdvice(advice);
    const XidInfo* xid = code ? catalog.FindXid(*code) : nullptr;
    if (xid == nullptr) {
      reader.Fail("kinds." + kind + ".advice must name a listed Xid as \"xid N\", not '" + advice + "'");
      continue;
    }
    for (KindInfo& info : catalog.kinds_)
      if (info.name == kind) info.action = xid->action;
  }
  catalog.sxids_ = ReadSxids(root, reader);
  catalog.decode_ = ReadDecodeTables(root, reader);

  std::set<std::string> seen_ids;
  if (const toml::array* patterns = root["patterns"].as_array()) {
    for (const toml::node& node : *patterns) {
      toml::node_view<const toml::node> entry{node};
      PatternSpec spec;
      spec.id = reader.String(entry["id"], "a pattern id", true);
      std::string where = "pattern " + spec.id;
      if (!seen_ids.insert(spec.id).second) reader.Fail(where + " is defined twice");
      spec.kind = reader.String(entry["kind"], where + " kind", true);
      std::string role = reader.String(entry["role"], where + " role", false);
      if (role == "merge") {
        spec.role = PatternRole::kMerge;
      } else if (role == "continue") {
        spec.role = PatternRole::kContinue;
      } else if (!role.empty() && role != "start") {
        reader.Fail(where + " role must be start, merge or continue");
      }
      spec.literals = reader.Strings(entry["literals"], where + " literals");
      spec.caseless = entry["caseless"].value_or(false);
      spec.regex = ExpandPci(reader.String(entry["regex"], where + " regex", true));
      if (entry["severity"]) spec.severity = reader.Severity(entry["severity"], where + " severity", {});
      spec.severity_from = reader.String(entry["severity_from"], where + " severity_from", false);
      if (const toml::table* map = entry["severity_map"].as_table()) {
        for (const auto& [value, severity] : *map) {
          spec.severity_map[ToLower(value.str())] =
              reader.Severity(toml::node_view<const toml::node>{severity}, where + " severity_map", {});
        }
      }
      spec.append = reader.Strings(entry["append"], where + " append");
      spec.fallback = entry["fallback"].value_or(false);
      if (auto window = entry["window"].value<int64_t>()) {
        if (*window < 0 || *window > 100000) reader.Fail(where + " window must be 0..100000");
        spec.window_lines = static_cast<uint32_t>(std::clamp<int64_t>(*window, 0, 100000));
      }
      if (auto reach = entry["reach"].value<int64_t>()) {
        if (*reach < 0 || *reach > 100000) reader.Fail(where + " reach must be 0..100000");
        spec.reach_lines = static_cast<uint32_t>(std::clamp<int64_t>(*reach, 0, 100000));
      }
      if (spec.reach_lines && (!spec.literals.empty() || spec.role != PatternRole::kContinue)) {
        reader.Fail(where + " reach is for continue patterns without literals");
      }
      if (spec.literals.empty() && spec.role != PatternRole::kContinue) {
        reader.Fail(where + " needs literals (only continue patterns may go without)");
      }
      for (const std::string& literal : spec.literals) {
        if (literal.empty()) reader.Fail(where + " has an empty literal");
        // A log line holds none of these (the reader splits at them), so a literal with one could never be
        // in a line; the reader's scan of whole blocks would find it across two lines instead.
        if (literal.find_first_of(std::string_view("\n\r\0", 3)) != std::string::npos) {
          reader.Fail(where + " has a literal with a line break or a NUL byte, which no log line holds");
        }
      }
      if (!catalog.FindKind(spec.kind)) reader.Fail(where + " names unknown kind \"" + spec.kind + "\"");
      catalog.patterns_.push_back(std::move(spec));
    }
  }
  for (const XidInfo& xid : catalog.xids_) {
    for (const std::string& kind : xid.also_kinds) {
      if (!catalog.FindKind(kind)) reader.Fail("xid " + std::to_string(xid.code) + " names unknown kind " + kind);
    }
  }
  catalog.driver_ = ReadDriverTables(root, reader, catalog);
  if (reader.failed()) return reader.error();
  return catalog;
}

Result<LogCatalog> LogCatalog::LoadFile(const std::string& path) {
  auto text = ReadInputFile(path, kMaxCatalogFileBytes);
  if (!text) return text.error();
  return FromToml(*text, path);
}

namespace {

// The entry with `code` in a list sorted by code, or nullptr.
template <typename Info>
const Info* FindByCode(const std::vector<Info>& sorted, uint32_t code) {
  auto it = std::lower_bound(sorted.begin(), sorted.end(), code,
                             [](const Info& info, uint32_t wanted) { return info.code < wanted; });
  return it != sorted.end() && it->code == code ? &*it : nullptr;
}

}  // namespace

const XidInfo* LogCatalog::FindXid(uint32_t code) const { return FindByCode(xids_, code); }

const SxidInfo* LogCatalog::FindSxid(uint32_t code) const { return FindByCode(sxids_, code); }

const KindInfo* LogCatalog::FindKind(std::string_view name) const {
  for (const KindInfo& kind : kinds_) {
    if (kind.name == name) return &kind;
  }
  return nullptr;
}

EventSeverity LogCatalog::SeverityOf(std::string_view kind, std::optional<uint32_t> xid) const {
  if (kind == "xid" && xid) {
    if (const XidInfo* info = FindXid(*xid)) return info->severity;
  }
  const KindInfo* info = FindKind(kind);
  return info ? info->severity : EventSeverity::kWarning;
}

std::optional<uint32_t> XidOfAdvice(std::string_view advice) {
  if (!StartsWith(advice, "xid ")) return std::nullopt;
  return ParseInt<uint32_t>(advice.substr(4));
}

namespace {

// "Xid 79: GPU has fallen off the bus", "SXid 24007: unknown SXid".
void AppendCodeTitle(std::string& out, std::string_view what, uint32_t code, const std::string* name) {
  out += what;
  out += ' ';
  char digits[16];
  const char* end = std::to_chars(digits, digits + sizeof digits, code).ptr;
  out.append(digits, static_cast<size_t>(end - digits));
  out += ": ";
  if (name) {
    out += *name;
  } else {
    out += "unknown ";
    out += what;
  }
}

// The title of an event of `kind` (and Xid `xid` for kind "xid").
void AppendKindTitle(std::string& out, const LogCatalog& catalog, std::string_view kind, std::optional<uint32_t> xid) {
  if (kind == "xid" && xid) {
    const XidInfo* info = catalog.FindXid(*xid);
    AppendCodeTitle(out, "Xid", *xid, info ? &info->name : nullptr);
    return;
  }
  const KindInfo* info = catalog.FindKind(kind);
  out += info ? std::string_view(info->title) : kind;
}

}  // namespace

std::string LogCatalog::TitleOf(std::string_view kind, std::optional<uint32_t> xid) const {
  std::string title;
  AppendKindTitle(title, *this, kind, xid);
  return title;
}

std::string LogCatalog::TitleOf(const LogEvent& event) const {
  std::string title;
  AppendTitleOf(title, event);
  return title;
}

void LogCatalog::AppendTitleOf(std::string& out, const LogEvent& event) const {
  if (event.kind == "nvswitch_sxid") {
    if (auto code = ParseInt<uint32_t>(event.Field("sxid"))) {
      const SxidInfo* info = FindSxid(*code);
      AppendCodeTitle(out, "SXid", *code, info ? &info->name : nullptr);
      return;
    }
  }
  AppendKindTitle(out, *this, event.kind, event.xid);
}

}  // namespace gpudoctor
