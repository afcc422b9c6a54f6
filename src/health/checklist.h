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
#pragma once

#include <cstddef>
#include <span>
#include <string>
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
  std::vector<size_t> findings;  // indices into the findings, worst first
};

struct Checklist {
  std::vector<ChecklistItem> items;
  std::vector<size_t> other_findings;  // findings of rules on no checklist item, in their order
};

// `unchecked`: why rules judged nothing (EvaluateRules), for the items that stay unchecked.
Checklist BuildChecklist(const std::vector<Finding>& findings, const HealthConfig& config,
                         std::span<const UncheckedRule> unchecked = {});

}  // namespace gpudoctor
