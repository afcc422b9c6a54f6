#include "redact/secrets.h"

#include <fmt/format.h>
#include <re2/re2.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <sstream>
#include <vector>

#include "common/text.h"

namespace gpudoctor {
namespace {

// ---- Free text -----------------------------------------------------------------

// kSecretNameParts as one alternation, for the patterns below.
std::string NamePattern() {
  std::string parts;
  for (std::string_view part : kSecretNameParts) parts += (parts.empty() ? "" : "|") + std::string(part);
  return "[\\w.-]*(?:" + parts + ")[\\w.-]*";
}

bool IsPlainNumber(std::string_view value) {
  static const RE2 number(R"((?i)0x[0-9a-f]+|[0-9]+)");
  return RE2::FullMatch(value, number);
}

// Each pattern's non-empty capture groups are the secrets it finds.
struct TextSecretPattern {
  RE2 regex;
  bool keep_plain_numbers;
};

std::span<const TextSecretPattern> TextSecretPatterns() {
  static const std::string name = NamePattern();
  // A value already masked (matched, so that an auth scheme before it is not
  // taken for the value), or a quoted one: a capture group for each quoting.
  static const std::string quoted = std::string(kRedacted) + R"re(|"([^"]*)"|'([^']*)')re";
  static const TextSecretPattern patterns[] = {
      // URL query strings and fragments, then user-info ("user:password@").
      {RE2(R"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s?#"'<>]*[?#]([^\s"'<>]*))"), false},
      {RE2(R"(\b[A-Za-z][A-Za-z0-9+.-]*://([^\s/?#"'<>]+)@)"), false},
      // name=value, name: value, "name": "value"; an auth scheme before the credential stays.
      {RE2("(?i)" + name + R"(["']?\s*[:=]\s*(?:(?:bearer|basic|digest|token)\s+)?(?:)" + quoted +
           R"(|([^\s,;&"'<>]+)))"),
       true},
      // --name value; a value does not start with a dash (that is the next option).
      {RE2(R"((?i)(?:^|\s)--?)" + name + R"(\s+(?:)" + quoted + R"(|([^\s"'<>-][^\s"'<>]*)))"), true},
      {RE2(R"((?i)\bbearer\s+([A-Za-z0-9._~+/=-]{8,}))"), false},
  };
  return patterns;
}

// `text` with every non-empty capture group of each match of `pattern` replaced by kRedacted.
std::string MaskMatches(std::string_view text, const TextSecretPattern& pattern) {
  const int groups = pattern.regex.NumberOfCapturingGroups();
  std::vector<re2::StringPiece> match(groups + 1);
  std::string out;
  size_t copied = 0;
  for (size_t at = 0; at <= text.size() &&
                      pattern.regex.Match(text, at, text.size(), RE2::UNANCHORED, match.data(), groups + 1);) {
    for (int group = 1; group <= groups; ++group) {
      const std::string_view secret(match[group].data(), match[group].size());
      if (secret.empty() || secret == kRedacted || (pattern.keep_plain_numbers && IsPlainNumber(secret))) continue;
      const size_t begin = static_cast<size_t>(secret.data() - text.data());
      out.append(text, copied, begin - copied);
      out += kRedacted;
      copied = begin + secret.size();
    }
    const size_t end = static_cast<size_t>(match[0].data() - text.data()) + match[0].size();
    at = std::max(end, at + 1);
  }
  out.append(text, copied);
  return out;
}

// ---- The config ----------------------------------------------------------------

using KeyPath = std::vector<std::string>;

bool PathMatches(std::string_view pattern, const KeyPath& path) {
  std::vector<std::string_view> parts = Split(pattern, '.');
  if (parts.size() != path.size()) return false;
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i] != "*" && parts[i] != path[i]) return false;
  return true;
}

bool IsSecretName(std::string_view key) {
  return std::any_of(std::begin(kSecretNameParts), std::end(kSecretNameParts),
                     [&](std::string_view part) { return ContainsIgnoreCase(key, part); });
}

// The mask for the value at `path`, when the tables of secrets.h say it is secret.
std::optional<SecretMask> MaskAt(const KeyPath& path) {
  for (const ConfigSecret& secret : kConfigSecrets)
    if (PathMatches(secret.path, path)) return secret.mask;
  if (!path.empty() && IsSecretName(path.back())) return SecretMask::kWholeValue;
  return std::nullopt;
}

