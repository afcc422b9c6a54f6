// The conditions another tool reported in a capture (`dcgmi health -c`, `nvidia-smi topo -m`), each as a
// finding of the gpudoctor rule that judges the same thing live: same id, same cause and next steps, the
// tool's own words as the evidence.
#include "health/rule_context.h"

namespace gpudoctor::rules_internal {
namespace {

void Report(RuleContext& context, const ReportedCondition& condition) {
  if (!context.config.Enabled(condition.rule_id)) return;
  std::optional<GpuRef> gpu;
  std::string about = "The node";
  if (condition.gpu_index) {
    gpu = GpuRef{.index = condition.gpu_index};
    if (const Snapshot* snapshot = context.input.snapshot)
      if (const GpuSnapshot* known = snapshot->FindGpu(*condition.gpu_index)) gpu = RefFor(*known);
    about = GpuName(*gpu);
  }
  const std::string system = condition.system.empty() ? "" : condition.system + ": ";
  context.Report(condition.rule_id, condition.failure ? Severity::kCritical : Severity::kWarning, gpu,
                 fmt::format("{}: {} reports {}{}", about, condition.tool, system, condition.text),
                 {fmt::format("{}: {}{}", condition.tool, system, condition.text)});
}

}  // namespace

void ReportedConditions(RuleContext& context) {
  if (const Snapshot* snapshot = context.input.snapshot)
    for (const ReportedCondition& condition : snapshot->reported_conditions) Report(context, condition);
  if (const auto* conditions = context.input.reported_conditions)
    for (const ReportedCondition& condition : *conditions) Report(context, condition);
}

}  // namespace gpudoctor::rules_internal
