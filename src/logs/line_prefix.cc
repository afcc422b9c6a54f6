#include "logs/line_prefix.h"

#include <algorithm>
#include <string>

#include <re2/re2.h>

#include "common/text.h"
#include "logs/log_time.h"

namespace gpudoctor {

namespace {

using re2::RE2;

const char* const kFormatNames[] = {"bare",           "kmsg",           "dmesg",         "dmesg_ctime",
                                    "dmesg_delta",    "dmesg_minute",   "dmesg_iso",     "syslog",
                                    "syslog_iso",     "journal_monotonic", "talos",       "broadcast_header",
                                    "broadcast_body", "fabric_manager", "syslog_5424",   "dmesg_decoded",
                                    "klog",           "go_log",         "program_tag"};

struct Regexes {
  RE2 priority{R"(^<(\d{1,3})>)"};
  RE2 kmsg{R"(^(\d{1,3}),(\d+),(\d+),[^;]*;)"};
  RE2 uptime{R"(^\[\s*(\d+\.\d+)\]\s?)"};
  RE2 delta{R"(^\[\s*\+(\d+\.\d+)\]\s?)"};
  RE2 bracket_date{R"(^\[(?:[^\s\]]{2,12}\s+)?(\S+?)\.?\s*(\d{1,2})\s+(\d{1,2}):(\d\d)(?::(\d\d))?(?:\s+(\d{4}))?\]\s?)"};
  RE2 iso{R"(^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(Z|[+-]\d\d:?\d\d)?\s+)"};
  RE2 syslog_date{R"(^(\S+?)\.?\s+(\d{1,2})\s+(\d{1,2}):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(?:\s+(\d{4}))?\s+)"};
  // "host program[pid]: " with the host optional (RFC 3164 files sometimes lack it).
  RE2 host_program{R"(^(?:([^\s:\[\]]+)\s+)?([^\s:\[\]]+)(?:\[(\d+)\])?:(?:\s+|$))"};
  // The same with the host required, for formats where the prefix is ambiguous.
  RE2 host_program_strict{R"(^([^\s:\[\]]+)\s+([^\s:\[\]]+)(?:\[(\d+)\])?:(?:\s+|$))"};
  RE2 collector{R"(^([A-Za-z0-9][\w.-]*|\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?[:,]?\s+)"};
  RE2 embedded_syslog{R"((?:^|[\s,;|])((?:\d{1,2}(?:月|월))|[^\s\d,;|:\[\]]{3,6})\s+\d{1,2}\s+\d{1,2}:\d\d:\d\d)"};
  RE2 embedded_uptime{R"((?:^|\s)(\[\s*\d+\.\d{6}\]\s))"};
  // talosctl dmesg: "kern:     err: [2026-04-22T21:25:20.466Z]: " (its node, when named, is a collector host).
  RE2 talos{R"(^([a-z]+):\s*([a-z]+):\s*\[(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?Z\]:\s?)"};
  // syslogd's console broadcast of an emergency message: a header line, then the message indented.
  RE2 broadcast_header{R"(^Message from syslogd@(\S+) at (?:[A-Za-z]{3}\s+)?)"
                       R"((\S+?)\.?\s+(\d{1,2})\s+(\d{1,2}):(\d\d):(\d\d)(?:\s+(\d{4}))?\s*\.\.\.\s*$)"};
  RE2 kernel_tag{R"(^\s*kernel:\s*)"};
  // RFC 5424 after its version "1 " and timestamp: "host app procid msgid structured-data ".
  RE2 rfc5424{R"(^(\S+) (\S+) (\S+) (\S+) (?:-|(?:\[(?:[^\]\\]|\\.)*\])+)(?: |$))"};
  // dmesg -x: "kern  :err   : " (facility and level, padded).
  RE2 dmesg_decoded{R"(^(kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|local[0-7])\s*:)"
                    R"(\s*(emerg|alert|crit|err|warn|notice|info|debug)\s*: )"};
  // klog, as Kubernetes components and their plugins write it: "I0810 15:36:05.551834       1 health.go:169] "
  // (severity, month and day, time, thread id, source file and line; no year).
  RE2 klog{R"(^([IWEF])(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?\s+\d+\s+[^\s:\]]+:\d+\]\s?)"};
  // Go's standard logger: "2020/08/10 19:09:42 " or with microseconds.
  RE2 go_log{R"(^(\d{4})/(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))? )"};
  // nv-fabricmanager's log: "[Feb 27 2025 15:10:02] [ERROR] [tid 12727] ".
  RE2 fabric_manager{R"(^\[(\S+?)\.?\s+(\d{1,2})\s+(\d{4})\s+(\d{1,2}):(\d\d):(\d\d)\])"
                     R"(\s+\[([A-Z]+)\]\s+\[tid \d+\]\s?)"};
};

const Regexes& Patterns() {
  static const Regexes regexes;
  return regexes;
}

// Advances `text` past the match of `regex` at its start.
template <typename... Args>
bool Consume(std::string_view& text, const RE2& regex, Args*... args) {
  re2::StringPiece piece(text.data(), text.size());
  if (!RE2::Consume(&piece, regex, args...)) return false;
  text = std::string_view(piece.data(), piece.size());
  return true;
}

// Captures are views into the line: no allocation per field.
using Piece = re2::StringPiece;

std::string_view View(const Piece& piece) { return std::string_view(piece.data(), piece.size()); }

unsigned ToUnsigned(const Piece& digits) { return ParseInt<unsigned>(View(digits)).value_or(0); }

uint32_t FractionToNanos(const Piece& digits) {
  if (digits.empty()) return 0;
  std::string padded(View(digits));
  padded.resize(9, '0');
  return ParseInt<uint32_t>(padded).value_or(0);
}

std::optional<int> ParseZone(const Piece& piece) {
  std::string zone(View(piece));
  if (zone.empty()) return std::nullopt;
  if (zone == "Z") return 0;
  std::string digits;
  for (char c : zone) {
    if (c >= '0' && c <= '9') digits.push_back(c);
  }
  if (digits.size() != 4) return std::nullopt;
  int minutes = ParseInt<int>(digits.substr(0, 2)).value_or(0) * 60 + ParseInt<int>(digits.substr(2, 2)).value_or(0);
  return zone[0] == '-' ? -minutes : minutes;
}

// Hand-written twins of the three expressions nearly every line meets: the
// kernel's uptime stamp, the syslog date, and "host program[pid]: ". Each
// does exactly what its regex does, several times faster, or answers kUnsure
// (non-ASCII text, where the regex's UTF-8 rules decide) and leaves the line
// to the regex. Tests and a fuzz target compare both on every line they have
// (PrefixOptions::regex_only).
enum class Fast { kMatch, kNoMatch, kUnsure };

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }  // RE2's \s
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAscii(char c) { return static_cast<unsigned char>(c) < 0x80; }

size_t SkipSpaces(std::string_view text, size_t i) {
  while (i < text.size() && IsSpace(text[i])) ++i;
  return i;
}
size_t SkipDigits(std::string_view text, size_t i, size_t most = std::string_view::npos) {
  size_t start = i;
  while (i < text.size() && IsDigit(text[i]) && i - start < most) ++i;
  return i;
}
Piece Slice(std::string_view text, size_t begin, size_t end) { return Piece(text.data() + begin, end - begin); }

// ^\[\s*(\d+\.\d+)\]\s?
Fast FastUptime(std::string_view& text, Piece* number) {
  if (text.empty() || text[0] != '[') return Fast::kNoMatch;
  size_t begin = SkipSpaces(text, 1);
  size_t dot = SkipDigits(text, begin);
  if (dot == begin || dot >= text.size() || text[dot] != '.') return Fast::kNoMatch;
  size_t end = SkipDigits(text, dot + 1);
  if (end == dot + 1 || end >= text.size() || text[end] != ']') return Fast::kNoMatch;
  *number = Slice(text, begin, end);
  size_t after = end + 1;
  if (after < text.size() && IsSpace(text[after])) ++after;
  text.remove_prefix(after);
  return Fast::kMatch;
}

// ^(\S+?)\.?\s+(\d{1,2})\s+(\d{1,2}):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(?:\s+(\d{4}))?\s+
Fast FastSyslogDate(std::string_view& text, Piece* month, Piece* day, Piece* hour, Piece* minute, Piece* second,
                    Piece* fraction, Piece* year) {
  size_t token = 0;
  while (token < text.size() && !IsSpace(text[token])) {
    if (!IsAscii(text[token])) return Fast::kUnsure;
    ++token;
  }
  if (token == 0 || token == text.size()) return Fast::kNoMatch;
  // The lazy month stops before a dot that ends the token; nothing else can
  // follow it, as \S never crosses white space.
  *month = Slice(text, 0, token >= 2 && text[token - 1] == '.' ? token - 1 : token);
  size_t i = SkipSpaces(text, token);
  size_t end = SkipDigits(text, i, 2);
  if (end == i || end >= text.size() || !IsSpace(text[end])) return Fast::kNoMatch;
  *day = Slice(text, i, end);
  i = SkipSpaces(text, end);
  end = SkipDigits(text, i, 2);
  if (end == i || end >= text.size() || text[end] != ':') return Fast::kNoMatch;
  *hour = Slice(text, i, end);
  i = end + 1;
  if (SkipDigits(text, i, 2) != i + 2 || i + 2 >= text.size() || text[i + 2] != ':') return Fast::kNoMatch;
  *minute = Slice(text, i, i + 2);
  i += 3;
  if (SkipDigits(text, i, 2) != i + 2) return Fast::kNoMatch;
  *second = Slice(text, i, i + 2);
  i += 2;
  *fraction = Piece();
  if (i < text.size() && (text[i] == '.' || text[i] == ',')) {
    end = SkipDigits(text, i + 1, 9);
    if (end > i + 1) {
      *fraction = Slice(text, i + 1, end);
      i = end;
    }
  }
  size_t spaces_end = SkipSpaces(text, i);
  if (spaces_end == i) return Fast::kNoMatch;
  *year = Piece();
  size_t year_end = SkipDigits(text, spaces_end, 4);
  if (year_end == spaces_end + 4 && year_end < text.size() && IsSpace(text[year_end])) {
    *year = Slice(text, spaces_end, year_end);
    spaces_end = SkipSpaces(text, year_end);
  }
  text.remove_prefix(spaces_end);
  return Fast::kMatch;
}

// ^(?:([^\s:\[\]]+)\s+)?([^\s:\[\]]+)(?:\[(\d+)\])?:(?:\s+|$), the host
// required when `strict`.
Fast FastHostProgram(std::string_view& text, bool strict, Piece* host, Piece* program, Piece* pid) {
  bool unsure = false;
  auto name_end = [&](size_t i) {
    while (i < text.size()) {
      char c = text[i];
      if (IsSpace(c) || c == ':' || c == '[' || c == ']') break;
      if (!IsAscii(c)) unsure = true;
      ++i;
    }
    return i;
  };
  // "program[pid]: " from `begin`; the end of the match, or npos.
  auto program_from = [&](size_t begin) -> size_t {
    size_t end = name_end(begin);
    if (end == begin) return std::string_view::npos;
    *program = Slice(text, begin, end);
    *pid = Piece();
    size_t i = end;
    if (i < text.size() && text[i] == '[') {
      size_t digits_end = SkipDigits(text, i + 1);
      if (digits_end == i + 1 || digits_end >= text.size() || text[digits_end] != ']') return std::string_view::npos;
      *pid = Slice(text, i + 1, digits_end);
      i = digits_end + 1;
    }
    if (i >= text.size() || text[i] != ':') return std::string_view::npos;
    ++i;
    if (i == text.size()) return i;
    size_t spaces_end = SkipSpaces(text, i);
    return spaces_end > i ? spaces_end : std::string_view::npos;
  };
  size_t host_end = name_end(0);
  size_t end = std::string_view::npos;
  if (host_end > 0 && host_end < text.size() && IsSpace(text[host_end])) {
    end = program_from(SkipSpaces(text, host_end));
    if (end != std::string_view::npos) *host = Slice(text, 0, host_end);
  }
  if (end == std::string_view::npos && !strict) {
    end = program_from(0);
    *host = Piece();
  }
  if (unsure) return Fast::kUnsure;
  if (end == std::string_view::npos) return Fast::kNoMatch;
  text.remove_prefix(end);
  return Fast::kMatch;
}

// Runs the hand-written matcher, or the regex when asked to or when the
// matcher is unsure.
template <typename FastFn, typename... Args>
bool ConsumeFast(std::string_view& text, const PrefixOptions& options, FastFn fast, const RE2& regex, Args*... args) {
  if (!options.regex_only) {
    std::string_view attempt = text;
    Fast result = fast(attempt, args...);
    if (result == Fast::kMatch) text = attempt;
    if (result != Fast::kUnsure) return result == Fast::kMatch;
  }
  return Consume(text, regex, args...);
}

// "kernel: [ 123.456] msg" -> uptime and message; other programs keep their name.
void SplitProgramMessage(std::string_view after_prefix, std::string_view program_start, const PrefixOptions& options,
                         LinePrefix& prefix) {
  if (prefix.program == "kernel") {
    std::string_view message = after_prefix;
    Piece uptime;
    if (ConsumeFast(message, options, FastUptime, Patterns().uptime, &uptime))
      prefix.uptime_seconds = ParseDouble(View(uptime));
    prefix.message = message;
  } else {
    prefix.message = program_start;
  }
}

// Reads "host program[pid]: " at the start of `rest`. With `strict`, the host
// is required and the program must be "kernel" or carry a pid, because the
// formats that call it strictly also occur without host and program.
bool TakeHostProgram(std::string_view rest, bool strict, const PrefixOptions& options, LinePrefix& prefix) {
  std::string_view cursor = rest;
  re2::StringPiece host, program, pid;
  const RE2& regex = strict ? Patterns().host_program_strict : Patterns().host_program;
  auto fast = [strict](std::string_view& text, Piece* h, Piece* p, Piece* id) {
    return FastHostProgram(text, strict, h, p, id);
  };
  if (!ConsumeFast(cursor, options, fast, regex, &host, &program, &pid)) return false;
  if (strict && program != "kernel" && pid.empty()) return false;
  prefix.host = std::string_view(host.data(), host.size());
  prefix.program = std::string_view(program.data(), program.size());
  // The program name starts after the host (and its white space).
  std::string_view program_start = rest.substr(static_cast<size_t>(program.data() - rest.data()));
  SplitProgramMessage(cursor, program_start, options, prefix);
  return true;
}

CivilTime MakeCivil(int year, unsigned month, unsigned day, unsigned hour, unsigned minute, unsigned second,
                    uint32_t nanos) {
  CivilTime civil;
  civil.year = year;
  civil.month = month;
  civil.day = day;
  civil.hour = hour;
  civil.minute = minute;
  civil.second = second;
  civil.nanosecond = nanos;
  return civil;
}

// "kern:     err: [2026-04-22T21:25:20.466Z]: msg" (talosctl dmesg, after the node a collector prefix took).
bool ParseTalos(std::string_view text, LinePrefix& prefix) {
  // Cheap refusal first: a facility word and a colon within the first few bytes.
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon > 8) return false;
  std::string_view rest = text;
  Piece facility, level, year, month, day, hour, minute, second, fraction;
  if (!Consume(rest, Patterns().talos, &facility, &level, &year, &month, &day, &hour, &minute, &second, &fraction)) {
    return false;
  }
  CivilTime civil = MakeCivil(ParseInt<int>(View(year)).value_or(0), ToUnsigned(month), ToUnsigned(day),
                              ToUnsigned(hour), ToUnsigned(minute), ToUnsigned(second), FractionToNanos(fraction));
  prefix.format = LineFormat::kTalos;
  prefix.time = CivilToWallTime(civil, 0);
  prefix.time_is_utc = prefix.time.has_value();
  prefix.level = View(level);
  prefix.program = facility == "kern" ? std::string_view("kernel") : View(facility);
  Piece uptime;  // Talos keeps no uptime stamp, but a forwarded dmesg line may carry one
  if (Consume(rest, Patterns().uptime, &uptime)) prefix.uptime_seconds = ParseDouble(View(uptime));
  prefix.message = rest;
  return true;
}

