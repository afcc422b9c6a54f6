// Fuzz targets for the log engine (libFuzzer).
//
// Two targets in one file:
//   the line parser: the input is one log line, matched by every catalog
//                    pattern through PCRE2 and through RE2 (which must
//                    agree), its prefix read both by the hand-written
//                    matchers and by the regexes (which must agree), parsed alone and as part of a text, its events
//                    turned into JSON (object and direct writer, which must
//                    agree) and grouped;
//   the file reader: the input is a log file, read in pieces of several sizes
//                    through the fast scanner and the full parser (which must
//                    agree), and once more through the gzip decoder.
// Built plainly, each input goes to both; -DGPUDOCTOR_FUZZ_LINE_PARSER or
// -DGPUDOCTOR_FUZZ_FILE_READER builds a binary for one of them. Neither may
// crash, hang, or break the reader's invariants.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "logs/byte_source.h"
#include "logs/catalog.h"
#include "logs/event_json.h"
#include "logs/field_regex.h"
#include "logs/incidents.h"
#include "logs/line_prefix.h"
#include "logs/log_parser.h"
#include "logs/log_reader.h"
#include "logs/pattern_databases.h"

namespace {

using namespace gpudoctor;

void Check(bool condition) {
  if (!condition) std::abort();
}

#if !defined(GPUDOCTOR_FUZZ_LINE_PARSER) && !defined(GPUDOCTOR_FUZZ_FILE_READER)
#define GPUDOCTOR_FUZZ_LINE_PARSER
#define GPUDOCTOR_FUZZ_FILE_READER
#endif

#if defined(GPUDOCTOR_FUZZ_LINE_PARSER)

// PCRE2's fast path must give RE2's answer for every catalog pattern (logs/field_regex.h).
void CompareRegexEngines(std::string_view input) {
  static const std::vector<std::unique_ptr<FieldRegex>> regexes = [] {
    std::vector<std::unique_ptr<FieldRegex>> compiled;
    for (const PatternSpec& pattern : LogCatalog::Builtin().patterns()) {
      compiled.push_back(std::move(FieldRegex::Compile(pattern.regex)).value());
    }
    for (const IdentitySpec& identity : kIdentitySpecs) {
      compiled.push_back(std::move(FieldRegex::Compile(identity.regex)).value());
    }
    return compiled;
  }();
  static FieldRegex::Buffers buffers;
  std::vector<EventField> fast, exact;
  for (const auto& regex : regexes) {
    const bool fast_matched = regex->Match(input, buffers, fast);
    Check(fast_matched == regex->Match(input, buffers, exact, FieldRegex::Engine::kRe2Only));
    Check(!fast_matched || fast == exact);
  }
}

void FuzzLine(std::string_view input) {
  CompareRegexEngines(input);
  ParseOptions options;
  options.prefix.reference_time = WallTime{std::chrono::seconds{1'750'000'000}};
  // The hand-written prefix matchers must agree with their regexes.
  PrefixOptions regex_only = options.prefix;
  regex_only.regex_only = true;
  Check(ParseLinePrefix(input, options.prefix) == ParseLinePrefix(input, regex_only));
  for (const LogEvent& event : ParseLine(input, options)) {
    Check(!event.kind.empty());
    const std::string line = JsonLine(LogEventToJson(event));
    Check(!line.empty());
    std::string direct;  // what `logs --json` writes must be the same bytes
    AppendLogEventJsonLine(direct, event);
    Check(direct == line);
  }
  auto events = ParseText(input, options);
  for (const Incident& incident : GroupIncidents(events)) Check(incident.event_count > 0);
}

#endif

#if defined(GPUDOCTOR_FUZZ_FILE_READER)

// `read_ahead_after`: bytes read on the calling thread before reading ahead starts; nullopt: never.
ReadStats Scan(const std::string& data, size_t piece, bool prefilter, size_t* events,
               std::optional<uint64_t> read_ahead_after = std::nullopt) {
  MemoryByteSource source(data, "fuzz", piece);
  ReadOptions options;
  options.prefilter = prefilter;
  options.read_ahead = read_ahead_after.has_value();
  options.read_ahead_after = read_ahead_after.value_or(0);
  options.max_line_bytes = 512;  // small, so that over-long lines are exercised
  options.parse.prefix.reference_time = WallTime{std::chrono::seconds{1'750'000'000}};
  LogScanner scanner(options);
  *events = 0;
  ReadAll(source, scanner, [&](LogEvent&&) { ++*events; });
  return scanner.stats();
}

void FuzzFile(std::string_view input) {
  std::string data(input);
  size_t whole_events = 0;
  ReadStats whole = Scan(data, SIZE_MAX, true, &whole_events);
  Check(whole.bytes == data.size());
  // The fast path and the full parse agree, however the input is split.
  size_t events = 0;
  ReadStats full = Scan(data, 7, false, &events);
  Check(events == whole_events);
  Check(full.lines == whole.lines);
  Scan(data, 1, true, &events);
  Check(events == whole_events);
  // Reading ahead on worker threads, from anywhere in the input, changes nothing: every count is that of the
  // same reads on one thread (how many lines are parsed in full depends on where reads cut the input).
  size_t here_events = 0;
  ReadStats here = Scan(data, 13, true, &here_events);
  ReadStats ahead = Scan(data, 13, true, &events, data.size() / 2);
  Check(events == here_events && events == whole_events);
  Check(ahead == here);
  // The same bytes as a (probably invalid) gzip stream: any error is reported, never fatal.
  auto gzip = DecompressIfGzip(std::make_unique<MemoryByteSource>("\x1f\x8b" + data, "fuzz.gz"));
  if (gzip) {
    LogScanner scanner(ReadOptions{});
    ReadAll(**gzip, scanner, [](LogEvent&&) {});
  }
}

#endif

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
#if defined(GPUDOCTOR_FUZZ_LINE_PARSER)
  FuzzLine(input);
#endif
#if defined(GPUDOCTOR_FUZZ_FILE_READER)
  FuzzFile(input);
#endif
  return 0;
}
