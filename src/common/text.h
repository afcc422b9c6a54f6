// Small string helpers shared by the parsers and the CLI.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"

namespace gpudoctor {

std::string_view Trim(std::string_view s);
bool StartsWith(std::string_view s, std::string_view prefix);
bool EndsWith(std::string_view s, std::string_view suffix);
bool ContainsIgnoreCase(std::string_view haystack, std::string_view needle);
bool EqualsIgnoreCase(std::string_view a, std::string_view b);  // ASCII letters only
std::string ToLower(std::string_view s);
std::string ToUpper(std::string_view s);

// `text` on one line of at most `max_bytes` bytes (at least 3), for fields a
// reader cuts at a byte count (a Slurm reason, an NPD message): control
// characters become spaces, '"' becomes '\'', runs of spaces fold into one,
// and a longer text is cut at a UTF-8 character boundary and ends in "...".
std::string FitOneLine(std::string_view text, size_t max_bytes);
// `text` with every `from` (not empty) replaced by `to`.
std::string ReplaceAll(std::string_view text, std::string_view from, std::string_view to);
std::vector<std::string_view> Split(std::string_view s, char separator);
// The words of `s` between runs of spaces and tabs; none for a blank `s`.
std::vector<std::string_view> SplitBlanks(std::string_view s);

template <typename Int>
std::optional<Int> ParseInt(std::string_view s, int base = 10) {
  s = Trim(s);
  Int value{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, base);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return value;
}
std::optional<double> ParseDouble(std::string_view s);

// Normalises a PCI bus id to the canonical lower-case "dddd:bb:dd.f" form.
// Accepts NVML's "00000000:3B:00.0", the kernel's "0000:3b:00.0", NVRM's
// "PCI:0000:3b:00" (no function: .0 is assumed) and the short "3b:00.0".
// Returns nullopt when the text is not a bus id.
std::optional<std::string> NormalizePciBusId(std::string_view text);

// ISO 8601 UTC with milliseconds: "2024-05-01T12:00:00.123Z".
std::string FormatIsoUtc(WallTime t);
// The same text, appended to `out`.
void AppendIsoUtc(std::string& out, WallTime t);

// Parses durations like "90s", "5m", "2h", "1d", "250ms" or a plain number of
// seconds. Returns nullopt on garbage.
std::optional<Duration> ParseDuration(std::string_view text);

// Human form of a duration: "2h 5m", "45s", "120ms".
std::string FormatDuration(Duration d);

// A size or a change of size in binary units, one decimal above a KiB:
// "512 B", "64.0 KiB", "1.5 MiB", "-2.0 GiB".
std::string FormatBytes(double bytes);

// A command line a POSIX shell reads back as `argv`: plain words as they are,
// others in single quotes ("python train.py 'my run'"), and a word holding a
// control character in bash's $'...' (so the command stays on one line).
std::string ShellQuote(const std::vector<std::string>& argv);

// `text` on one line: a newline or carriage return from outside (a process
// name, a label value) is written "\n" or "\r", so it cannot start a line
// that looks like gpudoctor's own. Other control characters are left to the
// terminal guard (common/terminal_text.h).
std::string OneLine(std::string_view text);

}  // namespace gpudoctor