bool ParseTimestamped(std::string_view text, const PrefixOptions& options, LinePrefix& prefix);

// "1 2003-10-11T22:14:15.003Z mymachine.example.com su - ID47 - msg" (RFC 5424, after its priority).
bool ParseRfc5424(std::string_view text, const PrefixOptions& options, LinePrefix& prefix) {
  if (!StartsWith(text, "1 ")) return false;
  std::string_view rest = text.substr(2);
  Piece year, month, day, hour, minute, second, fraction, zone, host, app, procid, msgid;
  if (!Consume(rest, Patterns().iso, &year, &month, &day, &hour, &minute, &second, &fraction, &zone)) return false;
  if (!Consume(rest, Patterns().rfc5424, &host, &app, &procid, &msgid)) return false;
  std::optional<int> offset = ParseZone(zone);
  CivilTime civil = MakeCivil(ParseInt<int>(View(year)).value_or(0), ToUnsigned(month), ToUnsigned(day),
                              ToUnsigned(hour), ToUnsigned(minute), ToUnsigned(second), FractionToNanos(fraction));
  prefix.format = LineFormat::kSyslog5424;
  prefix.time = CivilToWallTime(civil, offset.value_or(options.utc_offset_minutes));
  prefix.time_is_utc = offset.has_value() && prefix.time.has_value();
  prefix.host = host == "-" ? std::string_view() : View(host);
  prefix.program = app == "-" ? std::string_view() : View(app);
  Piece uptime;
  if (prefix.program == "kernel" && Consume(rest, Patterns().uptime, &uptime)) {
    prefix.uptime_seconds = ParseDouble(View(uptime));
  }
  prefix.message = rest;
  return true;
}

