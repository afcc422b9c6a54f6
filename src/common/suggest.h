// "Did you mean ...?": the known names nearest to one that is not known, for
// every message that rejects a name (a command, an option, a finding id, an
// event kind, an Xid number).
//
//   NearestNames("stauts", {"status", "slurm", "logs"})  -> {"status"}
//   DidYouMean({"79", "99"})                            -> " Did you mean '79' or '99'?"
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gpudoctor {

// Edits (insert, delete, substitute, swap two neighbours) that turn `a` into
// `b`, ASCII case ignored: the optimal string alignment Damerau-Levenshtein distance.
size_t EditDistance(std::string_view a, std::string_view b);

struct NearestOptions {
  // Most edits a match may be away; 0: about a third of the word's length, 1 to 3.
  size_t max_distance = 0;
  size_t max_results = 4;
  // Leading characters ignored on both sides ("-" for options: "--jsn" is near "--json", not "-j").
  std::string_view ignore_leading = "";
};

// The candidates nearest to `word`, best first; a candidate that `word` is a
// prefix of (at least 2 characters: "stat" for "status") counts as one edit
// away. Only those as near as the nearest are returned, so a clear match is
// never buried among weaker ones. Empty: nothing is near.
std::vector<std::string> NearestNames(std::string_view word, const std::vector<std::string>& candidates,
                                      const NearestOptions& options = {});

// "'a'", "'a' or 'b'", "'a', 'b' or 'c'": names quoted and joined for a message.
std::string QuotedList(const std::vector<std::string>& names, std::string_view conjunction = "or",
                       std::string_view quote = "'");

// " Did you mean 'a' or 'b'?" (with the leading space), or "" when `names` is empty.
std::string DidYouMean(const std::vector<std::string>& names);

}  // namespace gpudoctor
