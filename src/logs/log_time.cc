#include "logs/log_time.h"

#include <array>
#include <cctype>
#include <ctime>
#include <iterator>
#include <string>

#include <re2/re2.h>

#include "common/text.h"

namespace gpudoctor {

namespace {

struct MonthName {
  std::string_view name;  // lower case, no trailing dot
  unsigned month;
};

// Abbreviations (and a few full names) that `date`, syslog and journalctl
// print in common locales. Names shared by several languages mean the same
// month in each, so one table serves all.
constexpr std::array kMonthNames = std::to_array<MonthName>({
    // English
    {"jan", 1}, {"feb", 2}, {"mar", 3}, {"apr", 4}, {"may", 5}, {"jun", 6},
    {"jul", 7}, {"aug", 8}, {"sep", 9}, {"sept", 9}, {"oct", 10}, {"nov", 11}, {"dec", 12},
    // German
    {"jän", 1}, {"mär", 3}, {"mrz", 3}, {"mai", 5}, {"okt", 10}, {"dez", 12},
    // French
    {"janv", 1}, {"févr", 2}, {"fevr", 2}, {"fév", 2}, {"mars", 3}, {"avr", 4}, {"juin", 6},
    {"juil", 7}, {"août", 8}, {"aout", 8}, {"déc", 12},
    // Spanish, Italian, Portuguese
    {"ene", 1}, {"abr", 4}, {"ago", 8}, {"dic", 12}, {"gen", 1}, {"mag", 5}, {"giu", 6},
    {"lug", 7}, {"set", 9}, {"ott", 10}, {"fev", 2}, {"out", 10},
    // Dutch, Swedish
    {"mrt", 3}, {"mei", 5}, {"maj", 5},
    // Polish
    {"sty", 1}, {"lut", 2}, {"kwi", 4}, {"cze", 6}, {"lip", 7}, {"sie", 8}, {"wrz", 9},
    {"paź", 10}, {"lis", 11}, {"gru", 12},
    // Czech
    {"led", 1}, {"úno", 2}, {"bře", 3}, {"dub", 4}, {"kvě", 5}, {"čvn", 6}, {"čvc", 7},
    {"srp", 8}, {"zář", 9}, {"říj", 10}, {"pro", 12},
    // Russian
    {"янв", 1}, {"фев", 2}, {"мар", 3}, {"апр", 4}, {"мая", 5}, {"май", 5}, {"июн", 6},
    {"июл", 7}, {"авг", 8}, {"сен", 9}, {"окт", 10}, {"ноя", 11}, {"дек", 12},
    // Turkish
    {"oca", 1}, {"şub", 2}, {"nis", 4}, {"haz", 6}, {"tem", 7}, {"ağu", 8}, {"eyl", 9},
    {"eki", 10}, {"kas", 11}, {"ara", 12},
});

// Lower-cases ASCII and the two-byte Latin and Cyrillic capitals used above.
std::string FoldCase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(std::tolower(c)));
      continue;
    }
    if (i + 1 < text.size()) {
      unsigned char next = static_cast<unsigned char>(text[i + 1]);
      if (c == 0xd0 && next >= 0x90 && next <= 0x9f) {  // А..П -> а..п
        out.push_back(static_cast<char>(0xd0));
        out.push_back(static_cast<char>(next + 0x20));
        ++i;
        continue;
      }
      if (c == 0xd0 && next >= 0xa0 && next <= 0xaf) {  // Р..Я -> р..я
        out.push_back(static_cast<char>(0xd1));
        out.push_back(static_cast<char>(next - 0x20));
        ++i;
        continue;
      }
      if (c == 0xc3 && next >= 0x80 && next <= 0x9e && next != 0x97) {  // À..Þ -> à..þ
        out.push_back(static_cast<char>(0xc3));
        out.push_back(static_cast<char>(next + 0x20));
        ++i;
        continue;
      }
    }
    out.push_back(static_cast<char>(c));
  }
  return out;
}

}  // namespace

