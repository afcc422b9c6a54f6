#include "cli/time_option.h"

#include <time.h>

#include <cctype>
#include <cstdio>
#include <ctime>
#include <string>

#include "common/text.h"

namespace gpudoctor {

std::optional<WallTime> ParseWhen(std::string_view text, WallTime now) {
  text = Trim(text);
  if (text == "now") return now;
  if (auto ago = ParseDuration(text)) return now - *ago;
  std::string copy(text);
  std::tm tm{};
  int consumed = 0;
  double seconds = 0;
  if (std::sscanf(copy.c_str(), "%4d-%2d-%2d%*[T ]%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &consumed) < 5) {
    if (std::sscanf(copy.c_str(), "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &consumed) < 3)
      return std::nullopt;
  }
  std::string_view rest = std::string_view(copy).substr(static_cast<size_t>(consumed));
  if (!rest.empty() && rest.front() == ':') {
    size_t end = 1;
    while (end < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[end])) || rest[end] == '.')) ++end;
    auto parsed = ParseDouble(rest.substr(1, end - 1));
    if (!parsed || *parsed < 0 || *parsed >= 61) return std::nullopt;
    seconds = *parsed;
    rest.remove_prefix(end);
  }
  if (rest != "" && rest != "Z" && rest != "z") return std::nullopt;
  if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59)
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const time_t whole = timegm(&tm);
  return WallTime{std::chrono::seconds{whole}} +
         std::chrono::duration_cast<WallTime::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace gpudoctor
