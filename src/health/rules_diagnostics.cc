// The tests of `gpudoctor diag` (memtest, burn, pcie) as the agent's history
// keeps them, or those of a captured `dcgmi diag` report or gpu_burn output: a
// GPU whose newest test found it faulty, or hung, within the window is a
// finding until a newer run of the same test passes. A captured report that
// ran no test on a GPU gives no verdict on it (unknown), never a pass.
#include <set>

#include "common/text.h"
#include "health/rule_context.h"

namespace gpudoctor::rules_internal {
namespace {

constexpr std::string_view kRuleId = "diagnostic_failed";

// A faulty memory, a GPU that fails under load or one that stops answering
// loses jobs; a marginal PCIe link mostly slows them down.
Severity SeverityOf(const DiagnosticRecord& record) {
  return record.test == "memtest" || record.test == "burn" || record.state == "hung" ? Severity::kCritical
                                                                                       : Severity::kWarning;
}

GpuRef DiagnosedGpu(const DiagnosticRecord& record) {
  return GpuRef{.index = record.gpu_index, .uuid = record.uuid, .pci_bus_id = record.pci_bus_id};
}

// Whether the tested board has left the server (replaced, say): the snapshot
// names every GPU by UUID and none is the record's.
bool BoardLeft(const RuleContext& context, const DiagnosticRecord& record) {
  if (record.uuid.empty() || !context.DriverUp()) return false;
  for (const GpuSnapshot& gpu : context.input.snapshot->gpus)
    if (!gpu.uuid.has_value() || gpu.uuid.value() == record.uuid) return false;
  return true;
}

// A record of gpudoctor diag's own is dated; another tool's report, captured, states no time (its tests count as
// just run).
bool Captured(const DiagnosticRecord& record) { return record.tool != kGpudoctorDiagTool; }

// "2d 3h ago", or "in the captured report".
std::string Ago(const DiagnosticRecord& record, WallTime now) {
  return Captured(record) ? "in the captured report" : FormatSpan(now - record.finished_at) + " ago";
}

// "GPU 3: memtest passed 2d 3h ago"
std::string Line(const DiagnosticRecord& record, WallTime now) {
  return fmt::format("{}: {} {} {}", GpuName(DiagnosedGpu(record)), record.test, record.state, Ago(record, now));
}

void ReportFault(RuleContext& context, const DiagnosticRecord& record) {
  const WallTime now = context.input.now;
  const GpuRef gpu = DiagnosedGpu(record);
  const std::string what = fmt::format("{} {} {}", record.state == "hung" ? "hung in" : "failed", record.tool,
                                       record.test);
  std::vector<std::string> evidence{
      Captured(record) ? fmt::format("{} {}: {} (the captured report states no time)", record.tool, record.test,
                                     record.state)
                       : fmt::format("{} {}: {} at {}", record.tool, record.test, record.state,
                                     FormatIsoUtc(record.finished_at)),
      record.summary,
  };
  if (!record.uuid.empty()) evidence.push_back(record.uuid + (record.pci_bus_id.empty() ? "" : " at " + record.pci_bus_id));
  Finding& finding = context.Report(kRuleId, SeverityOf(record), gpu,
                                    fmt::format("{} {} {}", GpuName(gpu), what, Ago(record, now)), std::move(evidence),
                                    record.test);
  finding.subject = record.test;  // each test is its own incident
  finding.newest_event_at = record.finished_at;  // a newer failing run reopens an acknowledged one
  for (std::string& action : finding.actions) action = ReplaceAll(action, "{command}", record.command);
}

}  // namespace

void DiagnosticFailed(RuleContext& context) {
  const std::vector<DiagnosticRecord>* diagnostics = context.input.diagnostics;
  if (diagnostics == nullptr) return;
  if (diagnostics->empty()) {
    context.Unchecked(kRuleId, "no gpudoctor diag run is recorded in the agent's history");
    return;
  }
  const WallTime now = context.input.now;
  const Duration window = context.thresholds.diagnostic_failed.window;
  std::vector<std::string> fine;
  bool faulty = false;
  for (const DiagnosticRecord& record : *diagnostics) {
    if (BoardLeft(context, record)) {
      fine.push_back(Line(record, now) + " (that board is no longer in this server)");
    } else if (FoundFault(record) && context.WithinWindow(record.finished_at, window)) {
      ReportFault(context, record);
      faulty = true;
    } else {
      fine.push_back(Line(record, now));
    }
  }
  if (faulty) return;
  // A captured report whose tests never ran on a GPU (gpu_burn's OK for a GPU it did no work on, dcgmi's Skip)
  // proves nothing of it: not a pass.
  std::set<uint32_t> tested, untested;
  for (const DiagnosticRecord& record : *diagnostics) {
    if (!Captured(record)) continue;
    if (record.state == "passed") tested.insert(record.gpu_index);
    else untested.insert(record.gpu_index);
  }
  for (uint32_t gpu : tested) untested.erase(gpu);
  if (!untested.empty()) {
    std::vector<std::string> said;  // what the report says of each untested GPU's tests
    for (const DiagnosticRecord& record : *diagnostics)
      if (Captured(record) && untested.contains(record.gpu_index)) said.push_back(record.summary);
    context.ReportUnknown(kRuleId,
                          fmt::format("The captured report did not test {} {}: no verdict on {}",
                                      untested.size() == 1 ? "GPU" : "GPUs", fmt::join(untested, ", "),
                                      untested.size() == 1 ? "it" : "them"),
                          std::move(said), "untested");
    return;
  }
  context.Pass(kRuleId, fmt::format("No GPU failed a diagnostic in the last {}", FormatSpan(window)), std::move(fine));
}

}  // namespace gpudoctor::rules_internal

namespace gpudoctor {

Finding DiagnosticFailedFinding(const DiagnosticRecord& record, const HealthConfig& config, WallTime now) {
  const HealthInput input{.now = now};
  std::vector<Finding> findings;
  std::vector<UncheckedRule> unchecked;
  rules_internal::RuleContext context(input, config, findings, unchecked);
  rules_internal::ReportFault(context, record);
  return std::move(findings.front());
}

}  // namespace gpudoctor
