// The rows of dcgmi's two-column box tables ("| name | value |"), as both its diag and its health reports
// print them. Internal to the capture module.
#pragma once

#include <optional>
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

}  // namespace gpudoctor::dcgmi
