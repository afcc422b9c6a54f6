// `gpudoctor slurm`: the node check as Slurm's HealthCheckProgram or prolog.
// A critical finding drains the node (with --drain; a dry run otherwise)
// unless the circuit breaker holds; a node gpudoctor drained is resumed once
// it is healthy. With --diag-level N the node's GPUs are stressed after the
// check (cli/node_diag.h) and a GPU that fails is a finding like the others.
// Decisions are src/slurm's; this file runs the programs and tells what it
// did. docs/slurm.md is the operator's guide.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/node_check.h"
#include "cli/node_diag.h"
#include "cli/terminal.h"
#include "common/json_text.h"
#include "common/text.h"
#include "diag/diag_levels.h"
#include "host/command_runner.h"
#include "slurm/slurm_control.h"

namespace gpudoctor {
namespace {

// Slurm kills a health check program after 60 s; sinfo and scontrol answer in
// well under a second when slurmctld is up.
constexpr auto kSlurmProgramDeadline = std::chrono::seconds(15);

// The prolog exit status that fails the job's prolog: Slurm drains the node and requeues the job.
constexpr int kPrologFailed = 1;

struct SlurmOptions {
  CheckOptions check;
  std::string node;  // empty: $SLURMD_NODENAME, else the short host name
  bool drain = false;
  double max_drain_share = 0.1;
  std::string partition;
  bool prolog = false;
  std::string scontrol = "scontrol";
  std::string sinfo = "sinfo";
  int diag_level = 0;  // --diag-level; 0: no stress test
};

std::string DefaultNodeName() {
  if (const char* name = std::getenv("SLURMD_NODENAME"); name != nullptr && *name != '\0') return name;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return "";
  std::string name = host;
  return name.substr(0, name.find('.'));
}

// What a Slurm program printed, or why it could not be used (exit 69).
Result<std::string> RunSlurmProgram(CommandRunner& runner, const std::vector<std::string>& argv,
                                    const char* option) {
  const std::string& program = argv.front();
  CommandResult result = runner.Run(argv, kSlurmProgramDeadline);
  switch (result.status) {
    case CommandStatus::kNotInstalled:
      return Error{fmt::format("{}: not found (install Slurm's client commands, or name it with {} PATH)", program,
                               option)};
    case CommandStatus::kTimedOut:
      return Error{fmt::format("{} did not answer within {} s: is slurmctld reachable?", program,
                               kSlurmProgramDeadline.count())};
    case CommandStatus::kFailedToStart: return Error{result.message};
    case CommandStatus::kExited: break;
  }
  if (result.exit_code != 0) {
    std::string said = FitOneLine(result.errors.empty() ? result.output : result.errors, 200);
    return Error{fmt::format("{} exited with status {}{}{}", program, result.exit_code, said.empty() ? "" : ": ", said)};
  }
  return std::move(result.output);
}

// What was decided and done, for the report and the exit status.
struct SlurmOutcome {
  std::string node;
  NodeCheckResult check;
  SlurmPlan plan;
  bool dry_run = true;
  bool prolog = false;
  int diag_level = 0;
  std::optional<NodeDiagResult> diag;  // set when the GPUs were stressed
  std::string diag_skipped;            // why they were not, with --diag-level
};

nlohmann::json DiagToJson(const SlurmOutcome& outcome) {
  if (outcome.diag_level == 0) return nullptr;
  nlohmann::json notes = outcome.diag ? nlohmann::json(outcome.diag->notes) : nlohmann::json::array();
  if (!outcome.diag_skipped.empty()) notes.push_back(outcome.diag_skipped);
  return {{"level", outcome.diag_level},
          {"ran", outcome.diag && outcome.diag->ran},
          {"summary", outcome.diag && outcome.diag->ran ? nlohmann::json(outcome.diag->line) : nlohmann::json(nullptr)},
          {"notes", notes}};
}

nlohmann::json BreakerToJson(const std::optional<SlurmBreaker>& breaker) {
  if (!breaker) return nullptr;
  return {{"partition", breaker->partition},
          {"nodes", breaker->nodes},
          {"drained_by_gpudoctor", breaker->drained_by_gpudoctor},
          {"max_share", breaker->max_share},
          {"allowed", breaker->allowed}};
}

nlohmann::json OutcomeToJson(const SlurmOutcome& outcome) {
  const bool critical = outcome.check.worst == Severity::kCritical;
  return {{"node", outcome.node},
          {"healthy", !critical},
          {"worst_severity", SeverityName(outcome.check.worst)},
          {"findings", NodeProblemsToJson(outcome.check.problems)},
          {"action", SlurmActionName(outcome.plan.action, outcome.dry_run)},
          {"reason", outcome.plan.reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(outcome.plan.reason)},
          {"message", outcome.plan.explanation},
          {"breaker", BreakerToJson(outcome.plan.breaker)},
          {"dry_run", outcome.dry_run},
          {"prolog", outcome.prolog},
          {"diag", DiagToJson(outcome)}};
}

// The line that says what gpudoctor did or would do.
std::string ActionLine(const SlurmOutcome& outcome) {
  const SlurmPlan& plan = outcome.plan;
  const std::string& node = outcome.node;
  switch (plan.action) {
    case SlurmAction::kDrain:
      return outcome.dry_run ? fmt::format("would drain {}: {}\n  ({}; a dry run: --drain drains it)", node,
                                           plan.reason, plan.explanation)
                             : fmt::format("drained {}: {}\n  ({})", node, plan.reason, plan.explanation);
    case SlurmAction::kResume:
      return fmt::format("{} {}: {}{}", outcome.dry_run ? "would resume" : "resumed", node, plan.explanation,
                         outcome.dry_run ? " (a dry run: --drain resumes it)" : "");
    case SlurmAction::kHeldByBreaker:
      return fmt::format("{}\n  (the reason would have been: {})", plan.explanation, plan.reason);
    case SlurmAction::kNone: break;
  }
  return plan.explanation;
}

void PrintOutcome(std::FILE* out, const Style& style, const SlurmOutcome& outcome) {
  std::fprintf(out, "%s  %s: %s\n", style.Bold("gpudoctor slurm").c_str(), outcome.node.c_str(),
               style.Severity(outcome.check.worst).c_str());
  for (const Finding& f : outcome.check.problems) {
    std::string gpu = f.gpu && f.gpu->index ? fmt::format(" gpu {}", *f.gpu->index) : "";
    std::fprintf(out, "  %-*s %s%s: %s\n", style.color() ? 19 : 8, style.Severity(f.severity).c_str(), f.id.c_str(),
                 gpu.c_str(), SummaryAfterGpu(f).c_str());
  }
  if (outcome.diag && outcome.diag->ran)
    std::fprintf(out, "  diag --level %d: %s\n", outcome.diag_level, outcome.diag->line.c_str());
  for (const std::string& note : outcome.diag ? outcome.diag->notes : std::vector<std::string>{})
    std::fprintf(out, "  diag note: %s\n", note.c_str());
  if (!outcome.diag_skipped.empty()) std::fprintf(out, "  diag note: %s\n", outcome.diag_skipped.c_str());
  std::fprintf(out, "%s\n", ActionLine(outcome).c_str());
}

int ExitStatus(const SlurmOutcome& outcome) {
  const bool critical = outcome.check.worst == Severity::kCritical;
  if (!critical) return 0;
  if (!outcome.prolog) return 2;
  return outcome.plan.action == SlurmAction::kHeldByBreaker ? 0 : kPrologFailed;
}

// Runs the check, reads Slurm, decides and (with --drain) acts. Returns the
// exit status of a failure, or nullopt with `outcome` filled.
std::optional<int> Decide(const CommandContext& context, const SlurmOptions& options, SlurmOutcome& outcome) {
  outcome.node = options.node.empty() ? DefaultNodeName() : options.node;
  outcome.dry_run = !options.drain;
  outcome.prolog = options.prolog;
  if (outcome.node.empty()) {
    std::fprintf(stderr, "gpudoctor slurm: no node name: give --node (slurmd sets SLURMD_NODENAME)\n");
    return exit_code::kUsage;
  }
  outcome.check = RunNodeCheck(context, options.check);
  if (outcome.check.error) {
    std::fprintf(stderr, "gpudoctor slurm: %s\n", outcome.check.error->message.c_str());
    return outcome.check.error->exit_code;
  }
  SubprocessRunner runner;
  outcome.diag_level = options.diag_level;
  if (options.diag_level != 0 && outcome.check.worst == Severity::kCritical) {
    // The node goes out of service anyway; a stress test would only delay that.
    outcome.diag_skipped = "the GPUs were not stressed: the node check already found a critical problem";
  } else if (options.diag_level != 0) {
    outcome.diag = RunNodeDiag(context, options.diag_level, outcome.check.config, runner);
    AddNodeProblems(outcome.check, outcome.diag->findings);
  }
  const bool critical = outcome.check.worst == Severity::kCritical;
  // A prolog runs before a job on a node Slurm gave it: there is nothing to resume.
  if (options.prolog && !critical) {
    outcome.plan.explanation = outcome.node + " has no critical finding; the job may start";
    return std::nullopt;
  }

  auto sinfo_output = RunSlurmProgram(runner, SinfoCommand(options.sinfo), "--sinfo");
  auto rows = sinfo_output ? ParseSinfoNodes(*sinfo_output) : Result<std::vector<SlurmNodeRow>>(sinfo_output.error());
  if (!rows) {
    std::fprintf(stderr, "gpudoctor slurm: cannot read the node states: %s\n", rows.error().message.c_str());
    return exit_code::kUnavailable;
  }
  const std::vector<std::string> partitions = SlurmPartitionsOf(*rows, outcome.node);
  if (!partitions.empty() && !options.partition.empty() &&
      std::find(partitions.begin(), partitions.end(), options.partition) == partitions.end()) {
    std::fprintf(stderr, "gpudoctor slurm: --partition: node %s is not in partition %s\n", outcome.node.c_str(),
                 options.partition.c_str());
    return exit_code::kUsage;
  }

  SlurmPlanInput input{.node = outcome.node,
                       .partition = options.partition,
                       .max_drain_share = options.max_drain_share,
                       .critical = critical};
  if (critical) {
    std::vector<const Finding*> headline = HeadlineProblems(outcome.check, Severity::kCritical);
    const Finding& first = headline.empty() ? outcome.check.problems.front() : *headline.front();
    std::optional<uint32_t> gpu = first.gpu ? first.gpu->index : std::nullopt;
    input.drain_reason =
        FormatDrainReason(first.id, gpu, SummaryAfterGpu(first), static_cast<int>(headline.size()) - 1);
  }
  auto plan = PlanSlurmAction(*rows, input);
  if (!plan) {
    std::fprintf(stderr, "gpudoctor slurm: %s\n", plan.error().message.c_str());
    return exit_code::kUnavailable;
  }
  outcome.plan = std::move(*plan);

  if (options.drain && (outcome.plan.action == SlurmAction::kDrain || outcome.plan.action == SlurmAction::kResume)) {
    const auto argv = outcome.plan.action == SlurmAction::kDrain
                          ? DrainCommand(options.scontrol, outcome.node, outcome.plan.reason)
                          : ResumeCommand(options.scontrol, outcome.node);
    auto done = RunSlurmProgram(runner, argv, "--scontrol");
    if (!done) {
      std::fprintf(stderr, "gpudoctor slurm: could not %s %s: %s\n",
                   outcome.plan.action == SlurmAction::kDrain ? "drain" : "resume", outcome.node.c_str(),
                   done.error().message.c_str());
      return exit_code::kUnavailable;
    }
  }
  return std::nullopt;
}

}  // namespace

void RegisterSlurmCommand(CLI::App& app, CommandContext& context) {
  auto* command = app.add_subcommand(
      "slurm", "Slurm health check and prolog: drain a node with a critical finding, resume it once healthy");
  auto options = std::make_shared<SlurmOptions>();
  AddNodeCheckOptions(command, options->check);
  command->add_option("--node", options->node,
                      "The node's name in Slurm (default: $SLURMD_NODENAME, else the short host name)")
      ->check(CLI::Validator(
          [](std::string& name) { return name.empty() ? std::string("an empty node name") : std::string(); },
          "NAME"));
  command->add_flag("--drain", options->drain,
                    "Act: drain on a critical finding, resume a node gpudoctor drained. Without it, a dry run");
  command->add_option("--max-drain-share", options->max_drain_share,
                      "Circuit breaker: never make more than this share of a partition's nodes drained by gpudoctor "
                      "(0 never drains, 1 turns the breaker off)")
      ->check(CLI::Validator(
          [](std::string& text) {
            // CLI::Range lets NaN through: no comparison with NaN is false.
            std::optional<double> share = ParseDouble(text);
            return share && *share >= 0 && *share <= 1 ? std::string()
                                                       : "not a share from 0 to 1: " + text;
          },
          "SHARE in [0 - 1]"))
      ->capture_default_str();
  command->add_option("--partition", options->partition,
                      "Weigh the circuit breaker in this partition only (default: every partition of the node)");
  command->add_flag("--prolog", options->prolog,
                    "Prolog mode: exit 1 on a critical finding so Slurm drains the node and requeues the job "
                    "(exit 0 while the circuit breaker holds)");
  command->add_option("--diag-level", options->diag_level,
                      "After the check, stress the node's GPUs with `gpudoctor diag --level N` (1: about 20 s, 2: "
                      "minutes, 3: an hour); a GPU faulty or hung in it is a finding, diagnostic_failed")
      ->check(CLI::Range(1, kDiagLevelCount));
  command->add_option("--scontrol", options->scontrol, "scontrol to run")->capture_default_str();
  command->add_option("--sinfo", options->sinfo, "sinfo to run")->capture_default_str();
  command->footer(
      "Runs every health rule once (like `check`, with log events of the last --since only, 10m by default),\n"
      "reads the node's partitions with sinfo and decides:\n"
      "  a critical finding   drain the node: scontrol update nodename=NODE state=drain\n"
      "                       reason=\"gpudoctor: <rule> gpu N: <summary>\"\n"
      "  healthy again        resume it (state=resume), only when gpudoctor drained it: a node drained\n"
      "                       for another reason is never resumed, and never has its reason replaced\n"
      "Without --drain it only says what it would do (\"would drain node1: ...\").\n"
      "Circuit breaker: it drains only while (nodes gpudoctor drained + 1) / nodes <= --max-drain-share\n"
      "in every partition of the node, so a bad rule or config cannot empty a cluster; it says so when it holds.\n"
      "--diag-level N stresses the GPUs after the check (`gpudoctor diag --level N`, ended at the level's\n"
      "deadline): a GPU faulty in memtest or burn, or hung, is critical (diagnostic_failed); a pcie fault is a\n"
      "warning; a GPU that could not be tested (busy with a job's processes) is a note, not a fault.\n"
      "\n"
      "Examples:\n"
      "  gpudoctor slurm                                       dry run: what would happen to this node\n"
      "  gpudoctor slurm --drain                               slurm.conf HealthCheckProgram (a wrapper script)\n"
      "  gpudoctor slurm --prolog --drain                      slurm.conf Prolog\n"
      "  gpudoctor slurm --prolog --drain --diag-level 1       Prolog that also proves the GPUs work (~20 s)\n"
      "  gpudoctor slurm --simulate examples/gpu-fallen-off-bus.toml --node node1   rehearse a fault\n"
      "\n"
      "Exit status: 0 no critical finding (resumed or not), 2 a critical finding (drained, would drain, held\n"
      "by the breaker, or already drained); with --prolog: 1 on a critical finding (Slurm drains the node and\n"
      "requeues the job), 0 while the breaker holds; 64 bad command line, 65/66 a --config or --simulate file\n"
      "that cannot be used, 69 sinfo or scontrol missing, failing or not knowing the node.\n"
      "JSON (--json): node, healthy, worst_severity, findings [{id, severity, gpu, summary}], action\n"
      "(none, drain, would_drain, held_by_breaker, resume, would_resume), reason, message, breaker\n"
      "{partition, nodes, drained_by_gpudoctor, max_share, allowed}, dry_run, prolog, diag {level, ran, summary,\n"
      "notes} or null. See docs/slurm.md.");
  command->callback([&context, options] {
    SlurmOutcome outcome;
    if (std::optional<int> failed = Decide(context, *options, outcome)) {
      context.exit_code = *failed;
      return;
    }
    if (context.options.json) {
      std::printf("%s\n", ToJsonText(OutcomeToJson(outcome), 2).c_str());
    } else {
      PrintOutcome(stdout, Style(context.options.color, stdout), outcome);
    }
    if (outcome.prolog && outcome.plan.action == SlurmAction::kHeldByBreaker)
      std::fprintf(stderr, "gpudoctor slurm: %s; the job may start\n", outcome.plan.explanation.c_str());
    context.exit_code = ExitStatus(outcome);
  });
}

}  // namespace gpudoctor
