#include "cli/usage_error.h"

#include "common/suggest.h"

namespace gpudoctor {
namespace {

bool IsOptionLike(const std::string& argument) { return argument.size() > 1 && argument[0] == '-'; }

// "gpudoctor diag": how the messages and the help hints name a command.
std::string CommandPath(const CLI::App& command) {
  const CLI::App* parent = command.get_parent();
  return parent == nullptr ? command.get_name() : CommandPath(*parent) + " " + command.get_name();
}

// The command the user reached: the last one chosen at each level.
const CLI::App& DeepestChosen(const CLI::App& app) {
  const CLI::App* command = &app;
  while (!command->get_subcommands().empty()) command = command->get_subcommands().back();
  return *command;
}

// The commands `command` offers by name (hidden ones and option groups left out).
std::vector<std::string> SubcommandNames(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::App* sub : command.get_subcommands([](const CLI::App* s) {
         return !s->get_name().empty() && !s->get_group().empty() && !s->get_disabled();
       })) {
    names.push_back(sub->get_name());
  }
  return names;
}

// Every option name `command` accepts: its own and, as every command falls
// through to the one above it, those of the commands above.
std::vector<std::string> OptionNames(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::App* level = &command; level != nullptr; level = level->get_parent()) {
    for (const CLI::Option* option : level->get_options()) {
      for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
      for (const std::string& name : option->get_snames()) names.push_back("-" + name);
    }
  }
  return names;
}

std::string UnknownCommand(const CLI::App& command, const std::string& word) {
  const std::vector<std::string> commands = SubcommandNames(command);
  const std::vector<std::string> near = NearestNames(word, commands);
  std::string text = CommandPath(command) + ": unknown command '" + word + "'.";
  if (!near.empty()) return text + DidYouMean(near);
  return text + " The commands: " + QuotedList(commands) + " (" + CommandPath(command) + " --help describes them).";
}

}  // namespace

std::optional<std::string> DescribeUsageError(const CLI::App& app, const CLI::ParseError& error) {
  if (dynamic_cast<const CLI::ExtrasError*>(&error) == nullptr &&
      dynamic_cast<const CLI::RequiredError*>(&error) == nullptr) {
    return std::nullopt;
  }
  const CLI::App& command = DeepestChosen(app);
  const std::vector<std::string> left_over = app.remaining(/*recurse=*/true);

  std::optional<std::string> option, word;
  for (size_t i = 0; i < left_over.size(); ++i) {
    if (IsOptionLike(left_over[i])) {
      if (!option) option = left_over[i].substr(0, left_over[i].find('='));
    } else if (!word && (i == 0 || !IsOptionLike(left_over[i - 1]))) {
      word = left_over[i];  // a word after an unknown option is taken for its value
    }
  }

  const std::string path = CommandPath(command);
  std::vector<std::string> near_options;
  if (option) near_options = NearestNames(*option, OptionNames(command), {.ignore_leading = "-"});
  if (!near_options.empty()) return path + ": unknown option '" + *option + "'." + DidYouMean(near_options);

  const bool offers_commands = !SubcommandNames(command).empty();
  const bool needs_command = command.get_require_subcommand_min() > 0;
  if (offers_commands && word) return UnknownCommand(command, *word);
  if (offers_commands && needs_command && dynamic_cast<const CLI::RequiredError*>(&error) != nullptr &&
      command.get_subcommands().empty()) {
    return path + ": a command is required: " + QuotedList(SubcommandNames(command)) + " (" + path +
           " --help describes them).";
  }
  if (option && command.get_prefix_command())  // trace-alloc: the program's own options follow --
    return path + ": unknown option '" + *option + "' (the program's own options go after --: " + path +
           " [OPTIONS] -- COMMAND [ITS OPTIONS]).";
  if (option) return path + ": unknown option '" + *option + "' (" + path + " --help lists the options).";
  return std::nullopt;
}

}  // namespace gpudoctor
