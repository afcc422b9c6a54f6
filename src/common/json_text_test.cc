#include "common/json_text.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
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