// "kern  :err   : [ 1.5] msg" (dmesg -x): the facility and level, then any stamp dmesg prints, or none.
bool ParseDmesgDecoded(std::string_view text, const PrefixOptions& options, LinePrefix& prefix) {
  std::string_view rest = text;
  Piece facility, level;
  if (!Consume(rest, Patterns().dmesg_decoded, &facility, &level)) return false;
  if (!ParseTimestamped(rest, options, prefix)) {
    prefix = LinePrefix{};
    prefix.format = LineFormat::kDmesgDecoded;
    prefix.message = rest;
  }
  prefix.level = View(level);
  if (prefix.program.empty()) prefix.program = facility == "kern" ? std::string_view("kernel") : View(facility);
  return true;
}

// "[Feb 27 2025 15:10:02] [ERROR] [tid 12727] msg" (nv-fabricmanager's log file).
bool ParseFabricManager(std::string_view text, const PrefixOptions& options, LinePrefix& prefix) {
  std::string_view rest = text;
  Piece month_name, day, year, hour, minute, second, level;
  if (!Consume(rest, Patterns().fabric_manager, &month_name, &day, &year, &hour, &minute, &second, &level)) {
    return false;
  }
  auto month = MonthFromName(View(month_name));
  if (!month) return false;
  CivilTime civil = MakeCivil(ParseInt<int>(View(year)).value_or(1970), *month, ToUnsigned(day), ToUnsigned(hour),
                              ToUnsigned(minute), ToUnsigned(second), 0);
  prefix.format = LineFormat::kFabricManager;
  prefix.time = CivilToWallTime(civil, options.utc_offset_minutes);
  prefix.level = View(level);
  prefix.program = "nv-fabricmanager";
  prefix.message = rest;
  return true;
}

