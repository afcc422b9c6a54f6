#include "common/text.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iterator>

namespace gpudoctor {

namespace {
// std::isspace in the C locale, the one gpudoctor runs in, without a library call per byte.
constexpr bool IsCSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
}  // namespace

std::string_view Trim(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size() && IsCSpace(s[begin])) ++begin;
  size_t end = s.size();
  while (end > begin && IsCSpace(s[end - 1])) --end;
  return s.substr(begin, end - begin);
}

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string ToUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string ReplaceAll(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  for (size_t at = 0;;) {
    const size_t found = text.find(from, at);
    if (from.empty() || found == std::string_view::npos) return out.append(text.substr(at));
    out.append(text.substr(at, found - at)).append(to);
    at = found + from.size();
  }
}

namespace {
bool SameLetterIgnoringCase(char a, char b) {
  return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
}
}  // namespace

bool ContainsIgnoreCase(std::string_view haystack, std::string_view needle) {
  return std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end(), SameLetterIgnoringCase) !=
         haystack.end();
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), SameLetterIgnoringCase);
}

std::vector<std::string_view> SplitBlanks(std::string_view s) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    const size_t start = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
    if (i > start) words.push_back(s.substr(start, i - start));
  }
  return words;
}

std::vector<std::string_view> Split(std::string_view s, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(separator, start);
    if (pos == std::string_view::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

std::optional<double> ParseDouble(std::string_view s) {
  s = Trim(s);
  if (s.empty() || s.size() > 64) return std::nullopt;
  // Plain decimals (a kernel's uptime stamp, a reading) take from_chars, which rounds as strtod does
  // without a copy or the locale; anything else (signs, exponents, hex, inf) goes to strtod.
  if (std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; })) {
    double value = 0;
    auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value, std::chars_format::fixed);
    if (error == std::errc() && end == s.data() + s.size()) return value;
  }
  std::string copy(s);
  char* end = nullptr;
  double value = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size()) return std::nullopt;
  return value;
}

namespace {

// "%04x:%02x:%02x.%x" of the four parts, each checked: hex digits only, at
// most as many as the part may have, and within PCI's ranges.
std::optional<std::string> FormatPciBusId(std::string_view domain, std::string_view bus, std::string_view device,
                                          std::string_view function) {
  auto hex = [](std::string_view text, size_t digits) -> std::optional<uint32_t> {
    if (text.empty() || text.size() > digits) return std::nullopt;
    uint32_t value = 0;
    for (char c : text) {
      uint32_t digit;
      if (c >= '0' && c <= '9') digit = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') digit = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') digit = static_cast<uint32_t>(c - 'A' + 10);
      else return std::nullopt;
      value = value * 16 + digit;
    }
    return value;
  };
  auto d = hex(domain, 8);
  auto b = hex(bus, 2);
  auto dev = hex(device, 2);
  auto f = hex(function, 1);
  if (!d || !b || !dev || !f || *dev > 0x1f || *f > 7 || *d > 0xffff) return std::nullopt;
  constexpr char kHex[] = "0123456789abcdef";
  const char out[] = {kHex[(*d >> 12) & 0xf], kHex[(*d >> 8) & 0xf], kHex[(*d >> 4) & 0xf], kHex[*d & 0xf], ':',
                      kHex[(*b >> 4) & 0xf],  kHex[*b & 0xf],         ':',                    kHex[(*dev >> 4) & 0xf],
                      kHex[*dev & 0xf],       '.',                    kHex[*f & 0xf]};
  return std::string(out, sizeof out);
}

}  // namespace

std::optional<std::string> NormalizePciBusId(std::string_view text) {
  // NVML's own form, "00000000:1b:00.0", and the normal form, "0000:1b:00.0",
  // have their separators at fixed places: the probe reads one for every GPU
  // on every request, so these skip the general search below.
  if (text.size() == 16 && text[8] == ':' && text[11] == ':' && text[14] == '.')
    return FormatPciBusId(text.substr(0, 8), text.substr(9, 2), text.substr(12, 2), text.substr(15, 1));
  if (text.size() == 12 && text[4] == ':' && text[7] == ':' && text[10] == '.')
    return FormatPciBusId(text.substr(0, 4), text.substr(5, 2), text.substr(8, 2), text.substr(11, 1));
  text = Trim(text);
  if (StartsWith(text, "PCI:") || StartsWith(text, "pci:")) text.remove_prefix(4);
  // [domain:]bus:device[.function]
  std::string_view domain = "0";
  std::string_view bus;
  std::string_view rest;
  const size_t first = text.find(':');
  if (first == std::string_view::npos) return std::nullopt;
  const size_t second = text.find(':', first + 1);
  if (second == std::string_view::npos) {
    bus = text.substr(0, first);
    rest = text.substr(first + 1);
  } else {
    if (text.find(':', second + 1) != std::string_view::npos) return std::nullopt;
    domain = text.substr(0, first);
    bus = text.substr(first + 1, second - first - 1);
    rest = text.substr(second + 1);
  }
  std::string_view device = rest;
  std::string_view function = "0";
  if (auto dot = rest.find('.'); dot != std::string_view::npos) {
    device = rest.substr(0, dot);
    function = rest.substr(dot + 1);
  }
  return FormatPciBusId(domain, bus, device, function);
}

