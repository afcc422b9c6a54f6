// `dcgmi health -c` reports: see dcgmi.h.
//
//   Health Monitor Report
//   +----------------------------+------------------------------------------------------------+
//   | Overall Health             | Failure                                                    |
//   | GPU                        |                                                            |
//   | -> 1                       | Failure                                                    |
//   |    -> Errors               |                                                            |
//   |       -> Memory system     | Failure                                                    |
//   |                            | Green can be emerald and beautiful, but there are          |
//   |                            | shades of green which are sure to disappoint.              |
//
// An entity group ("GPU", "Switch"), its entities ("-> 1") with their health, each watched system of an entity
// ("-> PCIe system", "-> Driver") with its health and its messages, wrapped between words.

#include <re2/re2.h>

#include <optional>
#include <string>
#include <vector>

#include "capture/dcgmi.h"
#include "capture/dcgmi_rows.h"
#include "common/re2_view.h"
#include "common/text.h"

namespace gpudoctor::dcgmi {
namespace {

bool Contains(std::string_view text, std::string_view word) { return ContainsIgnoreCase(text, word); }

// The rule that judges live what a DCGM health watch reports, refined by the words of its message.
std::string RuleFor(std::string_view system, std::string_view text, bool failure) {
  if (Contains(system, "PCIe")) {
    if (Contains(text, "width") || Contains(text, "generation") || Contains(text, "link speed")) return "pcie_link_degraded";
    return "pcie_replay";
  }
  if (Contains(system, "NVLINK")) return Contains(text, "down") ? "nvlink_down" : "nvlink_errors";
  if (Contains(system, "NvSwitch")) return "nvlink_fabric";
  if (Contains(system, "Memory") || Contains(system, "SM")) {
    if (Contains(text, "remap")) return Contains(text, "pending") ? "remapped_rows_pending" : "row_remap_failure";
    if (Contains(text, "retire")) return "retired_pages";
    if (Contains(text, "SBE") || Contains(text, "single") || (!failure && !Contains(text, "uncorrectable")))
      return "ecc_corrected_high";
    return "ecc_uncorrectable";
  }
  if (Contains(system, "InfoROM")) return "inforom_corrupted";
  if (Contains(system, "Thermal")) return "clock_throttle";
  if (Contains(system, "Power")) return Contains(text, "violation") ? "power_capped" : "psu_fault";
  if (Contains(system, "Driver")) return "driver_unavailable";
  return "";
}

struct SystemReport {
  std::optional<uint32_t> gpu;
  std::string system;
  bool failure = false;
  std::string text;
};

// A box of dcgmi's JSON output: {"value", "children": {name: box}, "overflow": [the value's further lines]}.
const nlohmann::json* BoxChildren(const nlohmann::json& box) {
  auto children = box.find("children");
  return children != box.end() && children->is_object() ? &*children : nullptr;
}

// `dcgmi health -c -j`: {"header": ["Health Monitor Report"], "body": {"Overall Health": box, "GPU": {"children":
// {"1": {"value", "children": {"Errors": {"children": {"Memory system": {"value", "overflow": [...]}}}}}}}}}, the
// message's lines (wrapped between words) in the system's overflow. Nothing when the text is no such document.
std::optional<std::vector<SystemReport>> ReadJson(std::string_view text) {
  const nlohmann::json document = JsonAfterText(text);
  auto body = document.is_object() ? document.find("body") : document.end();
  if (!document.is_object() || body == document.end() || !body->is_object() || !body->contains("Overall Health"))
    return std::nullopt;
  std::vector<SystemReport> reports;
  for (const auto& [group, group_box] : body->items()) {
    const nlohmann::json* entities = group_box.is_object() ? BoxChildren(group_box) : nullptr;
    if (entities == nullptr) continue;
    for (const auto& [entity, entity_box] : entities->items()) {
      const nlohmann::json* parts = entity_box.is_object() ? BoxChildren(entity_box) : nullptr;
      auto errors = parts != nullptr ? parts->find("Errors") : nlohmann::json::const_iterator();
      const nlohmann::json* systems =
          parts != nullptr && errors != parts->end() && errors->is_object() ? BoxChildren(*errors) : nullptr;
      if (systems == nullptr) continue;
      for (const auto& [system, system_box] : systems->items()) {
        if (!system_box.is_object()) continue;
        SystemReport report{.gpu = group == "GPU" ? ParseInt<uint32_t>(entity) : std::nullopt,
                            .system = system,
                            .failure = JsonString(system_box, "value") == "Failure"};
        if (auto overflow = system_box.find("overflow"); overflow != system_box.end() && overflow->is_array()) {
          for (const nlohmann::json& line : *overflow) {
            if (!line.is_string()) continue;
            report.text += report.text.empty() ? "" : " ";
            report.text += Trim(line.get_ref<const std::string&>());
          }
        }
        reports.push_back(std::move(report));
      }
    }
  }
  return reports;
}

}  // namespace

bool LooksLikeHealth(std::string_view text) {
  static const RE2 kReport(R"((?m)^\s*Health Monitor Report\s*$)");
  static const RE2 kOverall(R"((?m)^\s*\|\s*Overall Health\s*[|:])");
  static const RE2 kError(R"((?m)^\s*Error: (?:Health watches not enabled|Unable to \w+ health watches))");
  const std::string_view head = text.substr(0, 64 * 1024);
  return RE2::PartialMatch(Piece(head), kReport) || RE2::PartialMatch(Piece(head), kOverall) ||
         RE2::PartialMatch(Piece(head), kError) || head.find("\"Health Monitor Report\"") != std::string_view::npos;
}

namespace {

// The systems of the table's report, the entity each belongs to; nothing when it has no "Overall Health" row.
std::optional<std::vector<SystemReport>> ReadTable(std::string_view text) {
  static const RE2 kEntity(R"(->\s*(\d+))");
  static const RE2 kSystem(R"(->\s*((?:\w[\w ]*?) system|Driver|NvSwitch N?F))");
  bool overall = false;
  bool in_gpus = true;  // the entity group of the entities that follow
  std::optional<uint32_t> entity;
  std::vector<SystemReport> reports;
  bool in_system = false;
  for (std::string_view line : Split(text, '\n')) {
    std::optional<TableRow> cells = TableRowOf(line);
    if (!cells) continue;
    uint32_t id = 0;
    std::string system;
    if (StartsWith(cells->name, "Overall Health")) {
      overall = true;
      in_system = false;
    } else if (RE2::FullMatch(Piece(cells->name), kSystem, &system)) {
      reports.push_back(SystemReport{.gpu = in_gpus ? entity : std::nullopt, .system = system,
                                     .failure = cells->value == "Failure"});
      in_system = true;
    } else if (RE2::FullMatch(Piece(cells->name), kEntity, &id)) {
      entity = id;
      in_system = false;
    } else if (cells->name.empty()) {
      if (in_system && !cells->value.empty()) {
        std::string& said = reports.back().text;
        said += said.empty() ? "" : " ";
        said += cells->value;
      }
    } else if (!StartsWith(cells->name, "->")) {
      in_gpus = cells->name == "GPU";  // "GPU", "Switch", "ConnectX", ...
      entity.reset();
      in_system = false;
    }
  }
  if (!overall) return std::nullopt;
  return reports;
}

}  // namespace

Result<std::vector<ReportedCondition>> ParseHealth(std::string_view text) {
  std::optional<std::vector<SystemReport>> reports = ReadJson(text);
  if (!reports) reports = ReadTable(text);
  if (!reports) {
    // dcgmi prints one error line instead of a report when it cannot check (no watches set, no host engine).
    for (std::string_view line : Split(text, '\n'))
      if (StartsWith(Trim(line), "Error: ")) return Error{"dcgmi health printed no report: " + std::string(Trim(line))};
    return Error{"no \"Overall Health\" line of a dcgmi health report found"};
  }
  std::vector<ReportedCondition> conditions;
  for (SystemReport& report : *reports) {
    std::string rule = RuleFor(report.system, report.text, report.failure);
    if (rule.empty()) rule = "log_errors";  // a watch gpudoctor has no rule of its own for: still reported
    conditions.push_back(ReportedCondition{.tool = "dcgmi health",
                                           .rule_id = std::move(rule),
                                           .gpu_index = report.gpu,
                                           .failure = report.failure,
                                           .system = std::move(report.system),
                                           .text = std::move(report.text)});
  }
  return conditions;
}

}  // namespace gpudoctor::dcgmi