// "Message from syslogd@node8 at May 13 18:01:09 ..." : a header with no message of its own.
bool ParseBroadcastHeader(std::string_view text, const PrefixOptions& options, LinePrefix& prefix) {
  if (!StartsWith(text, "Message from syslogd@")) return false;
  Piece host, month_name, day, hour, minute, second, year;
  if (!RE2::FullMatch(text, Patterns().broadcast_header, &host, &month_name, &day, &hour, &minute, &second, &year)) {
    return false;
  }
  auto month = MonthFromName(View(month_name));
  if (!month) return false;
  const bool year_given = !year.empty() || options.year.has_value();
  int civil_year = !year.empty() ? ParseInt<int>(View(year)).value_or(1970)
                                 : options.year.value_or(InferYear(*month, ToUnsigned(day), options.reference_time));
  CivilTime civil = MakeCivil(civil_year, *month, ToUnsigned(day), ToUnsigned(hour), ToUnsigned(minute),
                              ToUnsigned(second), 0);
  prefix.format = LineFormat::kBroadcastHeader;
  prefix.time = CivilToWallTime(civil, options.utc_offset_minutes);
  prefix.time_estimated = !year_given;
  prefix.host = View(host);
  prefix.program = "syslogd";
  prefix.message = std::string_view();
  return true;
}

