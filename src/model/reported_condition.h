// What another health tool in a capture said about a GPU or the node (DCGM's health watches, through
// `dcgmi health -c`), kept under the gpudoctor rule that judges the same thing live, so that a capture and
// live data name one fault alike.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gpudoctor {

struct ReportedCondition {
  std::string tool;                   // "dcgmi health"
  std::string rule_id;                // the rule judging the same thing: "pcie_replay", "nvlink_errors", ...
  std::optional<uint32_t> gpu_index;  // nullopt: the node as a whole
  bool failure = false;               // the tool called it a failure (critical), else a warning
  std::string system;                 // what the tool watched, in its words: "PCIe", "NVLink", "Memory"
  std::string text;                   // what it said
  bool operator==(const ReportedCondition&) const = default;
};

}  // namespace gpudoctor
