#include "cli/node_check.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/text.h"
#include "health/correlate/correlate.h"

namespace gpudoctor {

void AddNodeCheckOptions(CLI::App* command, CheckOptions& options) {
  options.since = kNodeCheckSince;
  AddCheckInputOptions(command, options);
}

NodeCheckResult RunNodeCheck(const CommandContext& context, const CheckOptions& options) {
  NodeCheckResult result;
  CheckRun run = RunChecks(context, options);
  if (run.error) {
    result.error = run.error;
    return result;
  }
  result.hostname = run.gathered.snapshot.hostname;
  result.worst = run.assessment.worst;
  result.config = std::move(run.config);
  AddNodeProblems(result, std::move(run.assessment.findings));
  return result;
}

void AddNodeProblems(NodeCheckResult& result, std::vector<Finding> findings) {
  for (Finding& finding : findings) {
    if (finding.severity != Severity::kCritical && finding.severity != Severity::kWarning) continue;
    if (SeverityRank(finding.severity) > SeverityRank(result.worst)) result.worst = finding.severity;
    result.problems.push_back(std::move(finding));
  }
  // Worst first; among equals, what stands alone or is a root before what is told under a root.
  std::stable_sort(result.problems.begin(), result.problems.end(), [](const Finding& a, const Finding& b) {
    if (a.severity != b.severity) return SeverityRank(a.severity) > SeverityRank(b.severity);
    return a.part_of.empty() && !b.part_of.empty();
  });
}

std::vector<const Finding*> HeadlineProblems(const NodeCheckResult& result, Severity at_least) {
  std::vector<const Finding*> headline;
  const RootIndex roots(result.problems);
  for (const Finding& finding : result.problems)
    if (SeverityRank(finding.severity) >= SeverityRank(at_least) && !roots.ToldUnderRoot(finding))
      headline.push_back(&finding);
  return headline;
}

std::string SummaryAfterGpu(const Finding& finding) {
  if (!finding.gpu || !finding.gpu->index) return finding.summary;
  const std::string said = fmt::format("GPU {}: ", *finding.gpu->index);
  return StartsWith(finding.summary, said) ? finding.summary.substr(said.size()) : finding.summary;
}

nlohmann::json NodeProblemsToJson(const std::vector<Finding>& problems) {
  nlohmann::json json = nlohmann::json::array();
  for (const Finding& finding : problems) {
    json.push_back({{"id", finding.id},
                    {"severity", SeverityName(finding.severity)},
                    {"gpu", finding.gpu && finding.gpu->index ? nlohmann::json(*finding.gpu->index) : nullptr},
                    {"summary", finding.summary}});
  }
  return json;
}

}  // namespace gpudoctor
