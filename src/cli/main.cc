// gpudoctor: finds GPU server problems early, explains them, and says what to do.
//
// main() builds the command line from one Register function per command and
// runs the hidden `__probe` command that the hang-proof collector re-executes.

#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/completion.h"
#include "cli/config_file.h"
#include "cli/sources.h"
#include "cli/terminal_guard.h"
#include "cli/usage_error.h"
#include "cli/version.h"
#include "common/input_file.h"
#include "common/json_text.h"
#include "common/text.h"
#include "nvml/probe.h"


namespace gpudoctor {
namespace {

// `gpudoctor [OPTIONS] --version [--json]`: true when --version comes before any command, with `json` set when
// --json does too. CLI11 prints a version flag's text as soon as it meets it, before --json is parsed.
bool AskedForVersion(int argc, char** argv, bool& json) {
  bool version = false;
  json = false;
  for (int i = 1; i < argc && argv[i][0] == '-'; ++i) {
    const std::string_view argument = argv[i];
    if (argument == "--") break;
    version = version || argument == "--version";
    json = json || argument == "--json";
  }
  return version;
}

std::string SelfPath() {
  char buffer[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return "/proc/self/exe";
  return std::string(buffer, static_cast<size_t>(n));
}

}  // namespace
}  // namespace gpudoctor

// A command's --help lists the options every command takes too (--simulate,
// --json, --config, ...), which may come before or after the command's name.
static void ShowCommonOptions(CLI::App& app) {
  std::string text = "\nOptions of every command (before or after its name):\n";
  for (const CLI::Option* option : app.get_options()) {
    const std::string name = option->get_name(false, true);
    if (name == "--help" || name == "-h,--help" || name == "--version") continue;
    std::string type = option->get_type_name();
    type = type.substr(0, type.find(':'));  // "FLOAT", not "FLOAT:FLOAT in [0.1 - 3600]"
    std::string shown = name + (option->get_type_size() != 0 ? " " + type : "");
    text += fmt::format("  {:<27} {}\n", shown, option->get_description());
  }
  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; }))
    command->footer(command->get_footer() + "\n" + text);
}