// "https://user:pw@host:8443/hook?key=1" -> "https://<redacted>@host:8443/<redacted>?<redacted>".
// Anything that is not a URL with a scheme is masked whole.
std::string MaskUrl(std::string_view url) {
  static const RE2 parts(R"(([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*)([^?#]*)(\?[^#]*)?(#.*)?)");
  std::string scheme, authority, path, query, fragment;
  if (!RE2::FullMatch(url, parts, &scheme, &authority, &path, &query, &fragment)) return std::string(kRedacted);
  const size_t at = authority.rfind('@');
  std::string out = scheme;
  if (at != std::string::npos) out += std::string(kRedacted) + "@";
  out += authority.substr(at == std::string::npos ? 0 : at + 1);
  if (path.size() > 1) out += "/" + std::string(kRedacted);
  if (!query.empty()) out += "?" + std::string(kRedacted);
  if (!fragment.empty()) out += "#" + std::string(kRedacted);
  return out;
}

std::string MaskString(const std::string& text, std::optional<SecretMask> mask) {
  if (!mask) return RedactTextSecrets(text);
  if (*mask == SecretMask::kUrlOrigin) return MaskUrl(text);
  return std::string(kRedacted);  // a whole value, or an argument vector given as one string
}

// Walks the parsed document, masking in place. `mask` is the one a parent
// passed down; without one, each key's own path decides.
class ConfigMasker {
 public:
  void Table(toml::table& table, std::optional<SecretMask> mask) {
    // An argument vector's tail is every value, so a table given there is masked whole.
    if (mask == SecretMask::kArgvTail) mask = SecretMask::kWholeValue;
    // An iterator, not a structured binding: clang 14 (the fuzz build) cannot capture a binding in a lambda.
    for (auto entry = table.begin(); entry != table.end(); ++entry) {
      const toml::key& key = entry->first;
      path_.emplace_back(key.str());
      Node(entry->second, mask ? mask : MaskAt(path_), [&table, &key] { table.insert_or_assign(key, kRedacted); });
      path_.pop_back();
    }
  }

 private:
  void Array(toml::array& array, std::optional<SecretMask> mask) {
    for (size_t i = 0; i < array.size(); ++i) {
      std::optional<SecretMask> element_mask = mask;
      if (mask == SecretMask::kArgvTail) element_mask = i == 0 ? std::nullopt : std::optional(SecretMask::kWholeValue);
      Node(array[i], element_mask, [&array, i] { array.replace(array.cbegin() + static_cast<ptrdiff_t>(i), kRedacted); });
    }
  }

  // `replace` swaps the node for the masked string, for values that are not strings.
  void Node(toml::node& node, std::optional<SecretMask> mask, const std::function<void()>& replace) {
    if (toml::table* table = node.as_table()) return Table(*table, mask);
    if (toml::array* array = node.as_array()) return Array(*array, mask);
    if (toml::value<std::string>* text = node.as_string()) {
      text->get() = MaskString(text->get(), mask);
    } else if (mask) {
      replace();
    }
  }

  KeyPath path_;
};

// Text that is not TOML: table headers and key names stay, every value goes.
std::string MaskUnparsedConfig(std::string_view text, int error_line) {
  static const RE2 header(R"(\s*(\[\[?\s*[A-Za-z0-9_.\- ]+\s*\]\]?)\s*(?:#.*)?)");
  static const RE2 assignment(R"(\s*([A-Za-z0-9_.\-]+)\s*=.*)");
  std::string out = fmt::format(
      "# Not valid TOML (line {}): only table headers and key names are kept, every value is {} and comments are "
      "left out.\n",
      error_line, kRedacted);
  for (std::string_view line : Split(text, '\n')) {
    const std::string_view trimmed = Trim(line);
    std::string name;
    if (trimmed.empty()) out += "\n";
    else if (StartsWith(trimmed, "#")) continue;
    else if (RE2::FullMatch(line, header, &name)) out += name + "\n";
    else if (RE2::FullMatch(line, assignment, &name)) out += fmt::format("{} = {}\n", name, kRedacted);
    else out += fmt::format("{}\n", kRedacted);
  }
  return out;
}

}  // namespace

std::string RedactTextSecrets(std::string_view text) {
  std::string out(text);
  for (const TextSecretPattern& pattern : TextSecretPatterns()) out = MaskMatches(out, pattern);
  return out;
}

std::string RedactConfigSecrets(std::string_view toml_text) {
  toml::table root;
  try {
    root = toml::parse(toml_text);
  } catch (const toml::parse_error& error) {
    return MaskUnparsedConfig(toml_text, static_cast<int>(error.source().begin.line));
  }
  ConfigMasker().Table(root, std::nullopt);
  std::ostringstream out;
  out << "# Secrets are " << kRedacted << "; comments and layout are not kept.\n" << toml::toml_formatter(root) << "\n";
  return out.str();
}

}  // namespace gpudoctor
