// `gpudoctor history`: reads the agent's history file (src/cli/cmd_history.cc).
// Declared here until src/cli/commands.h lists it beside the other commands.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/commands.h"

namespace gpudoctor {

void RegisterHistoryCommand(CLI::App& app, CommandContext& context);

}  // namespace gpudoctor