// "I0810 15:36:05.551834       1 health.go:169] msg" (klog, in the zone assumed for local times; no year).
bool ParseKlog(std::string_view text, const PrefixOptions& options, LinePrefix& prefix) {
  std::string_view rest = text;
  Piece severity, month, day, hour, minute, second, fraction;
  if (!Consume(rest, Patterns().klog, &severity, &month, &day, &hour, &minute, &second, &fraction)) return false;
  const unsigned month_number = ToUnsigned(month);
  if (month_number < 1 || month_number > 12) return false;
  const int year = options.year.value_or(InferYear(month_number, ToUnsigned(day), options.reference_time));
  CivilTime civil = MakeCivil(year, month_number, ToUnsigned(day), ToUnsigned(hour), ToUnsigned(minute),
                              ToUnsigned(second), FractionToNanos(fraction));
  prefix.format = LineFormat::kKlog;
  prefix.time = CivilToWallTime(civil, options.utc_offset_minutes);
  prefix.time_estimated = !options.year.has_value();
  switch (severity[0]) {
    case 'I': prefix.level = "info"; break;
    case 'W': prefix.level = "warning"; break;
    case 'E': prefix.level = "err"; break;
    default: prefix.level = "crit"; break;  // 'F': fatal
  }
  prefix.message = rest;
  return true;
}

