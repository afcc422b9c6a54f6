#include "logs/catalog.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "common/input_file.h"
#include "common/text.h"

namespace gpudoctor {

extern const char kBuiltinCatalogToml[];  // generated from data/events.toml

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
      info.action = reader.String(kind["action"], where + ".action", true);
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
      info.action = reader.String(entry["action"], where + " action", true);
      catalog.xids_.push_back(std::move(info));
    }
  }
  std::sort(catalog.xids_.begin(), catalog.xids_.end(),
            [](const XidInfo& a, const XidInfo& b) { return a.code < b.code; });

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
      if (auto window = entry["window"].value<int64_t>()) {
        if (*window < 0 || *window > 100000) reader.Fail(where + " window must be 0..100000");
        spec.window_lines = static_cast<uint32_t>(std::clamp<int64_t>(*window, 0, 100000));
      }
      if (spec.literals.empty() && spec.role != PatternRole::kContinue) {
        reader.Fail(where + " needs literals (only continue patterns may go without)");
      }
      for (const std::string& literal : spec.literals) {
        if (literal.empty()) reader.Fail(where + " has an empty literal");
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
  if (reader.failed()) return reader.error();
  return catalog;
}

Result<LogCatalog> LogCatalog::LoadFile(const std::string& path) {
  auto text = ReadInputFile(path, kMaxCatalogFileBytes);
  if (!text) return text.error();
  return FromToml(*text, path);
}

const LogCatalog& LogCatalog::Builtin() {
  static const LogCatalog catalog = [] {
    Result<LogCatalog> loaded = FromToml(kBuiltinCatalogToml, "data/events.toml (built in)");
    if (!loaded) {
      // The built-in data is checked by the tests; reaching this is a build defect.
      std::fprintf(stderr, "gpudoctor: invalid built-in event catalog: %s\n", loaded.error().message.c_str());
      std::abort();
    }
    return std::move(loaded).value();
  }();
  return catalog;
}

const XidInfo* LogCatalog::FindXid(uint32_t code) const {
  auto it = std::lower_bound(xids_.begin(), xids_.end(), code,
                             [](const XidInfo& info, uint32_t wanted) { return info.code < wanted; });
  return it != xids_.end() && it->code == code ? &*it : nullptr;
}

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

std::string LogCatalog::TitleOf(std::string_view kind, std::optional<uint32_t> xid) const {
  if (kind == "xid" && xid) {
    const XidInfo* info = FindXid(*xid);
    return "Xid " + std::to_string(*xid) + (info ? ": " + info->name : std::string(": unknown Xid"));
  }
  const KindInfo* info = FindKind(kind);
  return info ? info->title : std::string(kind);
}

}  // namespace gpudoctor
