#include "logs/driver_classifier.h"

#include <algorithm>
#include <cctype>

#include "common/text.h"

namespace gpudoctor {

namespace {

bool IsIdentifierChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

std::string_view TrimLeft(std::string_view text) {
  while (!text.empty() && IsBlank(text.front())) text.remove_prefix(1);
  return text;
}

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Whether `text` contains `word` (lower case) in any case.
bool ContainsCaseless(std::string_view text, std::string_view word) {
  if (word.empty() || word.size() > text.size()) return word.empty();
  for (size_t i = 0; i + word.size() <= text.size(); ++i) {
    if (Lower(text[i]) != word[0]) continue;
    size_t k = 1;
    while (k < word.size() && Lower(text[i + k]) == word[k]) ++k;
    if (k == word.size()) return true;
  }
  return false;
}

// "0000:01:00.0: " at the start of `text`: the bus id of NV_DEV_PRINTF lines.
size_t PciPrefixLength(std::string_view text) {
  size_t i = 0;
  auto hex = [&](size_t count) {
    for (size_t k = 0; k < count; ++k, ++i) {
      if (i >= text.size() || !std::isxdigit(static_cast<unsigned char>(text[i]))) return false;
    }
    return true;
  };
  auto take = [&](char c) { return i < text.size() && text[i++] == c; };
  if (!hex(4) || !take(':') || !hex(2) || !take(':') || !hex(2) || !take('.') || !hex(1) || !take(':')) return 0;
  return i;
}

}  // namespace

std::optional<DriverLine> SplitDriverLine(std::string_view message, const std::vector<std::string_view>& modules) {
  DriverLine line;
  if (StartsWith(message, "NVRM:")) {
    line.module = message.substr(0, 4);
    std::string_view rest = message.substr(5);
    std::string_view after_tag = TrimLeft(rest);
    // An indented line continues a record: it names no GPU or function of its own.
    if (rest.size() - after_tag.size() >= 2) {
      line.text = after_tag;
      return line;
    }
    // "GPU6 " names the GPU instance; "GPU 0000:01:00.0: " its bus.
    if (StartsWith(after_tag, "GPU")) {
      size_t digits = 3;
      while (digits < after_tag.size() && IsDigit(after_tag[digits])) ++digits;
      if (digits > 3 && digits < after_tag.size() && after_tag[digits] == ' ') {
        line.gpu_instance = after_tag.substr(0, digits);
        after_tag = after_tag.substr(digits + 1);
      } else if (after_tag.size() > 4 && after_tag[3] == ' ') {
        if (size_t length = PciPrefixLength(after_tag.substr(4))) {
          line.pci = after_tag.substr(4, length - 1);
          after_tag = TrimLeft(after_tag.substr(4 + length));
        }
      }
    }
    size_t name = 0;
    while (name < after_tag.size() && IsIdentifierChar(after_tag[name])) ++name;
    if (name >= 2 && name < after_tag.size() && after_tag[name] == ':' &&
        (name + 1 == after_tag.size() || IsBlank(after_tag[name + 1])) && !IsDigit(after_tag[0])) {
      line.function = after_tag.substr(0, name);
      after_tag = TrimLeft(after_tag.substr(name + 1));
    }
    line.text = after_tag;
    return line;
  }
  if (message.find("nvidia-") == std::string_view::npos) return std::nullopt;
  // A module's tag opens the line ("nvidia-nvswitch3: ...", "nvidia-peermem func:1 ERROR ...") or
  // stands in brackets after the kernel's own prefix ("[drm:...] *ERROR* [nvidia-drm] ..."); the
  // name in any other place is text about the module, not the module's message.
  for (std::string_view module : modules) {
    size_t begin = 0, end = std::string_view::npos;
    if (StartsWith(message, module)) {
      end = module.size();
      while (end < message.size() && IsDigit(message[end])) ++end;
      if (end < message.size() && message[end] != ':' && !IsBlank(message[end])) continue;
    } else {
      for (size_t at = message.find(module); at != std::string_view::npos; at = message.find(module, at + 1)) {
        if (at > 0 && message[at - 1] == '[' && at + module.size() < message.size() &&
            message[at + module.size()] == ']') {
          begin = at;
          end = at + module.size();
          break;
        }
      }
      if (end == std::string_view::npos) continue;
    }
    line.module = message.substr(begin, end - begin);
    std::string_view rest = message.substr(end);
    if (!rest.empty() && (rest.front() == ':' || rest.front() == ']')) rest.remove_prefix(1);
    line.text = TrimLeft(rest);
    return line;
  }
  return std::nullopt;
}

DriverClassifier::DriverClassifier(const DriverTables& tables) : tables_(tables) {
  for (const DriverSubsystem& subsystem : tables_.subsystems) {
    for (const std::string& prefix : subsystem.functions) prefixes_.emplace_back(prefix, &subsystem);
    for (const std::string& module : subsystem.modules) {
      modules_.push_back(module);
      module_subsystems_.push_back(&subsystem);
    }
  }
  std::sort(prefixes_.begin(), prefixes_.end());
}

const DriverSubsystem* DriverClassifier::SubsystemOfFunction(std::string_view function) const {
  while (!function.empty() && function.front() == '_') function.remove_prefix(1);
  // The longest prefix of `function` in the sorted table is at or before the
  // last entry not above it; an entry there that is no prefix shares a shorter
  // start with `function`, and the search goes on from that start.
  std::string_view wanted = function;
  while (!wanted.empty()) {
    auto it = std::upper_bound(prefixes_.begin(), prefixes_.end(), wanted,
                               [](std::string_view value, const auto& entry) { return value < entry.first; });
    if (it == prefixes_.begin()) return nullptr;
    --it;
    if (StartsWith(wanted, it->first)) return it->second;
    size_t common = 0;
    while (common < wanted.size() && common < it->first.size() && wanted[common] == it->first[common]) ++common;
    wanted = wanted.substr(0, common);
  }
  return nullptr;
}

const DriverSubsystem* DriverClassifier::SubsystemOfFolder(std::string_view path) const {
  const DriverSubsystem* best = nullptr;
  size_t best_length = 0;
  for (const DriverSubsystem& subsystem : tables_.subsystems) {
    for (const std::string& folder : subsystem.folders) {
      if (folder.size() > best_length && StartsWith(path, folder)) {
        best = &subsystem;
        best_length = folder.size();
      }
    }
  }
  return best;
}

const DriverBenign* DriverClassifier::FindBenign(std::string_view function, std::string_view text,
                                                 bool function_shown) const {
  while (!function.empty() && function.front() == '_') function.remove_prefix(1);
  for (const DriverBenign& benign : tables_.benign) {
    if (!StartsWith(function, benign.function)) continue;
    if (benign.text.empty() && benign.starts.empty()) {
      if (!function_shown && !benign.function.empty()) return &benign;
    } else if (!benign.starts.empty() ? StartsWith(text, benign.starts)
                                      : text.find(benign.text) != std::string_view::npos) {
      return &benign;
    }
  }
  return nullptr;
}

bool DriverClassifier::HasErrorWord(std::string_view text) const {
  return std::any_of(tables_.error_words.begin(), tables_.error_words.end(),
                     [&](const std::string& word) { return ContainsCaseless(text, word); });
}

DriverClassification DriverClassifier::Classify(std::string_view message) const {
  DriverClassification result;
  if (tables_.generic_kind.empty()) return result;
  message = TrimLeft(message);
  std::optional<DriverLine> line = SplitDriverLine(message, modules_);
  if (!line) return result;
  result.line = *line;
  // "NVRM:" and two blanks: a dump's line or a wrapped message, which the
  // parser joins to the record it continues.
  if (line->module == "NVRM" && message.size() > 6 && IsBlank(message[5]) && IsBlank(message[6])) {
    result.verdict = DriverVerdict::kContinuation;
    return result;
  }
  if ((result.benign = FindBenign(line->function, line->text))) {
    result.verdict = DriverVerdict::kBenign;
    return result;
  }
  if (!line->function.empty()) result.subsystem = SubsystemOfFunction(line->function);
  if (result.subsystem) {
    result.verdict = DriverVerdict::kError;
    return result;
  }
  if (line->module != "NVRM") {
    for (size_t i = 0; i < modules_.size(); ++i) {
      if (StartsWith(line->module, modules_[i])) result.subsystem = module_subsystems_[i];
    }
  }
  // A module line's level word can come before its tag ("[drm:...] *ERROR* [nvidia-drm] ...").
  const std::string_view worded = line->module == "NVRM" ? line->text : message;
  result.verdict = HasErrorWord(worded) ? DriverVerdict::kError : DriverVerdict::kNotError;
  return result;
}

}  // namespace gpudoctor
