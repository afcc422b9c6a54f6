#include "health/finding.h"

namespace gpudoctor {

const char* SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kOk: return "ok";
    case Severity::kWarning: return "warning";
    case Severity::kCritical: return "critical";
    case Severity::kUnknown: return "unknown";
  }
  return "unknown";
}

std::optional<Severity> SeverityFromName(std::string_view name) {
  if (name == "ok") return Severity::kOk;
  if (name == "warning") return Severity::kWarning;
  if (name == "critical") return Severity::kCritical;
  if (name == "unknown") return Severity::kUnknown;
  return std::nullopt;
}

int SeverityRank(Severity severity) {
  switch (severity) {
    case Severity::kOk: return 0;
    case Severity::kUnknown: return 1;
    case Severity::kWarning: return 2;
    case Severity::kCritical: return 3;
  }
  return 1;
}

int ExitStatusFor(Severity worst) { return static_cast<int>(worst); }

Severity WorstSeverity(const std::vector<Finding>& findings) {
  Severity worst = Severity::kOk;
  for (const Finding& finding : findings)
    if (SeverityRank(finding.severity) > SeverityRank(worst)) worst = finding.severity;
  return worst;
}

}  // namespace gpudoctor
