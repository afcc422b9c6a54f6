// The one configuration file every command reads.
//
// Which file: `--config FILE`, else $GPUDOCTOR_CONFIG, else
// /etc/gpudoctor/config.toml when it exists. A missing default file is not
// an error (every setting keeps its default); a file named by the option or
// the variable must be readable, and a default file that exists must be valid.
// `GPUDOCTOR_CONFIG=/dev/null` runs with every default whatever /etc holds.
//
//   ConfigChoice choice = ChooseConfig(options.config_path, std::getenv("GPUDOCTOR_CONFIG"), kDefaultConfigPath);
//   choice.path;   // "" when none: every default
//   choice.label;  // how messages name it: "--config", "GPUDOCTOR_CONFIG" or "config"
//
// One file feeds every part: the rules ([rules.*], [host], [checklist],
// [maintenance], [correlations], [escalation]), the trend detectors
// ([detectors]), the agent's alerts ([alerts]) and its diag schedule ([diag]).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/agent_loop.h"
#include "common/result.h"

namespace gpudoctor {

inline constexpr std::string_view kDefaultConfigPath = "/etc/gpudoctor/config.toml";

struct ConfigChoice {
  std::string path;   // empty: no file, every default
  std::string label;  // names the file in messages
  std::string how;    // why this file: "named by --config", "named by GPUDOCTOR_CONFIG", "the default location"
};

// `option_path`: --config as given ("" when absent). `env`: $GPUDOCTOR_CONFIG
// (null or "" when unset). The default path is taken only when it exists.
ConfigChoice ChooseConfig(const std::string& option_path, const char* env, std::string_view default_path);

// Reads `path` once for every part that the file configures, so that no part
// sees another version of the file. Empty `path`: every default. Errors name
// the file, and the line where the file says where.
Result<AgentConfig> LoadFullConfig(const std::string& path);

// One value the file sets, for `config show`: its dotted key
// ("rules.temperature_high.warning_c"), its value as TOML with secrets masked
// (src/redact), the line it is on, and the compiled-in default where the
// defaults have the same key.
struct ConfigSetting {
  std::string key;
  std::string value;
  int line = 0;
  std::optional<std::string> default_value;
};

// Every value `toml_text` sets, in file order; arrays are one value each.
// Fails when the text does not parse (the message names the line).
Result<std::vector<ConfigSetting>> ConfigSettings(std::string_view toml_text, std::string_view origin);

}  // namespace gpudoctor
