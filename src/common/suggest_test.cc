#include "common/suggest.h"

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

using Names = std::vector<std::string>;

TEST(EditDistance, CountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("status", "status"), 0u);
  EXPECT_EQ(EditDistance("stauts", "status"), 1u) << "one swap of neighbours";
  EXPECT_EQ(EditDistance("memtst", "memtest"), 1u);
  EXPECT_EQ(EditDistance("simlate", "simulate"), 1u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("7999", "79"), 2u);
  EXPECT_EQ(EditDistance("STATUS", "status"), 0u) << "ASCII case is ignored";
  EXPECT_EQ(EditDistance("ca", "abc"), 3u) << "optimal string alignment: a swapped pair is not edited again";
}

TEST(NearestNames, FindsTyposAndPrefixes) {
  const Names commands = {"status", "logs", "explain", "slurm", "check", "triage", "trace-alloc"};
  EXPECT_EQ(NearestNames("stauts", commands), Names{"status"});
  EXPECT_EQ(NearestNames("chek", commands), Names{"check"});
  EXPECT_EQ(NearestNames("tirage", commands), Names{"triage"});
  EXPECT_EQ(NearestNames("stat", commands), Names{"status"}) << "a prefix of two letters or more";
  EXPECT_EQ(NearestNames("trace", commands), Names{"trace-alloc"});
  EXPECT_EQ(NearestNames("LOGS", commands), Names{"logs"});
}

TEST(NearestNames, NothingFarOrTooShortIsSuggested) {
  const Names commands = {"status", "logs", "explain"};
  EXPECT_TRUE(NearestNames("frobnicate", commands).empty());
  EXPECT_TRUE(NearestNames("x", {"h", "xx"}).empty()) << "one letter is near nothing";
  EXPECT_TRUE(NearestNames("", commands).empty());
  EXPECT_TRUE(NearestNames("zzzz", commands).empty());
}

TEST(NearestNames, OnlyTheNearestAreReturnedInCandidateOrderUpToTheLimit) {
  // 79 and 99 are two edits from 7999, 999 is one.
  EXPECT_EQ(NearestNames("7999", {"79", "99", "13"}), (Names{"79", "99"}));
  EXPECT_EQ(NearestNames("7999", {"79", "999", "99"}), Names{"999"});
  EXPECT_EQ(NearestNames("temp", {"temperature_high", "temperature_shutdown", "inlet_temperature"}),
            (Names{"temperature_high", "temperature_shutdown"}));
  EXPECT_EQ(NearestNames("ab", {"abc", "abd", "abe"}, {.max_results = 2}), (Names{"abc", "abd"}));
  EXPECT_EQ(NearestNames("abcdefgh", {"abcdxxxh"}, {.max_distance = 2}), Names{});
  EXPECT_EQ(NearestNames("abcdefgh", {"abcdxxxh"}, {.max_distance = 3}), Names{"abcdxxxh"});
}

TEST(NearestNames, LeadingDashesOfOptionsAreIgnoredOnBothSides) {
  const Names options = {"--json", "-j", "--simulate", "--since", "-h", "--help"};
  EXPECT_EQ(NearestNames("--jsn", options, {.ignore_leading = "-"}), Names{"--json"});
  EXPECT_EQ(NearestNames("--simlate", options, {.ignore_leading = "-"}), Names{"--simulate"});
  EXPECT_EQ(NearestNames("-json", options, {.ignore_leading = "-"}), Names{"--json"});
  EXPECT_TRUE(NearestNames("--", options, {.ignore_leading = "-"}).empty());
}

TEST(DidYouMean, QuotesAndJoinsTheNames) {
  EXPECT_EQ(DidYouMean({}), "");
  EXPECT_EQ(DidYouMean({"status"}), " Did you mean 'status'?");
  EXPECT_EQ(DidYouMean({"79", "99"}), " Did you mean '79' or '99'?");
  EXPECT_EQ(QuotedList({"a", "b", "c"}), "'a', 'b' or 'c'");
  EXPECT_EQ(QuotedList({"a", "b"}, "and"), "'a' and 'b'");
  EXPECT_EQ(QuotedList({"79", "99"}, "or", ""), "79 or 99");
}

}  // namespace
}  // namespace gpudoctor
