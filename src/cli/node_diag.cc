#include "cli/node_diag.h"

#include <fmt/format.h>

#include "common/text.h"
#include "diag/diag_levels.h"
#include "diag/diag_summary.h"
#include "health/rules.h"

namespace gpudoctor {

std::vector<std::string> NodeDiagCommand(const CommandContext& context, int level) {
  std::vector<std::string> argv = {context.executable_path};
  const GlobalOptions& global = context.options;
  if (!global.nvml_library.empty()) argv.insert(argv.end(), {"--nvml-lib", global.nvml_library});
  if (!global.simulate.empty()) argv.insert(argv.end(), {"--simulate", global.simulate});
  argv.insert(argv.end(), {"--probe-timeout", fmt::format("{}", global.probe_deadline_s)});
  argv.insert(argv.end(), {"diag", "--level", std::to_string(level), "--json", "--quiet"});
  return argv;
}

NodeDiagResult RunNodeDiag(const CommandContext& context, int level, const HealthConfig& config,
                           CommandRunner& runner) {
  NodeDiagResult result;
  const DiagPlan* plan = FindDiagLevel(level);
  if (plan == nullptr) {
    result.notes.push_back(fmt::format("no diag level {}", level));
    return result;
  }
  const CommandResult run = runner.Run(NodeDiagCommand(context, level), plan->deadline);
  const std::string said = FitOneLine(run.errors, 300);
  switch (run.status) {
    case CommandStatus::kTimedOut:
      result.notes.push_back(fmt::format("gpudoctor diag --level {} did not finish within {}: the GPUs were not judged",
                                         level, FormatDuration(plan->deadline)));
      return result;
    case CommandStatus::kNotInstalled:
    case CommandStatus::kFailedToStart:
      result.notes.push_back(fmt::format("gpudoctor diag could not start: {}", run.message));
      return result;
    case CommandStatus::kExited: break;
  }
  auto summary = FindDiagSummary(run.output);
  if (!summary) {
    // Before any GPU was tested: NVML could not list them, a bad option.
    result.notes.push_back(fmt::format("gpudoctor diag --level {} exited {} without a result{}{}", level,
                                       run.exit_code, said.empty() ? "" : ": ", said));
    return result;
  }
  result.ran = true;
  result.line = summary->line;
  const WallTime now = SystemClock::Instance().Now();
  for (const DiagSummaryRow& row : summary->rows) {
    const std::string test = DiagTestName(row.test);
    if (row.state == DiagState::kCouldNotRun || row.state == DiagState::kInterrupted) {
      result.notes.push_back(fmt::format("GPU {} {} {}: {}", row.gpu, test, DiagStateName(row.state), row.reason));
      continue;
    }
    if (row.state != DiagState::kFaulty && row.state != DiagState::kHung) continue;
    const DiagnosticRecord record{.finished_at = now,
                                  .gpu_index = static_cast<uint32_t>(row.gpu),
                                  .test = test,
                                  .state = DiagStateName(row.state),
                                  .summary = row.reason,
                                  .command = fmt::format("gpudoctor diag {} --gpu {} --level {}", test, row.gpu,
                                                         level)};
    Finding finding = DiagnosticFailedFinding(record, config, now);
    // The drain reason is the summary: it says what the test found, not when.
    finding.summary = fmt::format("GPU {}: {} gpudoctor diag {} (level {}): {}", row.gpu,
                                  row.state == DiagState::kHung ? "hung in" : "failed", test, level, row.reason);
    result.findings.push_back(std::move(finding));
  }
  return result;
}

}  // namespace gpudoctor
