// What dcgmi's diag and health reports share: the rows of their two-column box tables ("| name | value |"), and
// the JSON document `-j` prints instead. Internal to the capture module.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "common/text.h"

namespace gpudoctor::dcgmi {

struct TableRow {
  std::string_view name;   // trimmed; empty on a continuation row
  std::string_view value;  // trimmed
  std::string_view cell;   // the value column as printed, padding included
};

// The row `line` is, or nullopt for a border, a section rule ("|-----  Deployment  ---") or other text. The
// closing '|' may be cut off (pasted excerpts).
inline std::optional<TableRow> TableRowOf(std::string_view line) {
  line = Trim(line);
  if (line.size() < 2 || line.front() != '|' || StartsWith(line, "|---") || StartsWith(line, "|===")) return std::nullopt;
  const size_t split = line.find('|', 1);
  if (split == std::string_view::npos) return std::nullopt;
  std::string_view cell = line.substr(split + 1);
  if (!cell.empty() && cell.back() == '|') cell.remove_suffix(1);
  return TableRow{.name = Trim(line.substr(1, split - 1)), .value = Trim(cell), .cell = cell};
}

// The JSON document of `-j`, after whatever dcgmi printed before it; a discarded value when the text holds no
// whole document (an excerpt, or no JSON at all).
inline nlohmann::json JsonAfterText(std::string_view text) {
  const size_t start = text.find('{');
  if (start == std::string_view::npos) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text.substr(start), nullptr, /*allow_exceptions=*/false);
}

// The string at `key` of a JSON object; empty when it is absent or not a string.
inline std::string JsonString(const nlohmann::json& object, std::string_view key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace gpudoctor::dcgmi
