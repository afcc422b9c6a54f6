// `gpudoctor check`: every health rule once, printed as the weekly checklist
// followed by every other rule's result; the exit status follows the
// Nagios/NHC convention (0 ok, 1 warning, 2 critical, 3 unknown).

#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "assess/assessment_json.h"
#include "cli/check_inputs.h"
#include "cli/commands.h"
#include "cli/diag_history.h"
#include "cli/terminal.h"
#include "common/json_text.h"
#include "common/text.h"
#include "health/correlate/correlate.h"
#include "health/finding_json.h"

namespace gpudoctor {
namespace {

void PrintCheck(std::FILE* out, const Style& style, const CheckRun& run) {
  const Gathered& gathered = run.gathered;
  const Assessment& assessment = run.assessment;
  std::fprintf(out, "%s  %s  (%s)\n", style.Bold("gpudoctor check").c_str(), gathered.snapshot.hostname.c_str(),
               gathered.snapshot_description.c_str());
  for (const SourceNote& s : gathered.sources)
    std::fprintf(out, "%s\n", style.Dim(s.source + ": " + s.status + " (" + s.detail + ")").c_str());

  std::fprintf(out, "\n%s\n", style.Bold("Weekly checklist").c_str());
  for (const ChecklistItem& item : assessment.checklist.items) {
    std::string label = item.checked ? style.Severity(item.severity) : style.Dim("-");
    std::fprintf(out, "  %-*s %s: %s\n", style.color() ? 19 : 8, label.c_str(), item.title.c_str(),
                 item.summary.c_str());
  }
  if (!assessment.checklist.other_findings.empty()) {
    std::fprintf(out, "\n%s\n", style.Bold("Other checks").c_str());
    const RootIndex roots(assessment.findings);
    for (size_t index : assessment.checklist.other_findings) {
      const Finding& f = assessment.findings[index];
      if (roots.ToldUnderRoot(f)) continue;  // its root lists it
      std::fprintf(out, "  %-*s %-22s %s\n", style.color() ? 19 : 8, style.Severity(f.severity).c_str(), f.id.c_str(),
                   f.summary.c_str());
    }
  }
  PrintRememberedIdentities(out, style, assessment);
  if (gathered.diagnostics)
    PrintLastDiagnostics(out, style, gathered.snapshot, *gathered.diagnostics, gathered.judged_at);
  std::fprintf(out, "\n");
  if (assessment.worst == Severity::kOk) {
    std::fprintf(out, "%s no problems found.\n", style.Severity(Severity::kOk).c_str());
  } else {
    PrintFindings(out, style, assessment.findings, /*include_ok=*/false);
    std::fprintf(out, "\nStatus: %s\n", style.Severity(assessment.worst).c_str());
  }
}

}  // namespace

void RegisterCheckCommand(CLI::App& app, CommandContext& context) {
  auto* command = app.add_subcommand("check", "Run every health check once: the weekly checklist and all other rules");
  auto options = std::make_shared<CheckOptions>();
  AddCheckInputOptions(command, *options);
  command->footer(
      "Reads the GPUs (NVML, --simulate or --from-smi), this machine's host signals and the kernel log of\n"
      "the last --since (or the --logs files), then runs every rule once.\n"
      "Exit status (Nagios/NHC): 0 ok, 1 warning, 2 critical, 3 unknown;\n"
      "64 bad command line, 65 an input or config too large or in no known format, 66 an input file\n"
      "that cannot be opened (missing, unreadable, not a regular file).");
  command->callback([&context, options] {
    CheckRun run = RunChecks(context, *options);
    if (run.error) {
      std::fprintf(stderr, "gpudoctor check: %s\n", run.error->message.c_str());
      context.exit_code = run.error->exit_code;
      return;
    }
    const Assessment& assessment = run.assessment;
    if (context.options.json) {
      nlohmann::json json;
      json["status"] = SeverityName(assessment.worst);
      json["hostname"] = run.gathered.snapshot.hostname;
      json["judged_at"] = FormatIsoUtc(run.gathered.judged_at);
      json["sources"] = SourcesToJson(run.gathered.sources);
      json["checklist"] = ChecklistToJson(assessment.checklist, assessment.findings);
      json["not_checked"] = NotCheckedToJson(assessment.unchecked);
      json["findings"] = FindingsToJson(assessment.findings);
      json["gpus"] = GpuVerdictsToJson(assessment, run.gathered.diagnostics ? &*run.gathered.diagnostics : nullptr);
      std::printf("%s\n", ToJsonText(json, 2).c_str());
    } else {
      PrintCheck(stdout, Style(context.options.color, stdout), run);
    }
    context.exit_code = assessment.ExitStatus();
  });
}

}  // namespace gpudoctor
