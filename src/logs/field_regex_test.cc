#include "logs/field_regex.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "logs/catalog.h"
#include "logs/line_prefix.h"
#include "logs/pattern_databases.h"

namespace gpudoctor {
namespace {

using ::testing::ElementsAre;

std::unique_ptr<FieldRegex> MustCompile(std::string_view source) {
  auto regex = FieldRegex::Compile(source);
  EXPECT_TRUE(regex) << source;
  return regex ? std::move(regex).value() : nullptr;
}

// Every line of the project's real kernel logs and captures, and every format string the driver prints.
std::vector<std::string> RealLines() {
  const std::filesystem::path root = std::filesystem::path(GPUDOCTOR_SOURCE_DIR) / "testdata";
  std::vector<std::string> lines;
  for (const char* folder : {"kernel_logs", "captures", "bug_report", "driver_messages"}) {
    if (!std::filesystem::exists(root / folder)) continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / folder)) {
      if (!entry.is_regular_file() || entry.path().extension() == ".gz") continue;
      std::ifstream file(entry.path(), std::ios::binary);
      for (std::string line; std::getline(file, line);) {
        if (folder == std::string_view("driver_messages")) {
          // Its format column, and the whole row: the tabs and printf directives make odd lines.
          const auto tabs = std::count(line.begin(), line.end(), '\t');
          if (tabs >= 5) {
            size_t at = 0;
            for (int i = 0; i < 5; ++i) at = line.find('\t', at) + 1;
            lines.push_back("NVRM: " + line.substr(at, line.find('\t', at) - at));
          }
        }
        // The message as the parser hands it over (patterns anchored at "^" see only that), and the raw line.
        std::string message(ParseLinePrefix(line, PrefixOptions{}).message);
        if (message != line) lines.push_back(std::move(message));
        lines.push_back(std::move(line));
      }
    }
  }
  return lines;
}

TEST(FieldRegex, BothEnginesGiveTheSameFieldsForEveryCatalogPatternOnRealLines) {
  std::vector<std::string> sources;
  for (const PatternSpec& pattern : LogCatalog::Builtin().patterns()) sources.push_back(pattern.regex);
  for (const IdentitySpec& identity : kIdentitySpecs) sources.push_back(identity.regex);
  const std::vector<std::string> lines = RealLines();
  ASSERT_GT(lines.size(), 10000u);

  FieldRegex::Buffers buffers;
  size_t accelerated = 0, matches = 0;
  for (const std::string& source : sources) {
    auto regex = MustCompile(source);
    ASSERT_TRUE(regex);
    accelerated += regex->accelerated();
    for (const std::string& line : lines) {
      std::vector<EventField> fast, exact;
      const bool fast_matched = regex->Match(line, buffers, fast);
      const bool exact_matched = regex->Match(line, buffers, exact, FieldRegex::Engine::kRe2Only);
      ASSERT_EQ(fast_matched, exact_matched) << source << "\non: " << line;
      if (!exact_matched) continue;
      ++matches;
      ASSERT_EQ(fast, exact) << source << "\non: " << line;
    }
  }
  EXPECT_EQ(accelerated, sources.size()) << "every built-in pattern should have PCRE2's fast path";
  EXPECT_GT(matches, 500u);
  std::printf("%zu lines, %zu patterns, %zu matches compared\n", lines.size(), sources.size(), matches);
}

TEST(FieldRegex, ExtractsNamedGroupsTrimmedAndLeavesOutUnknownValues) {
  auto regex = MustCompile(R"(Xid \((?P<pci>[^)]*)\): (?P<xid>\d+)(?:, pid=(?P<pid>[^,]*))?(?:, name=(?P<name>[^,]*))?)");
  ASSERT_TRUE(regex->accelerated());
  FieldRegex::Buffers buffers;
  std::vector<EventField> fields;
  ASSERT_TRUE(regex->Match("NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name= python3 , x", buffers, fields));
  EXPECT_THAT(fields, ElementsAre(EventField{"pci", "PCI:0000:3b:00"}, EventField{"xid", "79"},
                                  EventField{"name", "python3"}));
  EXPECT_FALSE(regex->Match("NVRM: Xid (PCI:0000:3b:00) 79", buffers, fields));
}

TEST(FieldRegex, AVerticalTabIsReadAsRe2ReadsIt) {
  // PCRE2's \s takes a vertical tab, RE2's does not: such a line is RE2's.
  auto regex = MustCompile(R"(task (?P<name>\S+)\s+blocked)");
  FieldRegex::Buffers buffers;
  std::vector<EventField> fields;
  EXPECT_FALSE(regex->Match("task python3\vblocked", buffers, fields));
  EXPECT_TRUE(regex->Match("task python3 \t blocked", buffers, fields));
  EXPECT_THAT(fields, ElementsAre(EventField{"name", "python3"}));
}

TEST(FieldRegex, BytesThatAreNotUtf8MatchAsBytes) {
  auto regex = MustCompile(R"(name=(?P<process>[^,]*),)");
  FieldRegex::Buffers buffers;
  const std::string line = "name=py\xff\xfe" "thon,";
  for (auto engine : {FieldRegex::Engine::kFastest, FieldRegex::Engine::kRe2Only}) {
    std::vector<EventField> fields;
    ASSERT_TRUE(regex->Match(line, buffers, fields, engine));
    EXPECT_THAT(fields, ElementsAre(EventField{"process", "py\xff\xfethon"}));
  }
}

TEST(FieldRegex, AHostileLineThatExhaustsThePcre2BudgetIsAnsweredByRe2) {
  // Nested quantifiers: a backtracking engine tries 2^n ways to fail on this line.
  auto regex = MustCompile(R"(^(?P<run>(?:a+)+)$)");
  ASSERT_TRUE(regex->accelerated());
  FieldRegex::Buffers buffers;
  std::vector<EventField> fields;
  const std::string hostile = std::string(40, 'a') + "b";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(regex->Match(hostile, buffers, fields));
  // Not a timing test: 2^40 steps would take hours, the budget stops it within milliseconds.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  ASSERT_TRUE(regex->Match(std::string(40, 'a'), buffers, fields));
  EXPECT_THAT(fields, ElementsAre(EventField{"run", std::string(40, 'a')}));
}

TEST(FieldRegex, APatternOutsideAsciiIsRe2sAlone) {
  auto regex = MustCompile(R"((?i)temp(?P<degrees>\d+)°C)");
  EXPECT_FALSE(regex->accelerated());
  FieldRegex::Buffers buffers;
  std::vector<EventField> fields;
  ASSERT_TRUE(regex->Match("GPU TEMP91°C", buffers, fields));
  EXPECT_THAT(fields, ElementsAre(EventField{"degrees", "91"}));
}

TEST(FieldRegex, ABadRegexIsRe2sError) {
  auto regex = FieldRegex::Compile("Xid (?P<xid>\\d+");
  ASSERT_FALSE(regex);
  EXPECT_THAT(regex.error().message, ::testing::HasSubstr("missing )"));
}

}  // namespace
}  // namespace gpudoctor
