// Shell completion for gpudoctor, generated from the command line itself: every visible command and
// subcommand, its options, and the options every command takes. The build runs `gpudoctor __completion bash`
// and `... zsh` and installs what they print, so completion never lists a command that is gone.
//
//   std::fputs(CompletionScript(app, CompletionShell::kBash).c_str(), stdout);
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

namespace gpudoctor {

enum class CompletionShell { kBash, kZsh };

// "bash" or "zsh"; nullopt otherwise.
std::optional<CompletionShell> ParseCompletionShell(std::string_view name);

// The script for `shell`: bash's is sourced (bash-completion's completions/ folder), zsh's is an autoloaded
// `_gpudoctor` (a folder on $fpath). Option values and free arguments complete as file names.
std::string CompletionScript(const CLI::App& app, CompletionShell shell);

}  // namespace gpudoctor