// "2020/08/10 19:09:42 msg" (Go's standard logger, in the zone assumed for local times).
bool ParseGoLog(std::string_view text, const PrefixOptions& options, LinePrefix& prefix) {
  if (text.size() < 20 || text[4] != '/') return false;
  std::string_view rest = text;
  Piece year, month, day, hour, minute, second, fraction;
  if (!Consume(rest, Patterns().go_log, &year, &month, &day, &hour, &minute, &second, &fraction)) return false;
  CivilTime civil = MakeCivil(ParseInt<int>(View(year)).value_or(0), ToUnsigned(month), ToUnsigned(day),
                              ToUnsigned(hour), ToUnsigned(minute), ToUnsigned(second), FractionToNanos(fraction));
  prefix.format = LineFormat::kGoLog;
  prefix.time = CivilToWallTime(civil, options.utc_offset_minutes);
  prefix.message = rest;
  return true;
}

// Tries every timestamped format at the start of `text`.
bool ParseTimestamped(std::string_view text, const PrefixOptions& options, LinePrefix& prefix) {
  const Regexes& re = Patterns();
  if (text.starts_with('<')) {
    Consume(text, re.priority, static_cast<Piece*>(nullptr));  // syslog "<4>"
    if (ParseRfc5424(text, options, prefix)) return true;
  }
  if (text.empty()) return false;
  std::string_view rest = text;
  const char first = text.front();

  if (first >= '0' && first <= '9') {
    Piece priority, sequence, usec;
    if (Consume(rest, re.kmsg, &priority, &sequence, &usec)) {
      prefix.format = LineFormat::kKmsg;
      prefix.kmsg_sequence = ParseInt<uint64_t>(View(sequence));
      if (auto micros = ParseInt<uint64_t>(View(usec))) prefix.uptime_seconds = static_cast<double>(*micros) / 1e6;
      prefix.message = rest;
      return true;
    }
    Piece year, month, day, hour, minute, second, fraction, zone;
    if (Consume(rest, re.iso, &year, &month, &day, &hour, &minute, &second, &fraction, &zone)) {
      std::optional<int> offset = ParseZone(zone);
      CivilTime civil = MakeCivil(ParseInt<int>(View(year)).value_or(0), ToUnsigned(month), ToUnsigned(day),
                                  ToUnsigned(hour), ToUnsigned(minute), ToUnsigned(second), FractionToNanos(fraction));
      prefix.time = CivilToWallTime(civil, offset.value_or(options.utc_offset_minutes));
      prefix.time_is_utc = offset.has_value() && prefix.time.has_value();
      if (TakeHostProgram(rest, /*strict=*/true, options, prefix)) {
        prefix.format = LineFormat::kSyslogIso;
      } else {
        prefix.format = LineFormat::kDmesgIso;
        prefix.message = rest;
      }
      return true;
    }
    if (ParseGoLog(text, options, prefix)) return true;
  }
  if ((first == 'I' || first == 'W' || first == 'E' || first == 'F') && text.size() > 1 && IsDigit(text[1]) &&
      ParseKlog(text, options, prefix)) {
    return true;
  }

  if (first == '[') {
    Piece number;
    if (ConsumeFast(rest, options, FastUptime, re.uptime, &number)) {
      prefix.uptime_seconds = ParseDouble(View(number));
      if (TakeHostProgram(rest, /*strict=*/true, options, prefix)) {
        prefix.format = LineFormat::kJournalMonotonic;
      } else {
        prefix.format = LineFormat::kDmesg;
        prefix.message = rest;
      }
      return true;
    }
    if (Consume(rest, re.delta, &number)) {
      prefix.format = LineFormat::kDmesgDelta;
      prefix.delta_seconds = ParseDouble(View(number));
      prefix.message = rest;
      return true;
    }
    Piece month_name, day, hour, minute, second, year;
    if (Consume(rest, re.bracket_date, &month_name, &day, &hour, &minute, &second, &year)) {
      auto month = MonthFromName(View(month_name));
      if (!month) return false;
      bool complete = !year.empty() && !second.empty();
      int civil_year = !year.empty() ? ParseInt<int>(View(year)).value_or(1970)
                                     : options.year.value_or(InferYear(*month, ToUnsigned(day), options.reference_time));
      CivilTime civil = MakeCivil(civil_year, *month, ToUnsigned(day), ToUnsigned(hour), ToUnsigned(minute),
                                  ToUnsigned(second), 0);
      prefix.format = complete ? LineFormat::kDmesgCtime : LineFormat::kDmesgMinute;
      prefix.time = CivilToWallTime(civil, options.utc_offset_minutes);
      prefix.time_estimated = !complete;
      prefix.message = rest;
      return true;
    }
    return ParseFabricManager(text, options, prefix);
  }

  Piece month_name, day, hour, minute, second, fraction, year;
  if (ConsumeFast(rest, options, FastSyslogDate, re.syslog_date, &month_name, &day, &hour, &minute, &second, &fraction,
                  &year)) {
    // A log's lines share their second, a storm's by the hundred: the date's text read last is not read again.
    struct DateMemo {
      std::string text;
      std::optional<int> year_option;
      WallTime reference{};
      int utc_offset = 0;
      bool month_known = false;
      std::optional<WallTime> time;
    };
    thread_local DateMemo memo;
    const char* end = second.data() + second.size();
    for (const Piece* piece : {&fraction, &year}) {
      if (!piece->empty()) end = std::max(end, piece->data() + piece->size());
    }
    const std::string_view text_read(month_name.data(), static_cast<size_t>(end - month_name.data()));
    if (memo.text != text_read || memo.year_option != options.year || memo.reference != options.reference_time ||
        memo.utc_offset != options.utc_offset_minutes) {
      memo.text.assign(text_read);
      memo.year_option = options.year;
      memo.reference = options.reference_time;
      memo.utc_offset = options.utc_offset_minutes;
      auto month = MonthFromName(View(month_name));
      memo.month_known = month.has_value();
      memo.time.reset();
      if (month) {
        int civil_year = !year.empty()
                             ? ParseInt<int>(View(year)).value_or(1970)
                             : options.year.value_or(InferYear(*month, ToUnsigned(day), options.reference_time));
        CivilTime civil = MakeCivil(civil_year, *month, ToUnsigned(day), ToUnsigned(hour), ToUnsigned(minute),
                                    ToUnsigned(second), FractionToNanos(fraction));
        memo.time = CivilToWallTime(civil, options.utc_offset_minutes);
      }
    }
    if (!memo.month_known) return false;
    bool year_given = !year.empty() || options.year.has_value();
    prefix.format = LineFormat::kSyslog;
    prefix.time = memo.time;
    prefix.time_estimated = !year_given;
    if (!TakeHostProgram(rest, /*strict=*/false, options, prefix)) prefix.message = rest;
    return true;
  }
  if (first >= 'a' && first <= 'z') return ParseTalos(text, prefix) || ParseDmesgDecoded(text, options, prefix);
  if (first == 'M') return ParseBroadcastHeader(text, options, prefix);
  return false;
}