int main(int argc, char** argv) {
  using namespace gpudoctor;
  if (argc >= 2 && std::string_view(argv[1]) == "__probe") return RunProbeCommandLine(argc, argv);
  if (argc >= 2 && std::string_view(argv[1]) == "__diag-worker") return RunDiagWorkerCommandLine(argc, argv);
  // Everything printed from here on is made safe for a terminal (cli/terminal_guard.h).
  GuardTerminalOutput();
  if (bool json = false; AskedForVersion(argc, argv, json)) {
    const VersionDescription description = DescribeThisBuild();
    std::fputs(json ? (ToJsonText(VersionJson(description), 2) + "\n").c_str() : VersionText(description).c_str(),
               stdout);
    return exit_code::kOk;
  }

  CommandContext context;
  context.executable_path = SelfPath();
  GlobalOptions& options = context.options;

  CLI::App app{
      "gpudoctor finds GPU server problems early, explains them, and says what to do.\n"
      "It reads every GPU through NVML without ever hanging, reads the kernel log for Xids and\n"
      "other GPU events, and turns what it sees into findings with evidence, cause and next steps.",
      "gpudoctor"};
  app.set_version_flag("--version", [] { return VersionText(DescribeThisBuild()); },
                       "What runs: version, commit, build, diag kernels, modules found (with --json: as JSON)");
  app.require_subcommand(1);
  app.fallthrough();
  app.footer(
      "Examples:\n"
      "  gpudoctor check                                    the weekly health checklist (exit 0/1/2/3)\n"
      "  gpudoctor triage                                   emergency flow with a verdict and next steps\n"
      "  gpudoctor status                                   table of every GPU with its health\n"
      "  gpudoctor status --simulate examples/nvml-hang.toml  the same on a simulated faulty server\n"
      "  gpudoctor logs /var/log/kern.log                   GPU events in a captured kernel log\n"
      "  gpudoctor explain xid 79                           what an Xid means and what to do\n"
      "  gpudoctor ack 17 --note \"reseated GPU 3\"           acknowledge a finding you have dealt with\n"
      "  gpudoctor maintenance done dust_cleaning           record upkeep; `check` reports what is overdue\n"
      "  gpudoctor trace-alloc -- python train.py           which call sites leak GPU memory in a program\n"
      "\nExit codes: see docs/exit-codes.md (0 ok, 64 usage, 65 bad input, 66 no input, 69 no driver).\n");

  app.add_option("--nvml-lib", options.nvml_library,
                 "NVML library to load instead of libnvidia-ml.so.1")
      ->envname("GPUDOCTOR_NVML_LIB");
  app.add_option("--simulate", options.simulate,
                 "Run against the fake NVML library driven by this scenario file (see docs/scenarios.md)");
  app.add_option("--probe-timeout", options.probe_deadline_s,
                 "How long an NVML probe may take before it is reported as hung: seconds, or 500ms, 2s, 1m")
      ->transform([](std::string value) {
        // A duration ("2s") becomes seconds; a plain number is seconds already.
        if (std::optional<Duration> duration = ParseDuration(value); duration && !ParseDouble(value))
          return fmt::format("{}", std::chrono::duration<double>(*duration).count());
        return value;
      })
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  app.add_flag("--json", options.json, "Print machine-readable JSON");
  app.add_option("--color", options.color, "Colour output: auto, always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  app.add_option("--config", options.config_path,
                 "Configuration file (TOML, at most " + FormatSizeLimit(kMaxConfigFileBytes) + "); default: " +
                     std::string(kDefaultConfigPath) + " when it exists, or $GPUDOCTOR_CONFIG");
  // Every command holds its config file to the input rule, those that read
  // no config too, so a wrong path is never passed over in silence.
  app.parse_complete_callback([&options, &app] {
    const ConfigChoice choice = ChooseConfig(options.config_path, std::getenv("GPUDOCTOR_CONFIG"), kDefaultConfigPath);
    options.config_path = choice.path;
    options.config_label = choice.label;
    options.config_how = choice.how;
    if (options.config_path.empty()) return;
    // `config check FILE` judges its own file, whatever the others say.
    if (app.got_subcommand("config")) return;
    // node-problem-detector shows npd's one line as the condition: npd says
    // itself, on that line, why it cannot check (Unknown, exit 2).
    if (app.got_subcommand("npd")) return;
    InputText config = ReadOptionInput(options.config_label, options.config_path, kMaxConfigFileBytes);
    if (config.error) throw CLI::RuntimeError(config.error->message, config.error->exit_code);
  });

  RegisterStatusCommand(app, context);
  RegisterLogsCommand(app, context);
  RegisterExplainCommand(app, context);
  RegisterHistoryCommand(app, context);
  RegisterAckCommand(app, context);
  RegisterMaintenanceCommand(app, context);
  RegisterDiagCommand(app, context);
  RegisterAgentCommand(app, context);
  RegisterCheckCommand(app, context);
  RegisterTriageCommand(app, context);
  RegisterReportCommand(app, context);
  RegisterSlurmCommand(app, context);
  RegisterNpdCommand(app, context);
  RegisterFleetCommand(app, context);
  RegisterConfigCommand(app, context);
  RegisterTraceAllocCommand(app, context);
  ShowCommonOptions(app);
  // The build runs `gpudoctor __completion bash|zsh` to make the completion it installs (cli/completion.h).
  if (argc == 3 && std::string_view(argv[1]) == "__completion") {
    std::optional<CompletionShell> shell = ParseCompletionShell(argv[2]);
    if (!shell) {
      std::fprintf(stderr, "gpudoctor: __completion takes bash or zsh\n");
      return exit_code::kUsage;
    }
    std::fputs(CompletionScript(app, *shell).c_str(), stdout);
    return exit_code::kOk;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {  // an input the command line names cannot be used
    std::fprintf(stderr, "gpudoctor: %s\n", e.what());
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    if (auto message = DescribeUsageError(app, e)) {  // an unknown command or option: the nearest valid ones
      std::fprintf(stderr, "%s\n", message->c_str());
      return exit_code::kUsage;
    }
    int code = app.exit(e);
    return code == 0 ? exit_code::kOk : exit_code::kUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpudoctor: internal error: %s\n", e.what());
    return exit_code::kInternal;
  }
  return context.exit_code;
}
