#include "net/prometheus_text_parser.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <set>

#include "common/text.h"

namespace gpudoctor {
namespace {

bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
bool IsNameChar(char c) { return IsNameStart(c) || std::isdigit(static_cast<unsigned char>(c)); }
bool IsLabelStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsLabelChar(char c) { return IsLabelStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

// Reads a name made of `start` then `rest` characters from the front of `s`.
template <typename Start, typename Rest>
std::string_view TakeName(std::string_view& s, Start start, Rest rest) {
  if (s.empty() || !start(s.front())) return {};
  size_t n = 1;
  while (n < s.size() && rest(s[n])) ++n;
  std::string_view name = s.substr(0, n);
  s.remove_prefix(n);
  return name;
}

std::optional<double> ParseValue(std::string_view text) {
  if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (text == "+Inf" || text == "Inf") return std::numeric_limits<double>::infinity();
  if (text == "-Inf") return -std::numeric_limits<double>::infinity();
  return ParseDouble(text);
}

Result<std::string> ParseLabelValue(std::string_view& s) {
  if (s.empty() || s.front() != '"') return Error{"label value must be quoted"};
  s.remove_prefix(1);
  std::string value;
  while (!s.empty() && s.front() != '"') {
    char c = s.front();
    s.remove_prefix(1);
    if (c == '\\') {
      if (s.empty()) return Error{"dangling escape"};
      const char escaped = s.front();
      s.remove_prefix(1);
      if (escaped == 'n')
        value += '\n';
      else if (escaped == '\\' || escaped == '"')
        value += escaped;
      else
        return Error{fmt::format("bad escape \\{}", escaped)};
    } else if (c == '\n') {
      return Error{"raw newline in label value"};
    } else {
      value += c;
    }
  }
  if (s.empty()) return Error{"unterminated label value"};
  s.remove_prefix(1);
  return value;
}

}  // namespace

Result<PromSample> ParsePrometheusSample(std::string_view s) {
  PromSample sample;
  std::string_view name = TakeName(s, IsNameStart, IsNameChar);
  if (name.empty()) return Error{"bad metric name"};
  sample.name = std::string(name);
  if (!s.empty() && s.front() == '{') {
    s.remove_prefix(1);
    while (!s.empty() && s.front() != '}') {
      std::string_view label = TakeName(s, IsLabelStart, IsLabelChar);
      if (label.empty()) return Error{"bad label name"};
      if (StartsWith(label, "__")) return Error{"label names starting with __ are reserved"};
      if (s.empty() || s.front() != '=') return Error{"expected = after label name"};
      s.remove_prefix(1);
      Result<std::string> value = ParseLabelValue(s);
      if (!value) return value.error();
      if (!sample.labels.emplace(label, *value).second) return Error{fmt::format("label {} repeated", label)};
      if (!s.empty() && s.front() == ',') s.remove_prefix(1);
    }
    if (s.empty()) return Error{"unterminated label set"};
    s.remove_prefix(1);
  }
  if (s.empty() || s.front() != ' ') return Error{"expected a space before the value"};
  std::vector<std::string_view> fields = Split(Trim(s), ' ');
  if (fields.empty() || fields.size() > 2) return Error{"expected a value and an optional timestamp"};
  std::optional<double> value = ParseValue(fields[0]);
  if (!value) return Error{fmt::format("bad value '{}'", fields[0])};
  if (fields.size() == 2 && !ParseInt<int64_t>(fields[1])) return Error{"bad timestamp"};
  sample.value = *value;
  return sample;
}

std::string_view PrometheusSampleName(std::string_view line) { return TakeName(line, IsNameStart, IsNameChar); }

namespace {

std::string SeriesKey(const PromSample& sample) {
  std::string key = sample.name;
  for (const auto& [name, value] : sample.labels) key += fmt::format("|{}={}", name, value);
  return key;
}

}  // namespace

Result<PromExposition> ParsePrometheusText(std::string_view text) {
  PromExposition out;
  std::set<std::string> series;
  std::set<std::string> finished_families;  // families whose samples are behind us
  std::string current_family;
  int line_number = 0;
  if (!text.empty() && text.back() != '\n') return Error{"the text must end with a newline"};
  for (std::string_view line : Split(text, '\n')) {
    ++line_number;
    auto fail = [&](std::string_view why) {
      return Error{fmt::format("line {}: {}: '{}'", line_number, why, line)};
    };
    if (line.empty()) continue;
    if (line.front() == '#') {
      std::vector<std::string_view> words = Split(line, ' ');
      if (words.size() < 3 || (words[1] != "HELP" && words[1] != "TYPE")) continue;  // plain comment
      const std::string name(words[2]);
      std::string_view rest = line.substr(std::min(line.size(), 2 + words[1].size() + 1 + name.size() + 1));
      if (finished_families.contains(name) || (name == current_family && !out.Find(name).empty())) {
        return fail("HELP/TYPE after the family's samples");
      }
      PromFamily& family = out.families[name];
      if (words[1] == "TYPE") {
        if (!family.type.empty()) return fail("TYPE repeated");
        if (rest != "counter" && rest != "gauge" && rest != "histogram" && rest != "summary" &&
            rest != "untyped") {
          return fail("unknown type");
        }
        family.type = std::string(rest);
      } else {
        family.help = std::string(rest);
      }
      continue;
    }
    Result<PromSample> sample = ParsePrometheusSample(line);
    if (!sample) return fail(sample.error().message);
    if (sample->name != current_family) {
      if (finished_families.contains(sample->name)) return fail("family's samples are not contiguous");
      if (!current_family.empty()) finished_families.insert(current_family);
      current_family = sample->name;
    }
    if (!series.insert(SeriesKey(*sample)).second) return fail("series repeated");
    out.samples.push_back(std::move(*sample));
  }
  return out;
}

std::vector<const PromSample*> PromExposition::Find(std::string_view name,
                                                    const std::map<std::string, std::string>& labels) const {
  std::vector<const PromSample*> found;
  for (const PromSample& sample : samples) {
    if (sample.name != name) continue;
    bool match = true;
    for (const auto& [key, value] : labels) {
      auto it = sample.labels.find(key);
      match = match && it != sample.labels.end() && it->second == value;
    }
    if (match) found.push_back(&sample);
  }
  return found;
}

std::optional<double> PromExposition::Value(std::string_view name,
                                            const std::map<std::string, std::string>& labels) const {
  std::vector<const PromSample*> found = Find(name, labels);
  if (found.size() != 1) return std::nullopt;
  return found.front()->value;
}

}  // namespace gpudoctor