bool IsHorizontalSpace(char c) { return c == ' ' || c == '\t'; }

}  // namespace

const char* LineFormatName(LineFormat format) { return kFormatNames[static_cast<int>(format)]; }

LinePrefix ParseLinePrefix(std::string_view line, const PrefixOptions& options) {
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  LinePrefix prefix;
  std::string_view text = line;
  // The learned rare formats first; a line they do not fit goes the general way.
  if (options.learned == LineFormat::kTalos) {
    if (ParseTalos(text, prefix)) return prefix;
    prefix = LinePrefix{};
    std::string_view rest = text;
    re2::StringPiece host;
    if (Consume(rest, Patterns().collector, &host) && ParseTalos(rest, prefix)) {
      prefix.host = std::string_view(host.data(), host.size());
      return prefix;
    }
    prefix = LinePrefix{};
  } else if (options.learned == LineFormat::kFabricManager && text.starts_with('[')) {
    if (ParseFabricManager(text, options, prefix)) return prefix;
    prefix = LinePrefix{};
  }
  if (ParseTimestamped(text, options, prefix)) return prefix;

  // A collector's host in front of a timestamped line: "node17: [ 12.3] msg".
  std::string_view rest = text;
  re2::StringPiece host;
  if (Consume(rest, Patterns().collector, &host)) {
    LinePrefix inner;
    if (ParseTimestamped(rest, options, inner)) {
      if (inner.host.empty()) inner.host = std::string_view(host.data(), host.size());
      return inner;
    }
  }
  // A timestamped line embedded after free text: "Xid errors on instance: ip-1, Error: May 19 ...".
  re2::StringPiece embedded;
  for (const RE2* regex : {&Patterns().embedded_syslog, &Patterns().embedded_uptime}) {
    if (RE2::PartialMatch(text, *regex, &embedded)) {
      std::string_view from = text.substr(static_cast<size_t>(embedded.data() - text.data()));
      LinePrefix inner;
      if (ParseTimestamped(from, options, inner)) return inner;
    }
  }

  prefix = LinePrefix{};
  prefix.indented = !text.empty() && IsHorizontalSpace(text.front());
  // The kernel's tag with no date or host before it. Indented, the body of a console broadcast
  // (" kernel:[Hardware Error]: ...": its time and host are on the header line); at the line's start, a syslog
  // line whose date and host were cut away ("kernel: NVRM: ..."; with an uptime stamp after the tag it was read
  // above, as a dmesg line after free text).
  if (prefix.indented || text.starts_with("kernel:")) {
    std::string_view body = text;
    if (Consume(body, Patterns().kernel_tag)) {
      prefix.format = prefix.indented ? LineFormat::kBroadcastBody : LineFormat::kProgramTag;
      prefix.program = "kernel";
      prefix.indented = false;
      Piece uptime;
      if (Consume(body, Patterns().uptime, &uptime)) prefix.uptime_seconds = ParseDouble(View(uptime));
      prefix.message = body;
      return prefix;
    }
  }
  prefix.message = text;
  return prefix;
}

}  // namespace gpudoctor
