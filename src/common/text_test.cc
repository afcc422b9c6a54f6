#include "common/text.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

TEST(NormalizePciBusId, AcceptsEveryFormThatToolsPrint) {
  EXPECT_EQ(NormalizePciBusId("00000000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(NormalizePciBusId("0000:3b:00.0"), "0000:3b:00.0");
  EXPECT_EQ(NormalizePciBusId("PCI:0000:41:00"), "0000:41:00.0");
  EXPECT_EQ(NormalizePciBusId("3b:00.1"), "0000:3b:00.1");
  EXPECT_EQ(NormalizePciBusId(" 0001:c9:1f.7 "), "0001:c9:1f.7");
  EXPECT_EQ(NormalizePciBusId("FFFF:FF:1F.7"), "ffff:ff:1f.7");
  EXPECT_EQ(NormalizePciBusId("a:b:c.d"), std::nullopt) << "function d is beyond 7";
  EXPECT_EQ(NormalizePciBusId("a:b:c.1"), "000a:0b:0c.1");
}

TEST(NormalizePciBusId, RejectsGarbage) {
  EXPECT_EQ(NormalizePciBusId(""), std::nullopt);
  EXPECT_EQ(NormalizePciBusId("GPU-1234"), std::nullopt);
  EXPECT_EQ(NormalizePciBusId("0000:3b:00.9"), std::nullopt);
  EXPECT_EQ(NormalizePciBusId("0000:3b:40.0"), std::nullopt);
  EXPECT_EQ(NormalizePciBusId("zz:00.0"), std::nullopt);
  EXPECT_EQ(NormalizePciBusId("1:2:3:4"), std::nullopt);
  EXPECT_EQ(NormalizePciBusId("0000:3b:00.0:"), std::nullopt);
  EXPECT_EQ(NormalizePciBusId("10000:3b:00.0"), std::nullopt);
  EXPECT_EQ(NormalizePciBusId(":3b:00.0"), std::nullopt);
  EXPECT_EQ(NormalizePciBusId("3b00.0"), std::nullopt);
  // The two fixed-width forms take a shorter path; it checks just as much.
  EXPECT_EQ(NormalizePciBusId("0000000g:3b:00.0"), std::nullopt);
  EXPECT_EQ(NormalizePciBusId("00010000:3b:00.0"), std::nullopt) << "domain beyond 16 bits";
  EXPECT_EQ(NormalizePciBusId("00000000:3b:00.8"), std::nullopt);
  EXPECT_EQ(NormalizePciBusId("0000:3b:20.0"), std::nullopt) << "device beyond 0x1f";
  EXPECT_EQ(NormalizePciBusId("0000: b:00.0"), std::nullopt);
  EXPECT_EQ(NormalizePciBusId("0000:3b:0-.0"), std::nullopt);
}

TEST(ParseDuration, UnitsAndGarbage) {
  using namespace std::chrono;
  EXPECT_EQ(ParseDuration("90s"), Duration(seconds(90)));
  EXPECT_EQ(ParseDuration("5m"), Duration(minutes(5)));
  EXPECT_EQ(ParseDuration("2h"), Duration(hours(2)));
  EXPECT_EQ(ParseDuration("250ms"), Duration(milliseconds(250)));
  EXPECT_EQ(ParseDuration("1.5"), Duration(milliseconds(1500)));
  EXPECT_EQ(ParseDuration("abc"), std::nullopt);
  EXPECT_EQ(ParseDuration("5 parsecs"), std::nullopt);
  EXPECT_EQ(ParseDuration("-3s"), std::nullopt);
}

TEST(FormatBytes, PicksTheUnitAndKeepsTheSign) {
  constexpr double kMiB = 1024.0 * 1024.0;
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(64 * 1024), "64.0 KiB");
  EXPECT_EQ(FormatBytes(1.5 * kMiB), "1.5 MiB");
  EXPECT_EQ(FormatBytes(2.0 * 1024 * kMiB), "2.0 GiB");
  EXPECT_EQ(FormatBytes(-3.0 * kMiB), "-3.0 MiB");
  EXPECT_EQ(FormatBytes(141.0 * 1024 * 1024 * kMiB), "141.0 TiB");
}

TEST(FormatIsoUtc, Milliseconds) {
  EXPECT_EQ(FormatIsoUtc(FromUnixMillis(1'700'000'000'123)), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(FormatIsoUtc(FromUnixMillis(0)), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatIsoUtc(FromUnixMillis(-1)), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(FormatIsoUtc(FromUnixMillis(7'258'118'399'999)), "2199-12-31T23:59:59.999Z");
}

// The calendar arithmetic gives what the C library's gmtime_r gives, before 1970 and after, leap days included.
TEST(FormatIsoUtc, AgreesWithGmtime) {
  std::mt19937_64 random(7);
  for (int i = 0; i < 100000; ++i) {
    // WallTime counts nanoseconds in 64 bits: about 1678 to 2262.
    const int64_t ms = static_cast<int64_t>(random() % 18'000'000'000'000ull) - 9'000'000'000'000ll;
    std::time_t seconds = static_cast<std::time_t>(ms / 1000);
    long millis = static_cast<long>(ms % 1000);
    if (millis < 0) {
      millis += 1000;
      --seconds;
    }
    std::tm tm{};
    gmtime_r(&seconds, &tm);
    char expected[64];
    std::snprintf(expected, sizeof expected, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
    ASSERT_EQ(FormatIsoUtc(FromUnixMillis(ms)), expected) << ms;
  }
  EXPECT_EQ(FormatIsoUtc(FromUnixMillis(951'782'400'000)), "2000-02-29T00:00:00.000Z");
}

// Trim drops what std::isspace calls space in the C locale, and nothing else.
TEST(Trim, DropsTheCLocalesSpacesOnly) {
  for (int byte = 0; byte < 256; ++byte) {
    const char c = static_cast<char>(byte);
    const std::string text = std::string(1, c) + "x" + std::string(1, c);
    EXPECT_EQ(Trim(text), std::isspace(byte) ? "x" : text) << byte;
  }
  EXPECT_EQ(Trim(" \t\r\n\v\f"), "");
  EXPECT_EQ(Trim("  NVRM: Xid  "), "NVRM: Xid");
}

TEST(ParseInt, StrictWholeString) {
  EXPECT_EQ(ParseInt<int>(" 42 "), 42);
  EXPECT_EQ(ParseInt<int>("42x"), std::nullopt);
  EXPECT_EQ(ParseInt<uint32_t>("ff", 16), 255u);
}

TEST(ParseDouble, PlainDecimalsReadAsStrtodReadsThem) {
  // Plain decimals take a faster path; it must give strtod's value, bit for bit.
  for (const char* text : {"0", "1000.080696", "35.563936", "0.1", "123456789.123456789", "1.", ".5",
                           "4294967295.999999", "00012.5000", "1e3", "-2.5", "+7", "0x10", "inf"}) {
    auto parsed = ParseDouble(text);
    ASSERT_TRUE(parsed) << text;
    EXPECT_EQ(*parsed, std::strtod(text, nullptr)) << text;
  }
  for (const char* text : {"", ".", "1.2.3", "12a", "..5", " "}) EXPECT_EQ(ParseDouble(text), std::nullopt) << text;
}

TEST(EqualsIgnoreCase, FoldsAsciiLettersOnly) {
  EXPECT_TRUE(EqualsIgnoreCase("Bearer", "bEARER"));
  EXPECT_TRUE(EqualsIgnoreCase("", ""));
  EXPECT_FALSE(EqualsIgnoreCase("Bearer", "Bearer "));
  EXPECT_FALSE(EqualsIgnoreCase("gzip", "x-gzip"));
}

TEST(ReplaceAll, EveryOccurrenceLeftToRight) {
  EXPECT_EQ(ReplaceAll("--gpu {gpu} and {gpu}", "{gpu}", "3"), "--gpu 3 and 3");
  EXPECT_EQ(ReplaceAll("aaa", "aa", "b"), "ba");
  EXPECT_EQ(ReplaceAll("could_not_run", "_", " "), "could not run");
  EXPECT_EQ(ReplaceAll("unchanged", "", "x"), "unchanged");
  EXPECT_EQ(ReplaceAll("", "x", "y"), "");
}

TEST(ToUpper, AsciiLetters) { EXPECT_EQ(ToUpper("faulty 2x"), "FAULTY 2X"); }

TEST(ShellQuote, AShellReadsTheSameWordsBack) {
  EXPECT_EQ(ShellQuote({"python", "train.py", "--lr=0.1"}), "python train.py --lr=0.1");
  EXPECT_EQ(ShellQuote({"echo", "my run", "it's", ""}), "echo 'my run' 'it'\\''s' ''");
  // A control character keeps the command on one line, in bash's $'...'.
  EXPECT_EQ(ShellQuote({"run", "a\nb\t'c'\x1b"}), "run $'a\\nb\\t\\'c\\'\\x1b'");
}

TEST(OneLine, NewlinesFromOutsideStayOnTheLine) {
  EXPECT_EQ(OneLine("python\nOK   all healthy\r"), "python\\nOK   all healthy\\r");
  EXPECT_EQ(OneLine("plain"), "plain");
}

}  // namespace
}  // namespace gpudoctor
