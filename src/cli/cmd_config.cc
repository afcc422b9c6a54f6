// `gpudoctor config`: which configuration file the commands read, and what it
// sets (`config show`), and whether a file would be accepted, checked as
// every command and the agent read it, without running anything (`config
// check FILE`).

#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/config_file.h"
#include "cli/sources.h"
#include "common/json_text.h"
#include "common/text.h"
#include "health/health_config.h"

namespace gpudoctor {
namespace {

struct ConfigOptions {
  std::string file;  // config check FILE
};

// Reads and checks `path` under the input rule, as every command would.
// Returns the exit status and fills `settings` when it is valid.
int CheckFile(const std::string& label, const std::string& path, std::vector<ConfigSetting>& settings,
              std::string& message) {
  InputText input = ReadOptionInput(label, path, kMaxConfigFileBytes);
  if (input.error) {
    message = input.error->message;
    return input.error->exit_code;
  }
  if (auto loaded = LoadFullConfig(path); !loaded) {
    message = loaded.error().message;
    return exit_code::kDataError;
  }
  auto parsed = ConfigSettings(input.text, path);
  if (!parsed) {
    message = parsed.error().message;
    return exit_code::kDataError;
  }
  settings = std::move(*parsed);
  return exit_code::kOk;
}

nlohmann::json SettingsToJson(const std::vector<ConfigSetting>& settings) {
  nlohmann::json json = nlohmann::json::array();
  for (const ConfigSetting& s : settings) {
    json.push_back({{"key", s.key},
                    {"value", s.value},
                    {"line", s.line},
                    {"default", s.default_value ? nlohmann::json(*s.default_value) : nlohmann::json(nullptr)}});
  }
  return json;
}

void PrintSettings(const std::string& path, const std::vector<ConfigSetting>& settings) {
  if (settings.empty()) {
    std::printf("It sets nothing: every setting is at its default.\n");
    return;
  }
  size_t width = 0;
  for (const ConfigSetting& s : settings) width = std::max(width, s.key.size() + 3 + s.value.size());
  width = std::min<size_t>(width, 72);
  std::printf("Set in it (everything else is at its default):\n");
  for (const ConfigSetting& s : settings) {
    const std::string assignment = s.key + " = " + s.value;
    std::string origin = fmt::format("{}:{}", path, s.line);
    if (s.default_value && *s.default_value != s.value) origin += ", default " + *s.default_value;
    std::printf("  %-*s  (%s)\n", static_cast<int>(width), assignment.c_str(), origin.c_str());
  }
}

int RunShow(const CommandContext& context) {
  const GlobalOptions& options = context.options;
  const bool json = options.json;
  auto text_or_null = [](const std::string& text) {
    return text.empty() ? nlohmann::json(nullptr) : nlohmann::json(text);
  };
  nlohmann::json out = {{"file", text_or_null(options.config_path)},
                        {"how", text_or_null(options.config_how)},
                        {"default_path", std::string(kDefaultConfigPath)}};
  if (options.config_path.empty()) {
    if (json) {
      out["settings"] = nlohmann::json::array();
      out["valid"] = true;
      std::printf("%s\n", ToJsonText(out, 2).c_str());
    } else {
      std::printf("No configuration file: %s does not exist, and neither --config nor GPUDOCTOR_CONFIG names one.\n"
                  "Every setting is at its default (`gpudoctor explain RULE` shows a rule's).\n",
                  std::string(kDefaultConfigPath).c_str());
    }
    return exit_code::kOk;
  }
  std::vector<ConfigSetting> settings;
  std::string message;
  const int status = CheckFile(options.config_label, options.config_path, settings, message);
  if (json) {
    out["valid"] = status == exit_code::kOk;
    out["settings"] = SettingsToJson(settings);
    if (status != exit_code::kOk) out["error"] = message;
    std::printf("%s\n", ToJsonText(out, 2).c_str());
  } else {
    std::printf("Configuration file: %s (%s)\n", options.config_path.c_str(), options.config_how.c_str());
    if (status != exit_code::kOk) {
      std::fprintf(stderr, "gpudoctor config show: %s\n", message.c_str());
      return status;
    }
    PrintSettings(options.config_path, settings);
  }
  return status;
}

int RunCheck(const CommandContext& context, const std::string& file) {
  std::vector<ConfigSetting> settings;
  std::string message;
  const int status = CheckFile(file, file, settings, message);
  if (context.options.json) {
    nlohmann::json out = {{"file", file}, {"valid", status == exit_code::kOk}, {"settings", SettingsToJson(settings)}};
    if (status != exit_code::kOk) out["error"] = message;
    std::printf("%s\n", ToJsonText(out, 2).c_str());
  } else if (status == exit_code::kOk) {
    std::printf("%s: valid (%zu %s set, every other at its default)\n", file.c_str(), settings.size(),
                settings.size() == 1 ? "setting" : "settings");
  } else {
    std::fprintf(stderr, "gpudoctor config check: %s\n", message.c_str());
  }
  return status;
}

}  // namespace

void RegisterConfigCommand(CLI::App& app, CommandContext& context) {
  auto options = std::make_shared<ConfigOptions>();
  CLI::App* command =
      app.add_subcommand("config", "Which configuration file the commands read, what it sets, and checking one");
  command->require_subcommand(1);
  command->footer(
      "Every command reads one configuration file: --config FILE, else $GPUDOCTOR_CONFIG, else\n"
      "/etc/gpudoctor/config.toml when it exists (a missing default file is not an error: every setting\n"
      "keeps its default). The same file holds the rules' thresholds ([rules.ID], [host], [checklist],\n"
      "[maintenance], [correlations], [escalation]), the trend detectors ([detectors]) and the agent's\n"
      "alerts ([alerts]) and diag schedule ([diag]); docs/findings.md and docs/agent.md list the keys.\n"
      "Examples:\n"
      "  gpudoctor config show                      the file in use and each value it sets, with its line\n"
      "  gpudoctor config check site.toml           would every command accept it? (before deploying it)\n"
      "  GPUDOCTOR_CONFIG=/dev/null gpudoctor check  every default, whatever /etc holds\n"
      "Exit status: 0 valid, 65 the file does not parse or a value is wrong (the message names the line),\n"
      "66 the file cannot be opened.");

  CLI::App* show = command->add_subcommand("show", "The configuration file in use and each value it sets");
  show->callback([&context] { context.exit_code = RunShow(context); });

  CLI::App* check = command->add_subcommand("check", "Check a configuration file as every command reads it");
  check->add_option("file", options->file, "The file to check")->required();
  check->callback([options, &context] { context.exit_code = RunCheck(context, options->file); });
}

}  // namespace gpudoctor
