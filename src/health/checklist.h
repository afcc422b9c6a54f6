// The weekly checklist: the findings of a `check` run folded into the eight
// lines operators already use ("GPUs below their temperature limits", "Fans turning", ...),
// followed by every finding not on the checklist.
//
// The items and the rules behind each come from data/rules.toml
// ([[checklist]]), so a site can change them in its config file.
//
//   std::vector<Finding> findings = EvaluateRules(input, config);
//   Checklist checklist = BuildChecklist(findings, config);
//   for (const ChecklistItem& item : checklist.items)
//     std::cout << SeverityName(item.severity) << "  " << item.title << ": " << item.summary << "\n";
//
// The fleet reuses the same assignment of findings to items (BuildChecklist
// over the findings an agent exports), and the agent exports each item's state
// in a word (ChecklistStateName) for it.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "health/finding.h"
#include "health/health_config.h"
#include "health/rules.h"

namespace gpudoctor {

struct ChecklistItem {
  std::string title;
  // False when none of the item's rules had anything to judge (nothing
  // configured, source not available); severity is then ok and does not
  // count towards the exit status.
  bool checked = false;
  Severity severity = Severity::kOk;  // the worst of its findings
  // One line: the worst finding's summary ("+ N more" when there are
  // several problems), or the ok summaries joined by "; ", or "not checked"
  // with the reasons its rules gave ("not checked: ...").
  std::string summary;
  // When not checked: the reasons its rules gave, joined by "; " ("" when they gave none).
  std::string unchecked_reason;
  std::vector<size_t> findings;  // indices into the findings, worst first
};

struct Checklist {
  std::vector<ChecklistItem> items;
  std::vector<size_t> other_findings;  // findings of rules on no checklist item, in their order
};

// `unchecked`: why rules judged nothing (EvaluateRules), for the items that stay unchecked.
Checklist BuildChecklist(const std::vector<Finding>& findings, std::span<const ChecklistEntry> entries,
                         std::span<const UncheckedRule> unchecked = {});
inline Checklist BuildChecklist(const std::vector<Finding>& findings, const HealthConfig& config,
                                std::span<const UncheckedRule> unchecked = {}) {
  return BuildChecklist(findings, config.checklist, unchecked);
}

// The checklist of what an agent has open: BuildChecklist over `open` (its open
// incidents), where an item none of them falls on is as `judged` (the checklist
// of the same round's findings, ok ones included, over the same entries) found
// it: checked and ok when its rules judged something (an acknowledged problem,
// which is not open, included), else not checked with `judged`'s reasons.
Checklist BuildOpenChecklist(const std::vector<Finding>& open, const Checklist& judged,
                             std::span<const ChecklistEntry> entries);

// An unchecked item's summary: "not checked", or "not checked: REASON".
std::string NotCheckedSummary(std::string_view reason);

// An item's state in a word: its severity's name when checked, else "unchecked".
inline constexpr std::string_view kUncheckedState = "unchecked";
std::string_view ChecklistStateName(const ChecklistItem& item);

}  // namespace gpudoctor
