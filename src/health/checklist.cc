#include "health/checklist.h"

#include <algorithm>
#include <set>

namespace gpudoctor {

namespace {

// "not checked", with the reasons the item's rules gave.
std::string NotCheckedSummary(const ChecklistEntry& entry, std::span<const UncheckedRule> unchecked) {
  std::string reasons;
  for (const UncheckedRule& rule : unchecked) {
    if (std::find(entry.rule_ids.begin(), entry.rule_ids.end(), rule.rule_id) == entry.rule_ids.end()) continue;
    reasons += (reasons.empty() ? ": " : "; ") + rule.reason;
  }
  return "not checked" + reasons;
}

}  // namespace

Checklist BuildChecklist(const std::vector<Finding>& findings, const HealthConfig& config,
                         std::span<const UncheckedRule> unchecked) {
  Checklist checklist;
  std::set<std::string, std::less<>> on_checklist;
  for (const ChecklistEntry& entry : config.checklist) {
    ChecklistItem item;
    item.title = entry.title;
    for (size_t i = 0; i < findings.size(); ++i) {
      if (std::find(entry.rule_ids.begin(), entry.rule_ids.end(), findings[i].id) != entry.rule_ids.end()) {
        item.findings.push_back(i);
      }
    }
    on_checklist.insert(entry.rule_ids.begin(), entry.rule_ids.end());
    std::stable_sort(item.findings.begin(), item.findings.end(), [&](size_t a, size_t b) {
      return SeverityRank(findings[a].severity) > SeverityRank(findings[b].severity);
    });
    item.checked = !item.findings.empty();
    if (item.checked) {
      const Finding& worst = findings[item.findings.front()];
      item.severity = worst.severity;
      if (worst.severity == Severity::kOk) {
        for (size_t index : item.findings) {
          if (!item.summary.empty()) item.summary += "; ";
          item.summary += findings[index].summary;
        }
      } else {
        const size_t problems = std::count_if(item.findings.begin(), item.findings.end(),
                                              [&](size_t i) { return findings[i].severity != Severity::kOk; });
        item.summary = worst.summary;
        if (problems > 1) item.summary += " (+" + std::to_string(problems - 1) + " more)";
      }
    } else {
      item.summary = NotCheckedSummary(entry, unchecked);
    }
    checklist.items.push_back(std::move(item));
  }
  for (size_t i = 0; i < findings.size(); ++i)
    if (!on_checklist.count(findings[i].id)) checklist.other_findings.push_back(i);
  return checklist;
}

}  // namespace gpudoctor
