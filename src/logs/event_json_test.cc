#include "logs/event_json.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <random>

#include "logs/log_reader.h"

namespace gpudoctor {
namespace {

std::string Slow(const LogEvent& event) { return JsonLine(LogEventToJson(event)); }

std::string Fast(const LogEvent& event) {
  std::string out;
  AppendLogEventJsonLine(out, event);
  return out;
}

TEST(EventJson, TheDirectWriterMatchesTheJsonObjectOnEveryCorpusEvent) {
  size_t events = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/kernel_logs")) {
    auto contents = ReadLogFile(entry.path().string());
    ASSERT_TRUE(contents) << entry.path();
    for (const LogEvent& event : contents->events) {
      ASSERT_EQ(Fast(event), Slow(event)) << entry.path();
      ++events;
    }
  }
  EXPECT_GT(events, 100u);
}

TEST(EventJson, TheDirectWriterEscapesAndReplacesAsTheJsonObjectDoes) {
  LogEvent event;
  event.kind = "xid";
  event.xid = 79;
  event.pid = 0;
  event.uptime_seconds = 5.0;  // nlohmann writes 5.0
  event.time = WallTime{std::chrono::milliseconds(1'700'000'000'123)};
  event.message = std::string("quote \" backslash \\ tab \t nl \n cr \r bs \b ff \f nul ") + '\0' + " \x01\x1f\x7f /";
  event.raw = "caf\xc3\xa9 \xff\xfe broken \xe2\x82 utf-8";
  event.fields = {{"a", "1"}, {"b", "2"}, {"a", "3"}, {"\xc3\xa9", "\x80"}};
  event.host = "h\"ost";
  EXPECT_EQ(Fast(event), Slow(event));

  std::mt19937 random(11);
  for (int round = 0; round < 2000; ++round) {
    LogEvent noisy;
    noisy.kind = "pcie_aer";
    std::string text(std::uniform_int_distribution<size_t>(0, 40)(random), '\0');
    for (char& c : text) c = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(random));
    noisy.message = text;
    noisy.detail = text.substr(0, text.size() / 2);
    noisy.fields = {{text.substr(0, 3), text}};
    noisy.uptime_seconds = std::uniform_real_distribution<double>(0, 1e7)(random);
    ASSERT_EQ(Fast(noisy), Slow(noisy)) << round;
  }
}

}  // namespace
}  // namespace gpudoctor
