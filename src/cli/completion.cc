#include "cli/completion.h"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace gpudoctor {
namespace {

struct Word {
  std::string name;         // "status", "--json", "-n"
  std::string description;  // its first line
};

// One command path ("", "diag", "diag memtest") and what may follow it.
struct CommandNode {
  std::string path;
  std::vector<Word> commands;
  std::vector<Word> options;  // its own and its parents', the global ones included
};

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// Visible options of `app`: hidden ones (no group) and positionals are left out.
void AddOptions(const CLI::App& app, std::vector<Word>& options, std::set<std::string>& takes_value) {
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_group().empty()) continue;
    std::vector<std::string> names;
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    for (const std::string& name : option->get_snames()) names.push_back("-" + name);
    for (const std::string& name : names) {
      const auto same = [&name](const Word& word) { return word.name == name; };
      const bool seen = std::any_of(options.begin(), options.end(), same);
      if (!seen) options.push_back({name, FirstLine(option->get_description())});
      if (option->get_items_expected_max() != 0) takes_value.insert(name);  // a flag expects none
    }
  }
}

void Walk(const CLI::App& app, const std::string& path, std::vector<Word> inherited, std::vector<CommandNode>& nodes,
          std::set<std::string>& takes_value) {
  CommandNode node{.path = path, .commands = {}, .options = std::move(inherited)};
  AddOptions(app, node.options, takes_value);
  std::vector<const CLI::App*> children;
  const auto visible = [](const CLI::App* command) { return !command->get_group().empty(); };
  for (const CLI::App* child : app.get_subcommands(visible)) {
    node.commands.push_back({child->get_name(), FirstLine(child->get_description())});
    children.push_back(child);
  }
  const std::vector<Word> options = node.options;
  nodes.push_back(std::move(node));
  for (const CLI::App* child : children)
    Walk(*child, path.empty() ? child->get_name() : path + " " + child->get_name(), options, nodes, takes_value);
}

// A single-quoted shell word.
std::string Quote(std::string_view text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string Names(const std::vector<Word>& words) {
  std::vector<std::string> names;
  for (const Word& word : words) names.push_back(word.name);
  return fmt::format("{}", fmt::join(names, " "));
}

// zsh's _describe entries: "name:description", a colon in the name escaped.
std::string Described(const std::vector<Word>& words, std::string_view indent) {
  std::string text;
  for (const Word& word : words) {
    std::string name;
    for (char c : word.name) name += c == ':' ? std::string("\\:") : std::string(1, c);
    text += fmt::format("\n{}{}", indent, Quote(name + ":" + word.description));
  }
  return text;
}

// The case patterns that name every command path but the root: 'status'|'diag memtest'|...
std::string PathPatterns(const std::vector<CommandNode>& nodes) {
  std::vector<std::string> patterns;
  for (const CommandNode& node : nodes)
    if (!node.path.empty()) patterns.push_back(Quote(node.path));
  return fmt::format("{}", fmt::join(patterns, "|"));
}

std::string ValuePatterns(const std::set<std::string>& takes_value) {
  return fmt::format("{}", fmt::join(takes_value, "|"));
}

// The loop both shells share: the command path typed so far, skipping options and the values they take.
// `words` and `first`/`last` are each shell's names for the words before the cursor.
std::string PathLoop(const std::vector<CommandNode>& nodes, const std::set<std::string>& takes_value,
                     std::string_view words, std::string_view first, std::string_view last) {
  return fmt::format(R"(  local command_path= word skip=0 i
  for ((i = {first}; i < {last}; i++)); do
    word=${{{words}[i]}}
    if ((skip)); then skip=0; continue; fi
    case $word in
      --) return 0 ;;  # the rest is a program's command line (trace-alloc)
      -*=*) ;;
      {values}) skip=1 ;;
      -*) ;;
      *)
        case "${{command_path:+$command_path }}$word" in
          {paths}) command_path="${{command_path:+$command_path }}$word" ;;
        esac
        ;;
    esac
  done
)",
                     fmt::arg("first", first), fmt::arg("last", last), fmt::arg("words", words),
                     fmt::arg("values", ValuePatterns(takes_value)), fmt::arg("paths", PathPatterns(nodes)));
}

std::string BashScript(const std::vector<CommandNode>& nodes, const std::set<std::string>& takes_value) {
  std::string cases;
  for (const CommandNode& node : nodes) {
    cases += fmt::format("    {})\n      commands={}\n      options={}\n      ;;\n", Quote(node.path),
                         Quote(Names(node.commands)), Quote(Names(node.options)));
  }
  return fmt::format(R"(# bash completion for gpudoctor: its commands and options.
# Generated by `gpudoctor __completion bash` from the command line gpudoctor parses; do not edit.

_gpudoctor() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD - 1]}} commands= options=
{loop}  case $prev in
    {values}) return 0 ;;  # an option's value: file names
  esac
  case $command_path in
{cases}  esac
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$options" -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
  fi
}}
complete -o default -F _gpudoctor gpudoctor
)",
                     fmt::arg("loop", PathLoop(nodes, takes_value, "COMP_WORDS", "1", "COMP_CWORD")),
                     fmt::arg("values", ValuePatterns(takes_value)), fmt::arg("cases", cases));
}

std::string ZshScript(const std::vector<CommandNode>& nodes, const std::set<std::string>& takes_value) {
  std::string cases;
  for (const CommandNode& node : nodes) {
    cases += fmt::format("    {})\n      commands=({})\n      options=({})\n      ;;\n", Quote(node.path),
                         Described(node.commands, "        "), Described(node.options, "        "));
  }
  return fmt::format(R"(#compdef gpudoctor
# zsh completion for gpudoctor: its commands and options, with what each does.
# Generated by `gpudoctor __completion zsh` from the command line gpudoctor parses; do not edit.

_gpudoctor() {{
  local -a commands options
{loop}  case ${{words[CURRENT - 1]}} in
    {values}) _files; return ;;  # an option's value
  esac
  case $command_path in
{cases}  esac
  if [[ $PREFIX == -* ]]; then
    _describe -t options option options
  elif (( ${{#commands}} )); then
    _describe -t commands command commands
  else
    _files
  fi
}}

_gpudoctor "$@"
)",
                     fmt::arg("loop", PathLoop(nodes, takes_value, "words", "2", "CURRENT")),
                     fmt::arg("values", ValuePatterns(takes_value)), fmt::arg("cases", cases));
}

}  // namespace

std::optional<CompletionShell> ParseCompletionShell(std::string_view name) {
  if (name == "bash") return CompletionShell::kBash;
  if (name == "zsh") return CompletionShell::kZsh;
  return std::nullopt;
}

std::string CompletionScript(const CLI::App& app, CompletionShell shell) {
  std::vector<CommandNode> nodes;
  std::set<std::string> takes_value;
  Walk(app, "", {}, nodes, takes_value);
  return shell == CompletionShell::kBash ? BashScript(nodes, takes_value) : ZshScript(nodes, takes_value);
}

}  // namespace gpudoctor
