#include "health/checklist.h"

#include <algorithm>
#include <set>

namespace gpudoctor {

namespace {

// The reasons the item's rules gave for judging nothing, joined by "; ".
std::string UncheckedReason(const ChecklistEntry& entry, std::span<const UncheckedRule> unchecked) {
  std::string reasons;
  for (const UncheckedRule& rule : unchecked) {
    if (std::find(entry.rule_ids.begin(), entry.rule_ids.end(), rule.rule_id) == entry.rule_ids.end()) continue;
    reasons += (reasons.empty() ? "" : "; ") + rule.reason;
  }
  return reasons;
}

}  // namespace

std::string NotCheckedSummary(std::string_view reason) {
  return reason.empty() ? std::string("not checked") : "not checked: " + std::string(reason);
}

Checklist BuildChecklist(const std::vector<Finding>& findings, std::span<const ChecklistEntry> entries,
                         std::span<const UncheckedRule> unchecked) {
  Checklist checklist;
  std::set<std::string, std::less<>> on_checklist;
  for (const ChecklistEntry& entry : entries) {
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
      item.unchecked_reason = UncheckedReason(entry, unchecked);
      item.summary = NotCheckedSummary(item.unchecked_reason);
    }
    checklist.items.push_back(std::move(item));
  }
  for (size_t i = 0; i < findings.size(); ++i)
    if (!on_checklist.count(findings[i].id)) checklist.other_findings.push_back(i);
  return checklist;
}

Checklist BuildOpenChecklist(const std::vector<Finding>& open, const Checklist& judged,
                             std::span<const ChecklistEntry> entries) {
  Checklist checklist = BuildChecklist(open, entries);
  for (size_t i = 0; i < checklist.items.size() && i < judged.items.size(); ++i) {
    ChecklistItem& item = checklist.items[i];
    const ChecklistItem& as_judged = judged.items[i];
    if (item.checked) continue;
    item.checked = as_judged.checked;
    item.unchecked_reason = as_judged.unchecked_reason;
    if (!as_judged.checked) item.summary = as_judged.summary;
    else if (as_judged.severity == Severity::kOk) item.summary = as_judged.summary;
    else item.summary = "no open problem (acknowledged: " + as_judged.summary + ")";
  }
  return checklist;
}

std::string_view ChecklistStateName(const ChecklistItem& item) {
  return item.checked ? std::string_view(SeverityName(item.severity)) : kUncheckedState;
}

}  // namespace gpudoctor
