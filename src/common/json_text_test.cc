#include "common/json_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

namespace gpudoctor {
namespace {

TEST(ToJsonText, ReplacesBytesThatAreNotUtf8) {
  const nlohmann::json value = {{"line", "NVRM: Xid 79 \xff\xfe on \xc3"}, {"ok", "caf\xc3\xa9"}};
  const std::string text = ToJsonText(value);
  EXPECT_EQ(text, "{\"line\":\"NVRM: Xid 79 \xef\xbf\xbd\xef\xbf\xbd on \xef\xbf\xbd\",\"ok\":\"caf\xc3\xa9\"}");
  // What comes out parses again.
  EXPECT_FALSE(nlohmann::json::parse(text, nullptr, false).is_discarded());
  nlohmann::ordered_json ordered;
  ordered["b"] = "\x80";
  ordered["a"] = 1;
  EXPECT_EQ(ToJsonText(ordered, 1), "{\n \"b\": \"\xef\xbf\xbd\",\n \"a\": 1\n}");
}

TEST(ToJsonText, ControlCharactersAreEscaped) {
  EXPECT_EQ(ToJsonText(nlohmann::json("\x1b[2J\r\n")), "\"\\u001b[2J\\r\\n\"");
}

TEST(AppendJsonNumber, WritesWhatToJsonTextWrites) {
  std::vector<double> values = {0.0, -0.0, 5.0, 1039.756478, 0.000316, 1e-05, 123456789.123456, 1e16, 1e300,
                                -2.5, 0.1, 1.0 / 3, 4294967295.0, 9007199254740993.0};
  // Kernel uptimes as the logs print them: six decimals.
  std::mt19937_64 random(42);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t micros = random() % 100'000'000'000'000ull;
    values.push_back(static_cast<double>(micros / 1'000'000) + static_cast<double>(micros % 1'000'000) / 1e6);
    uint64_t bits = random();
    double any;
    std::memcpy(&any, &bits, sizeof any);
    values.push_back(any);
  }
  for (double value : values) {
    std::string out = "x";
    AppendJsonNumber(out, value);
    EXPECT_EQ(out, "x" + ToJsonText(nlohmann::json(value))) << value;
  }
  for (double odd : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
    std::string out;
    AppendJsonNumber(out, odd);
    EXPECT_EQ(out, ToJsonText(nlohmann::json(odd)));
    EXPECT_EQ(out, "null");
  }
}

// Every JSON gpudoctor writes goes through ToJsonText: a plain dump() throws
// on the first byte that is not UTF-8 and loses the whole answer.
TEST(ToJsonText, IsTheOnlyWayJsonBecomesText) {
  const std::filesystem::path root = std::filesystem::path(GPUDOCTOR_SOURCE_DIR);
  const std::regex dump(R"(\.dump\s*\()");
  std::vector<std::string> offenders;
  for (const char* folder : {"src", "testing", "fuzz", "bench"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / folder)) {
      const std::string path = entry.path().string();
      if (!entry.is_regular_file() || path.ends_with("_test.cc") || path.ends_with("common/json_text.cc")) continue;
      if (!path.ends_with(".cc") && !path.ends_with(".h")) continue;
      std::ifstream file(entry.path());
      std::string line;
      for (int number = 1; std::getline(file, line); ++number) {
        if (std::regex_search(line, dump))
          offenders.push_back(std::filesystem::relative(entry.path(), root).string() + ":" + std::to_string(number));
      }
    }
  }
  EXPECT_TRUE(offenders.empty()) << "use ToJsonText (common/json_text.h) instead of dump() at:\n"
                                 << ::testing::PrintToString(offenders);
}

}  // namespace
}  // namespace gpudoctor
