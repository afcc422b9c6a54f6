// Every real log excerpt in testdata/kernel_logs must give exactly the events
// listed in the .expected file beside it, through both the fast reader and
// the line-by-line parser.
//
// Expectation format: one line per event, in order:
//   KIND key=value key="value with spaces" ...
// Keys: severity xid pci pid process uuid serial host line time, or a detail
// field name. Of the first nine, a key left out means the event must not have
// that value; detail fields are checked only when listed.
// Set GPUDOCTOR_PRINT_EVENTS=1 to print what the parser finds in this format.
#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "common/text.h"
#include "logs/log_reader.h"
#include "logs/log_time.h"

namespace gpudoctor {
namespace {

const std::string kCorpus = std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/kernel_logs/";
const char* const kCoreKeys[] = {"severity", "xid", "pci", "pid", "process", "uuid", "serial", "host", "line"};

ReadOptions CorpusOptions(bool prefilter) {
  ReadOptions options;
  options.prefilter = prefilter;
  // Year-less dates are read as if the logs were read on this day, in UTC.
  options.parse.prefix.reference_time = *ParseTimeBound("2026-06-01T00:00:00Z", WallTime{}, 0);
  options.parse.prefix.utc_offset_minutes = 0;
  return options;
}

std::map<std::string, std::string> Describe(const LogEvent& event) {
  std::map<std::string, std::string> keys;
  keys["severity"] = EventSeverityName(event.severity);
  if (event.xid) keys["xid"] = std::to_string(*event.xid);
  if (!event.pci_bus_id.empty()) keys["pci"] = event.pci_bus_id;
  if (event.pid) keys["pid"] = std::to_string(*event.pid);
  if (!event.process.empty()) keys["process"] = event.process;
  if (!event.gpu_uuid.empty()) keys["uuid"] = event.gpu_uuid;
  if (!event.gpu_serial.empty()) keys["serial"] = event.gpu_serial;
  if (!event.host.empty()) keys["host"] = event.host;
  keys["line"] = std::to_string(event.line_number);
  if (event.time) keys["time"] = FormatIsoUtc(*event.time);
  for (const EventField& field : event.fields) keys[field.name] = field.value;
  return keys;
}

std::string Quote(const std::string& value) {
  return value.find_first_of(" \"") == std::string::npos ? value : "\"" + value + "\"";
}

std::string FormatExpectation(const LogEvent& event) {
  std::string out = event.kind;
  auto keys = Describe(event);
  for (const char* key : kCoreKeys) {
    if (keys.count(key)) out += std::string(" ") + key + "=" + Quote(keys[key]);
  }
  if (keys.count("time")) out += " time=" + keys["time"];
  for (const EventField& field : event.fields) out += " " + field.name + "=" + Quote(field.value);
  return out;
}

struct Expectation {
  std::string kind;
  std::vector<std::pair<std::string, std::string>> keys;
};

std::vector<Expectation> LoadExpectations(const std::string& path) {
  std::vector<Expectation> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::string_view text = Trim(line);
    if (text.empty() || text.front() == '#') continue;
    Expectation expectation;
    size_t i = 0;
    auto next_token = [&]() {
      while (i < text.size() && text[i] == ' ') ++i;
      std::string token;
      bool quoted = false;
      while (i < text.size() && (quoted || text[i] != ' ')) {
        if (text[i] == '"') {
          quoted = !quoted;
        } else {
          token.push_back(text[i]);
        }
        ++i;
      }
      return token;
    };
    expectation.kind = next_token();
    for (std::string token = next_token(); !token.empty(); token = next_token()) {
      size_t equals = token.find('=');
      expectation.keys.emplace_back(token.substr(0, equals), equals == std::string::npos ? "" : token.substr(equals + 1));
    }
    out.push_back(std::move(expectation));
  }
  return out;
}

std::vector<std::string> CorpusFiles() {
  std::vector<std::string> names;
  if (DIR* dir = opendir(kCorpus.c_str())) {
    while (dirent* entry = readdir(dir)) {
      std::string name = entry->d_name;
      if (EndsWith(name, ".log") || EndsWith(name, ".log.gz")) names.push_back(name);
    }
    closedir(dir);
  }
  std::sort(names.begin(), names.end());
  return names;
}

class CorpusTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CorpusTest, GivesExactlyTheExpectedEvents) {
  const std::string path = kCorpus + GetParam();
  auto fast = ReadLogFile(path, CorpusOptions(true));
  ASSERT_TRUE(fast) << fast.error().message;
  EXPECT_EQ(fast->stats.error, "");
  if (std::getenv("GPUDOCTOR_PRINT_EVENTS")) {
    std::cout << "== " << GetParam() << "\n";
    for (const LogEvent& event : fast->events) std::cout << FormatExpectation(event) << "\n";
  }
  std::string base = path.substr(0, path.find(".log"));
  std::vector<Expectation> expected = LoadExpectations(base + ".expected");
  ASSERT_FALSE(expected.empty()) << "no expectations in " << base << ".expected";
  ASSERT_EQ(fast->events.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const LogEvent& event = fast->events[i];
    SCOPED_TRACE("event " + std::to_string(i + 1) + ": " + FormatExpectation(event));
    EXPECT_EQ(event.kind, expected[i].kind);
    auto actual = Describe(event);
    for (const auto& [key, value] : expected[i].keys) {
      EXPECT_EQ(actual.count(key) ? actual[key] : "<absent>", value) << key;
    }
    for (const char* key : kCoreKeys) {
      bool listed = std::any_of(expected[i].keys.begin(), expected[i].keys.end(),
                                [&](const auto& entry) { return entry.first == key; });
      if (!listed) {
        EXPECT_EQ(actual.count(key), 0u) << key << " is " << actual[key] << " but not expected";
      }
    }
  }

  // The fast path parses only candidate lines; it must agree with parsing every line.
  auto slow = ReadLogFile(path, CorpusOptions(false));
  ASSERT_TRUE(slow);
  ASSERT_EQ(slow->events.size(), fast->events.size());
  for (size_t i = 0; i < slow->events.size(); ++i) {
    EXPECT_EQ(FormatExpectation(slow->events[i]), FormatExpectation(fast->events[i]));
    EXPECT_EQ(slow->events[i].raw, fast->events[i].raw);
    EXPECT_EQ(slow->events[i].message, fast->events[i].message);
  }
}

INSTANTIATE_TEST_SUITE_P(KernelLogs, CorpusTest, ::testing::ValuesIn(CorpusFiles()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(0, info.param.find('.'));
                           std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return "file_" + name;
                         });

}  // namespace
}  // namespace gpudoctor
