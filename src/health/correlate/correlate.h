// Correlation: one story per incident. The step between the rules (and the
// agent's detectors and escalations) and everything that presents, stores or
// sends findings, shared by check, triage, report, the agent and its alerts.
//
// When several findings have one cause, it adds a root-cause finding whose
// evidence lists them and marks each of them part of it (Finding::part_of),
// or marks one finding part of another that caused it. Nothing is removed:
// the per-GPU detail stays in the JSON and the agent's API, while the
// terminal shows the root with its members under it and alerts page once.
// The rules are data (data/correlations.toml, HealthConfig::correlations):
//
//   named_cause   an Xid line that names its cause ("... caused by previous
//                 Xid 149") joins the finding of that Xid on the same GPU
//   absorb        an escalation takes in the xid_recent finding it grew from
//   event_burst   Xids on several GPUs within seconds: xid_burst
//   shared_cause  most GPUs past a thermal limit at once, or any while the
//                 inlet air is out of range: facility_cooling
//
//   std::vector<Finding> findings = EvaluateRules(input, config);
//   findings = Correlate(std::move(findings), input, config);
//   // a room cooling failure: one critical facility_cooling finding; its 8
//   // temperature_high and 8 clock_throttle findings carry
//   // part_of = "facility_cooling"
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include <vector>

#include "health/finding.h"
#include "health/health_config.h"
#include "health/rules.h"

namespace gpudoctor {

// `input` is what the rules judged: its snapshot counts the GPUs, its events
// (within xid_recent's window) show which Xids came together. Findings
// already part of another stay so; roots are appended after the findings.
std::vector<Finding> Correlate(std::vector<Finding> findings, const HealthInput& input, const HealthConfig& config);

// Which findings are told under a root (their part_of names another finding
// present): presenters list them there, in the root's evidence, not on their
// own. Built once for a list (a storm's log gives a thousand findings).
//
//   RootIndex roots(findings);
//   for (const Finding& f : findings) if (!roots.ToldUnderRoot(f)) Print(f);
class RootIndex {
 public:
  explicit RootIndex(const std::vector<Finding>& findings);
  bool ToldUnderRoot(const Finding& finding) const;

 private:
  std::unordered_map<std::string, size_t> keys_;  // FindingKey -> findings holding it
};

}  // namespace gpudoctor