std::optional<unsigned> MonthFromName(std::string_view token) {
  if (!token.empty() && token.back() == '.') token.remove_suffix(1);
  if (token.empty() || token.size() > 12) return std::nullopt;
  // "4月" (Chinese, Japanese) and "4월" (Korean).
  for (std::string_view suffix : {std::string_view("月"), std::string_view("월")}) {
    if (EndsWith(token, suffix)) {
      auto month = ParseInt<unsigned>(token.substr(0, token.size() - suffix.size()));
      if (month && *month >= 1 && *month <= 12) return month;
      return std::nullopt;
    }
  }
  // Nearly every log writes the English abbreviation as is ("Mar"): found without folding a copy.
  if (token.size() == 3) {
    static constexpr std::string_view kEnglish[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    for (unsigned month = 0; month < std::size(kEnglish); ++month) {
      if (token == kEnglish[month]) return month + 1;
    }
  }
  std::string folded = FoldCase(token);
  for (const MonthName& entry : kMonthNames) {
    if (entry.name == folded) return entry.month;
  }
  return std::nullopt;
}

std::optional<WallTime> CivilToWallTime(const CivilTime& civil, int utc_offset_minutes) {
  using namespace std::chrono;
  // WallTime counts nanoseconds in 64 bits, about 292 years either side of
  // 1970; a year a log cannot mean (a garbled or mistyped stamp) has no time.
  if (civil.year < kMinYear || civil.year > kMaxYear) return std::nullopt;
  year_month_day date{year{civil.year}, month{civil.month}, day{civil.day}};
  if (!date.ok() || civil.hour > 23 || civil.minute > 59 || civil.second > 60 || civil.nanosecond >= 1'000'000'000) {
    return std::nullopt;
  }
  auto time = sys_days{date} + hours{civil.hour} + minutes{civil.minute} + seconds{civil.second} +
              nanoseconds{civil.nanosecond} - minutes{utc_offset_minutes};
  return time_point_cast<WallTime::duration>(time);
}

int InferYear(unsigned month, unsigned day, WallTime reference) {
  using namespace std::chrono;
  year_month_day today{floor<days>(reference)};
  int year_now = static_cast<int>(today.year());
  CivilTime civil{year_now, month, day};
  auto candidate = CivilToWallTime(civil, 0);
  if (!candidate && month == 2 && day == 29) return year_now;  // leap day: keep this year's number
  if (candidate && *candidate > reference + hours{24}) return year_now - 1;
  return year_now;
}

std::optional<WallTime> ParseTimeBound(std::string_view text, WallTime now, int utc_offset_minutes) {
  text = Trim(text);
  if (text.empty()) return std::nullopt;
  if (auto ago = ParseDuration(StartsWith(text, "-") ? text.substr(1) : text)) {
    return now - std::chrono::duration_cast<WallTime::duration>(*ago);
  }
  static const RE2 kIso(
      R"(^(\d{4})-(\d\d)-(\d\d)(?:[T ](\d\d):(\d\d)(?::(\d\d)(?:[.,](\d{1,9}))?)?)?\s*(Z|[+-]\d\d:?\d\d)?$)");
  std::string year, month, day, hour, minute, second, fraction, zone;
  if (!RE2::FullMatch(text, kIso, &year, &month, &day, &hour, &minute, &second, &fraction, &zone)) {
    return std::nullopt;
  }
  CivilTime civil;
  civil.year = ParseInt<int>(year).value_or(0);
  civil.month = ParseInt<unsigned>(month).value_or(0);
  civil.day = ParseInt<unsigned>(day).value_or(0);
  civil.hour = ParseInt<unsigned>(hour).value_or(0);
  civil.minute = ParseInt<unsigned>(minute).value_or(0);
  civil.second = ParseInt<unsigned>(second).value_or(0);
  if (!fraction.empty()) {
    fraction.resize(9, '0');
    civil.nanosecond = ParseInt<uint32_t>(fraction).value_or(0);
  }
  int offset = utc_offset_minutes;
  if (zone == "Z") {
    offset = 0;
  } else if (!zone.empty()) {
    std::string digits;
    for (char c : zone) {
      if (std::isdigit(static_cast<unsigned char>(c))) digits.push_back(c);
    }
    int hours_part = ParseInt<int>(digits.substr(0, 2)).value_or(0);
    int minutes_part = ParseInt<int>(digits.substr(2, 2)).value_or(0);
    offset = (zone[0] == '-' ? -1 : 1) * (hours_part * 60 + minutes_part);
  }
  return CivilToWallTime(civil, offset);
}

int LocalUtcOffsetMinutes(WallTime at) {
  std::time_t seconds = std::chrono::system_clock::to_time_t(at);
  std::tm local{};
  localtime_r(&seconds, &local);
  return static_cast<int>(local.tm_gmtoff / 60);
}

}  // namespace gpudoctor