std::string FormatIsoUtc(WallTime t) {
  std::string text;
  AppendIsoUtc(text, t);
  return text;
}

void AppendIsoUtc(std::string& out, WallTime t) {
  // Calendar arithmetic, not gmtime_r, which takes the C library's time zone lock on every call.
  using namespace std::chrono;
  const sys_time<milliseconds> at{milliseconds(ToUnixMillis(t))};
  const sys_days day = floor<days>(at);
  const year_month_day date{day};
  const hh_mm_ss<milliseconds> clock{at - day};
  // WallTime counts nanoseconds in 64 bits: its years are 1677 to 2262, four digits each.
  const int year = static_cast<int>(date.year());
  const long millis = static_cast<long>(clock.subseconds().count());
  char text[] = "0000-00-00T00:00:00.000Z";
  auto put = [&text](size_t offset, long value, size_t digits) {
    for (size_t i = digits; i-- > 0; value /= 10) text[offset + i] = static_cast<char>('0' + value % 10);
  };
  put(0, year, 4);
  put(5, static_cast<long>(static_cast<unsigned>(date.month())), 2);
  put(8, static_cast<long>(static_cast<unsigned>(date.day())), 2);
  put(11, static_cast<long>(clock.hours().count()), 2);
  put(14, static_cast<long>(clock.minutes().count()), 2);
  put(17, static_cast<long>(clock.seconds().count()), 2);
  put(20, millis, 3);
  out.append(text, sizeof text - 1);
}

std::optional<Duration> ParseDuration(std::string_view text) {
  text = Trim(text);
  if (text.empty()) return std::nullopt;
  size_t split = 0;
  while (split < text.size() && (std::isdigit(static_cast<unsigned char>(text[split])) || text[split] == '.')) ++split;
  auto number = ParseDouble(text.substr(0, split));
  if (!number || *number < 0) return std::nullopt;
  std::string_view unit = Trim(text.substr(split));
  double seconds_per_unit = 0;
  if (unit.empty() || unit == "s" || unit == "sec") seconds_per_unit = 1;
  else if (unit == "ms") seconds_per_unit = 0.001;
  else if (unit == "m" || unit == "min") seconds_per_unit = 60;
  else if (unit == "h") seconds_per_unit = 3600;
  else if (unit == "d") seconds_per_unit = 86400;
  else return std::nullopt;
  double nanos = *number * seconds_per_unit * 1e9;
  if (nanos > 9e18) return std::nullopt;
  return Duration{static_cast<int64_t>(nanos)};
}

std::string FormatDuration(Duration d) {
  using namespace std::chrono;
  auto ms = duration_cast<milliseconds>(d).count();
  if (ms < 1000) return std::to_string(ms) + "ms";
  auto s = ms / 1000;
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m " + std::to_string(s % 60) + "s";
  if (s < 86400) return std::to_string(s / 3600) + "h " + std::to_string(s % 3600 / 60) + "m";
  return std::to_string(s / 86400) + "d " + std::to_string(s % 86400 / 3600) + "h";
}

std::string FormatBytes(double bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double magnitude = std::abs(bytes);
  size_t unit = 0;
  while (magnitude >= 1024 && unit + 1 < std::size(kUnits)) {
    magnitude /= 1024;
    ++unit;
  }
  char text[64];
  const double value = bytes < 0 ? -magnitude : magnitude;
  if (unit == 0) std::snprintf(text, sizeof text, "%.0f B", value);
  else std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  return text;
}

std::string FitOneLine(std::string_view text, size_t max_bytes) {
  std::string line;
  bool space = false;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte == 0x7f) {
      space = !line.empty();
      continue;
    }
    if (space) line += ' ';
    space = false;
    line += c == '"' ? '\'' : c;
  }
  max_bytes = std::max<size_t>(max_bytes, 3);
  if (line.size() <= max_bytes) return line;
  size_t cut = max_bytes - 3;
  // Never end inside a UTF-8 sequence: back off over its continuation bytes and its lead byte.
  if (cut < line.size() && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) {
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
  }
  line.resize(cut);
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line + "...";
}

std::string ShellQuote(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& word : argv) {
    if (!line.empty()) line += ' ';
    const bool plain =
        !word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                "_-+=/.,:@%") == std::string::npos;
    const bool control = std::any_of(word.begin(), word.end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) == 0x7f;
    });
    if (plain) {
      line += word;
    } else if (!control) {
      line += "'" + ReplaceAll(word, "'", "'\\''") + "'";
    } else {
      // Bash's $'...': the command stays on one line and means the same.
      line += "$'";
      for (char c : word) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '\\' || c == '\'') line += std::string("\\") + c;
        else if (c == '\n') line += "\\n";
        else if (c == '\t') line += "\\t";
        else if (byte < 0x20 || byte == 0x7f) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
          line += escaped;
        }
        else line += c;
      }
      line += "'";
    }
  }
  return line;
}

std::string OneLine(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out;
}

}  // namespace gpudoctor
