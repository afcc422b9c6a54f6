// Civil-time helpers for log timestamps: month names in many locales, civil
// time to UTC, year inference for year-less syslog dates, and the time bounds
// the command line accepts.
//
//   MonthFromName("kwi") == 4;  MonthFromName("4月") == 4;  MonthFromName("Feb") == 2
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/clock.h"

namespace gpudoctor {

// 1..12 for a month abbreviation or name in English or a common locale
// (de, fr, es, it, pt, nl, pl, cs, sv, ru, tr, zh/ja "4月", ko "4월"),
// case-insensitive, with or without a trailing dot. nullopt otherwise.
std::optional<unsigned> MonthFromName(std::string_view token);

struct CivilTime {
  int year = 1970;
  unsigned month = 1;  // 1..12
  unsigned day = 1;    // 1..31
  unsigned hour = 0, minute = 0, second = 0;
  uint32_t nanosecond = 0;
};

// The instant `civil` names in a zone `utc_offset_minutes` east of UTC;
// nullopt for impossible dates (Feb 30, hour 25) and for years outside
// [kMinYear, kMaxYear], which WallTime cannot hold or no log means.
inline constexpr int kMinYear = 1900;
inline constexpr int kMaxYear = 2200;
std::optional<WallTime> CivilToWallTime(const CivilTime& civil, int utc_offset_minutes);

// The year of a year-less date: the reference's year, or the one before when
// that would put the date more than a day after the reference (a December
// line read in January).
int InferYear(unsigned month, unsigned day, WallTime reference);

// A --since/--until bound: "2024-05-01", "2024-05-01T12:00:00Z",
// "2024-05-01 12:00:00+02:00", or a duration before `now` ("2h", "30m").
// Times without an offset are read in `utc_offset_minutes`.
std::optional<WallTime> ParseTimeBound(std::string_view text, WallTime now, int utc_offset_minutes);

// The offset from UTC of this machine's local time now, in minutes.
int LocalUtcOffsetMinutes(WallTime at);

}  // namespace gpudoctor
