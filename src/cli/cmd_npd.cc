// `gpudoctor npd`: the node check as a Kubernetes node-problem-detector custom
// plugin. NPD's contract: exit 0 OK, 1 NonOK (a problem), anything else
// Unknown; it trims standard output and keeps its first max_output_length
// bytes (80 by default) as the condition's message. So this prints one line,
// the most important problem first, short enough to survive the cut whole.
// docs/kubernetes.md has the plugin configuration.

#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/node_check.h"
#include "common/json_text.h"
#include "common/text.h"

namespace gpudoctor {
namespace {

// NPD's custom plugin exit statuses (pkg/custompluginmonitor/types).
constexpr int kNpdOk = 0;
constexpr int kNpdNonOk = 1;
constexpr int kNpdUnknown = 2;

struct NpdOptions {
  CheckOptions check;
  std::string severity = "critical";  // findings at or above it are a problem
  size_t max_output_length = 80;      // NPD's max_output_length
};

// "gpu 6: ecc_uncorrectable: 2 uncorrectable ECC errors ... (+3 more)", cut to fit.
std::string ProblemMessage(const std::vector<const Finding*>& problems, size_t max_bytes) {
  const Finding& first = *problems.front();
  std::string head = first.id + ": " + SummaryAfterGpu(first);
  if (first.gpu && first.gpu->index) head = fmt::format("gpu {}: {}", *first.gpu->index, head);
  const std::string more = problems.size() > 1 ? fmt::format(" (+{} more)", problems.size() - 1) : "";
  // The count goes only where the message has room for it after the first words.
  if (max_bytes < more.size() + 20) return FitOneLine(head, max_bytes);
  return FitOneLine(head, max_bytes - more.size()) + more;
}

}  // namespace

void RegisterNpdCommand(CLI::App& app, CommandContext& context) {
  auto* command = app.add_subcommand(
      "npd", "Kubernetes node-problem-detector custom plugin: one line and exit 0 OK, 1 problem, 2 unknown");
  auto options = std::make_shared<NpdOptions>();
  AddNodeCheckOptions(command, options->check);
  command->add_option("--severity", options->severity, "Findings at or above this severity are a problem")
      ->check(CLI::IsMember({"critical", "warning"}))
      ->capture_default_str();
  command->add_option("--max-output-length", options->max_output_length,
                      "Longest message in bytes: NPD's max_output_length, where it cuts the output")
      ->check(CLI::Range(20, 4096))
      ->capture_default_str();
  command->footer(
      "Runs every health rule once (like `check`, with log events of the last --since only, 10m by default)\n"
      "and speaks node-problem-detector's custom plugin protocol: the first line of standard output is the\n"
      "condition's message, most important first (\"gpu 3: gpu_lost: GPU 3 has fallen off the bus\"),\n"
      "never longer than --max-output-length bytes, and the exit status is NPD's:\n"
      "  0 OK       no finding at --severity or worse\n"
      "  1 NonOK    a finding at --severity or worse: the message names the first, \"(+N more)\" the rest\n"
      "  2 Unknown  the check could not run (a --config or --simulate file that is missing or cannot be\n"
      "             used): the line says why. NPD reads any other status as Unknown too: 64 bad command line\n"
      "Give the rule a timeout above --probe-timeout (10 s): NPD's own default of 5 s can cut a hung\n"
      "driver's report short. See docs/kubernetes.md.\n"
      "\n"
      "Examples:\n"
      "  gpudoctor npd                                   the plugin, as NPD runs it\n"
      "  gpudoctor npd --severity warning                warnings are problems too\n"
      "  gpudoctor npd --simulate examples/gpu-fallen-off-bus.toml   rehearse a fault");
  command->callback([&context, options] {
    NodeCheckResult result = RunNodeCheck(context, options->check);
    const Severity threshold = options->severity == "warning" ? Severity::kWarning : Severity::kCritical;
    int status = kNpdOk;
    std::string message;
    std::vector<const Finding*> problems;
    if (result.error) {
      status = kNpdUnknown;
      message = FitOneLine("gpudoctor cannot check: " + result.error->message, options->max_output_length);
    } else {
      problems = HeadlineProblems(result, threshold);
      if (!problems.empty()) {
        status = kNpdNonOk;
        message = ProblemMessage(problems, options->max_output_length);
      } else {
        message = FitOneLine(fmt::format("gpudoctor: no {} finding (worst: {})", options->severity,
                                         SeverityName(result.worst)),
                             options->max_output_length);
      }
    }
    if (context.options.json) {
      std::vector<Finding> listed;
      for (const Finding* finding : problems) listed.push_back(*finding);
      nlohmann::json json = {{"status", status == kNpdOk ? "ok" : status == kNpdNonOk ? "problem" : "unknown"},
                             {"message", message},
                             {"worst_severity", result.error ? nullptr : nlohmann::json(SeverityName(result.worst))},
                             {"findings", NodeProblemsToJson(listed)}};
      std::printf("%s\n", ToJsonText(json).c_str());
    } else {
      std::printf("%s\n", message.c_str());
    }
    if (result.error) std::fprintf(stderr, "gpudoctor npd: %s\n", result.error->message.c_str());
    context.exit_code = status;
  });
}

}  // namespace gpudoctor
