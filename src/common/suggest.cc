#include "common/suggest.h"

#include <algorithm>
#include <cctype>
#include <numeric>

#include "common/text.h"

namespace gpudoctor {
namespace {

char Lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

std::string_view WithoutLeading(std::string_view text, std::string_view characters) {
  if (characters.empty()) return text;
  const size_t start = text.find_first_not_of(characters);
  return start == std::string_view::npos ? std::string_view() : text.substr(start);
}

}  // namespace

size_t EditDistance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic programme: the one before last is needed for a swap.
  std::vector<size_t> before(b.size() + 1), last(b.size() + 1), row(b.size() + 1);
  std::iota(last.begin(), last.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = Lower(a[i - 1]) == Lower(b[j - 1]) ? 0 : 1;
      row[j] = std::min({last[j] + 1, row[j - 1] + 1, last[j - 1] + cost});
      if (i > 1 && j > 1 && Lower(a[i - 1]) == Lower(b[j - 2]) && Lower(a[i - 2]) == Lower(b[j - 1]))
        row[j] = std::min(row[j], before[j - 2] + 1);
    }
    std::swap(before, last);
    std::swap(last, row);
  }
  return last[b.size()];
}

std::vector<std::string> NearestNames(std::string_view word, const std::vector<std::string>& candidates,
                                      const NearestOptions& options) {
  const std::string_view core = WithoutLeading(word, options.ignore_leading);
  if (core.empty()) return {};
  const size_t max_distance =
      options.max_distance > 0 ? options.max_distance : std::clamp<size_t>((core.size() + 2) / 3, 1, 3);
  struct Scored {
    size_t distance;
    const std::string* name;
  };
  std::vector<Scored> near;
  for (const std::string& candidate : candidates) {
    const std::string_view other = WithoutLeading(candidate, options.ignore_leading);
    if (other.empty()) continue;
    size_t distance = EditDistance(core, other);
    if (core.size() >= 2 && core.size() < other.size() && EqualsIgnoreCase(other.substr(0, core.size()), core))
      distance = std::min<size_t>(distance, 1);
    // A word of one letter is near nothing: every edit would replace all of it.
    if (distance <= max_distance && distance < core.size()) near.push_back({distance, &candidate});
  }
  if (near.empty()) return {};
  std::stable_sort(near.begin(), near.end(), [](const Scored& x, const Scored& y) { return x.distance < y.distance; });
  std::vector<std::string> names;
  for (const Scored& scored : near) {
    if (scored.distance > near.front().distance || names.size() >= options.max_results) break;
    if (std::find(names.begin(), names.end(), *scored.name) == names.end()) names.push_back(*scored.name);
  }
  return names;
}

std::string QuotedList(const std::vector<std::string>& names, std::string_view conjunction,
                       std::string_view quote) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text += i + 1 == names.size() ? " " + std::string(conjunction) + " " : ", ";
    text.append(quote).append(names[i]).append(quote);
  }
  return text;
}

std::string DidYouMean(const std::vector<std::string>& names) {
  return names.empty() ? "" : " Did you mean " + QuotedList(names) + "?";
}

}  // namespace gpudoctor
