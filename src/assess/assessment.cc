#include "assess/assessment.h"

#include <algorithm>

#include "health/correlate/correlate.h"

namespace gpudoctor {
namespace {

GpuVerdict VerdictOf(const GpuSnapshot& gpu) {
  GpuVerdict verdict;
  verdict.index = gpu.index;
  verdict.identity.index = gpu.index;
  verdict.identity.uuid = gpu.uuid.value_or("");
  verdict.identity.serial = gpu.serial.value_or("");
  verdict.identity.pci_bus_id = gpu.pci_bus_id.value_or("");
  verdict.name = gpu.name.value_or("");
  if (gpu.last_known) {
    // A GPU that no longer answers is named by what it was last seen as.
    const KnownGpuIdentity& known = *gpu.last_known;
    auto fill = [&](std::string& field, const std::string& remembered) {
      if (field.empty() && !remembered.empty()) {
        field = remembered;
        verdict.identity_from_memory = true;
      }
    };
    fill(verdict.identity.uuid, known.uuid);
    fill(verdict.identity.serial, known.serial);
    fill(verdict.identity.pci_bus_id, known.pci_bus_id);
    fill(verdict.name, known.name);
    if (verdict.identity_from_memory) verdict.identity_source = known.source;
  }
  return verdict;
}

}  // namespace

IdentityKnowledge GpuVerdict::Knowledge() const {
  if (identity_from_memory) return IdentityKnowledge::kLastKnown;
  return identity.uuid.empty() && identity.serial.empty() && identity.pci_bus_id.empty() ? IdentityKnowledge::kUnknown
                                                                                         : IdentityKnowledge::kRead;
}

std::vector<const Finding*> Assessment::Problems() const {
  std::vector<const Finding*> problems;
  for (const Finding& finding : findings)
    if (finding.severity == Severity::kCritical || finding.severity == Severity::kWarning) problems.push_back(&finding);
  std::stable_sort(problems.begin(), problems.end(), [](const Finding* a, const Finding* b) {
    if (a->severity != b->severity) return SeverityRank(a->severity) > SeverityRank(b->severity);
    return a->part_of.empty() && !b->part_of.empty();
  });
  return problems;
}

const GpuVerdict* Assessment::Gpu(uint32_t index) const {
  for (const GpuVerdict& gpu : gpus)
    if (gpu.index == index) return &gpu;
  return nullptr;
}

Assessment Assess(const AssessInputs& inputs, const HealthConfig& config, const EventGrader& grader) {
  HealthInput input{.snapshot = inputs.snapshot,
                    .previous = inputs.previous,
                    .host = inputs.host,
                    .log_events = inputs.log_events,
                    .nvml_xid_events = inputs.nvml_xid_events,
                    .event_grader = &grader,
                    .blocked_task_watch = inputs.blocked_task_watch,
                    .agent = inputs.agent,
                    .host_history = inputs.host_history,
                    .diagnostics = inputs.diagnostics,
                    .reported_conditions = inputs.reported_conditions,
                    .command_lines = inputs.command_lines,
                    .now = inputs.now};
  Assessment assessment;
  std::vector<Finding> findings = EvaluateRules(input, config, assessment.unchecked);
  for (const Finding& finding : inputs.watched) findings.push_back(finding);
  if (inputs.agent) {
    for (Finding& finding : AgentOpenFindings(*inputs.agent, findings, inputs.now, config))
      findings.push_back(std::move(finding));
  }
  assessment.findings = Correlate(std::move(findings), input, config);
  assessment.checklist = BuildChecklist(assessment.findings, config, assessment.unchecked);
  assessment.worst = WorstSeverity(assessment.findings);

  if (inputs.snapshot != nullptr) {
    for (const GpuSnapshot& gpu : inputs.snapshot->gpus) assessment.gpus.push_back(VerdictOf(gpu));
  } else {
    // No readings (a captured dcgmi report, a log): the GPUs are those the findings name.
    for (const Finding& finding : assessment.findings) {
      if (!finding.gpu || !finding.gpu->index || assessment.Gpu(*finding.gpu->index) != nullptr) continue;
      assessment.gpus.push_back(GpuVerdict{.index = *finding.gpu->index, .identity = *finding.gpu});
    }
    std::sort(assessment.gpus.begin(), assessment.gpus.end(),
              [](const GpuVerdict& a, const GpuVerdict& b) { return a.index < b.index; });
  }
  for (size_t i = 0; i < assessment.findings.size(); ++i) {
    const Finding& finding = assessment.findings[i];
    if (!finding.gpu) continue;
    for (GpuVerdict& gpu : assessment.gpus) {
      if (!SameGpu(*finding.gpu, gpu.identity)) continue;
      gpu.findings.push_back(i);
      if (SeverityRank(finding.severity) > SeverityRank(gpu.health)) gpu.health = finding.severity;
      break;
    }
  }
  for (GpuVerdict& gpu : assessment.gpus) {
    std::stable_sort(gpu.findings.begin(), gpu.findings.end(), [&](size_t a, size_t b) {
      return SeverityRank(assessment.findings[a].severity) > SeverityRank(assessment.findings[b].severity);
    });
  }
  return assessment;
}

}  // namespace gpudoctor
