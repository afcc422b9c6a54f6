// The stable JSON form of findings, as `check --json` prints them
// (documented in docs/findings.md):
//
//   {"id": "temperature_high", "severity": "critical",
//    "gpu": {"index": 3, "uuid": "GPU-...", "pci_bus_id": "0000:3b:00.0"},
//    "summary": "...", "evidence": ["..."], "cause": "...", "actions": ["..."],
//    "key": "temperature_high@GPU-...", "part_of": "facility_cooling"}   // part_of: null when alone
#pragma once

#include <nlohmann/json.hpp>

#include <vector>

#include "health/checklist.h"
#include "health/finding.h"

namespace gpudoctor {

nlohmann::json FindingToJson(const Finding& finding);
nlohmann::json FindingsToJson(const std::vector<Finding>& findings);
// {"title", "checked", "severity", "summary", "finding_ids": [...]} per item.
nlohmann::json ChecklistToJson(const Checklist& checklist, const std::vector<Finding>& findings);

}  // namespace gpudoctor
