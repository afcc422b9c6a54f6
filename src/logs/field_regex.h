// FieldRegex: one catalog regex, compiled to extract the fields of the lines it matches.
//
// RE2 defines what a pattern means and guarantees linear time on any line, but extracting
// groups costs it 0.7-2 µs a line (a forward and a reverse DFA pass, then its capture
// engine on the match), more than everything else the parser does with an event line.
// PCRE2's JIT extracts the same groups in 0.03-0.2 µs. So a pattern is compiled by both:
// PCRE2 answers, under a match limit, and RE2 answers whenever PCRE2 cannot vouch for the
// same answer:
//   - a pattern PCRE2 does not take, or that is not plain ASCII (case folding differs
//     beyond ASCII), or with more groups than Buffers hold;
//   - a line holding a vertical tab, the one byte `\s` matches in PCRE2 and not in RE2;
//   - a line on which PCRE2 reaches its match limit (a backtracking engine can take
//     exponential time on a hostile line; RE2 cannot).
// Both engines read bytes (RE2 in Latin-1 mode, PCRE2 without UTF), so a line that is not
// UTF-8 matches the same in both. field_regex_test and fuzz_logs hold them to the same
// answers on every catalog pattern.
//
//   auto regex = FieldRegex::Compile(source);   // error: RE2's message
//   FieldRegex::Buffers buffers;                // one per thread
//   std::vector<EventField> fields;
//   if (regex->Match(line, buffers, fields)) { ... }   // named, non-empty groups
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "logs/event.h"

namespace re2 {
class RE2;
}

namespace gpudoctor {

class FieldRegex {
 public:
  // Working memory of PCRE2's matches: one per thread, for any FieldRegex.
  class Buffers {
   public:
    Buffers();
    ~Buffers();
    Buffers(const Buffers&) = delete;
    Buffers& operator=(const Buffers&) = delete;

   private:
    friend class FieldRegex;
    struct Pcre2;
    std::unique_ptr<Pcre2> pcre2_;
  };

  // Which engine answers (tests and the equivalence check choose one).
  enum class Engine { kFastest, kRe2Only };

  static Result<std::unique_ptr<FieldRegex>> Compile(std::string_view source);
  ~FieldRegex();

  // Whether the regex matches somewhere in `text`; on a match `fields` holds its named groups that matched
  // something other than "<unknown>" (trimmed), in group order.
  bool Match(std::string_view text, Buffers& buffers, std::vector<EventField>& fields,
             Engine engine = Engine::kFastest) const;
  // Whether PCRE2 compiled it (false: every match is RE2's).
  bool accelerated() const { return pcre2_ != nullptr; }

 private:
  struct Code;
  FieldRegex() = default;
  bool MatchRe2(std::string_view text, std::vector<EventField>& fields) const;

  std::unique_ptr<re2::RE2> re2_;
  std::unique_ptr<Code> pcre2_;            // null: RE2 only
  std::vector<std::string> group_names_;   // by group number; "" for unnamed groups
};

}  // namespace gpudoctor
