#include "cli/config_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <sstream>

#include <toml++/toml.h>

#include "agent/alert_config.h"
#include "agent/diag_schedule.h"
#include "common/input_file.h"
#include "health/detectors/trend_config.h"
#include "health/embedded_data.h"
#include "health/health_config.h"
#include "redact/secrets.h"

namespace gpudoctor {
namespace {

bool Exists(std::string_view path) {
  struct stat status {};
  return ::stat(std::string(path).c_str(), &status) == 0;
}

// A value as TOML writes it: strings quoted, arrays in brackets.
std::string ValueText(const toml::node& node) {
  std::ostringstream out;
  node.visit([&](const auto& value) { out << toml::toml_formatter(value); });
  return out.str();
}

bool IsArrayOfTables(const toml::node& node) {
  const toml::array* array = node.as_array();
  return array != nullptr && !array->empty() &&
         std::all_of(array->begin(), array->end(), [](const toml::node& item) { return item.is_table(); });
}

// Calls leaf(key, node) for every value below `node`, arrays of tables entered.
template <typename Leaf>
void VisitLeaves(const toml::node& node, const std::string& key, Leaf&& leaf) {
  if (const toml::table* table = node.as_table()) {
    for (const auto& [name, child] : *table)
      VisitLeaves(child, key.empty() ? std::string(name.str()) : key + "." + std::string(name.str()), leaf);
  } else if (IsArrayOfTables(node)) {
    const toml::array& array = *node.as_array();
    for (size_t i = 0; i < array.size(); ++i) VisitLeaves(*array.get(i), key + "[" + std::to_string(i) + "]", leaf);
  } else {
    leaf(key, node);
  }
}

// The compiled-in defaults that are TOML (the rules and the correlations).
const std::vector<toml::table>& DefaultTables() {
  static const std::vector<toml::table> tables = [] {
    std::vector<toml::table> parsed;
    for (const char* text : {kRulesToml, kCorrelationsToml}) {
      try {
        parsed.push_back(toml::parse(text));
      } catch (const toml::parse_error&) {
        // Compiled in and tested: cannot happen; no defaults to show then.
      }
    }
    return parsed;
  }();
  return tables;
}

std::optional<std::string> DefaultValue(const std::string& key) {
  for (const toml::table& table : DefaultTables()) {
    toml::node_view<const toml::node> found = table.at_path(key);
    if (found && !found.is_table()) return ValueText(*found.node());
  }
  return std::nullopt;
}

}  // namespace

ConfigChoice ChooseConfig(const std::string& option_path, const char* env, std::string_view default_path) {
  if (!option_path.empty()) return {option_path, "--config", "named by --config"};
  if (env != nullptr && *env != '\0') return {env, "GPUDOCTOR_CONFIG", "named by GPUDOCTOR_CONFIG"};
  if (Exists(default_path)) return {std::string(default_path), "config", "the default location"};
  return {"", "config", ""};
}

Result<AgentConfig> LoadFullConfig(const std::string& path) {
  AgentConfig config{.health = DefaultHealthConfig()};
  if (path.empty()) return config;
  auto text = ReadInputFile(path, kMaxConfigFileBytes);  // an empty file reads as "": every default
  if (!text) return Error{"cannot read config file " + text.error().message};
  auto health = ApplyHealthConfig(DefaultHealthConfig(), *text, path);
  if (!health) return health.error();
  auto trends = ParseTrendConfig(*text);
  if (!trends) return Error{path + ": " + trends.error().message};
  auto alerts = ParseAlertConfig(*text);
  if (!alerts) return Error{path + ": " + alerts.error().message};
  auto diag = ParseDiagScheduleConfig(*text);
  if (!diag) return Error{path + ": " + diag.error().message};
  config.health = std::move(*health);
  config.trends = std::move(*trends);
  config.alerts = std::move(*alerts);
  config.diag = *diag;
  return config;
}

Result<std::vector<ConfigSetting>> ConfigSettings(std::string_view toml_text, std::string_view origin) {
  toml::table root, masked;
  try {
    root = toml::parse(toml_text, origin);
    masked = toml::parse(RedactConfigSecrets(toml_text));
  } catch (const toml::parse_error& error) {
    std::ostringstream out;
    out << origin << ":" << error.source().begin.line << ":" << error.source().begin.column << ": "
        << error.description();
    return Error{out.str()};
  }
  std::vector<ConfigSetting> settings;
  VisitLeaves(root, "", [&](const std::string& key, const toml::node& node) {
    toml::node_view<toml::node> shown = masked.at_path(key);
    settings.push_back({.key = key,
                        .value = shown ? ValueText(*shown.node()) : std::string(kRedacted),
                        .line = static_cast<int>(node.source().begin.line),
                        .default_value = DefaultValue(key)});
  });
  std::stable_sort(settings.begin(), settings.end(),
                   [](const ConfigSetting& a, const ConfigSetting& b) { return a.line < b.line; });
  return settings;
}

}  // namespace gpudoctor
