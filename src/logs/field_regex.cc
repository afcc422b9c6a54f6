#include "logs/field_regex.h"

#include <algorithm>
#include <cstdint>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <re2/re2.h>

#include "common/text.h"

namespace gpudoctor {
namespace {

// Groups a Buffers holds: patterns with more are RE2's (the catalog's have at most 9).
constexpr uint32_t kMaxGroups = 32;
// PCRE2's budget for one line. The catalog's patterns take a few hundred steps on a
// real line; a hostile one that reaches this many goes to RE2 instead.
constexpr uint32_t kMatchLimit = 20'000;

struct MatchContextDeleter {
  void operator()(pcre2_match_context* context) const { pcre2_match_context_free(context); }
};

// Settings only, read by every match: one for the whole program.
pcre2_match_context* SharedMatchContext() {
  static const std::unique_ptr<pcre2_match_context, MatchContextDeleter> context = [] {
    std::unique_ptr<pcre2_match_context, MatchContextDeleter> made(pcre2_match_context_create(nullptr));
    if (made) pcre2_set_match_limit(made.get(), kMatchLimit);
    return made;
  }();
  return context.get();
}

void AddField(const std::string& name, std::string_view value, std::vector<EventField>& fields) {
  value = Trim(value);
  if (name.empty() || value.empty() || value == "<unknown>" || value == "'<unknown>'") return;
  fields.push_back(EventField{name, std::string(value)});
}

}  // namespace

struct FieldRegex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

struct FieldRegex::Buffers::Pcre2 {
  pcre2_match_data* data = nullptr;
  ~Pcre2() { pcre2_match_data_free(data); }
};

FieldRegex::Buffers::Buffers() : pcre2_(std::make_unique<Pcre2>()) {
  pcre2_->data = pcre2_match_data_create(kMaxGroups, nullptr);
}

FieldRegex::Buffers::~Buffers() = default;

FieldRegex::~FieldRegex() = default;

Result<std::unique_ptr<FieldRegex>> FieldRegex::Compile(std::string_view source) {
  std::unique_ptr<FieldRegex> regex(new FieldRegex());
  re2::RE2::Options options;
  options.set_log_errors(false);
  options.set_encoding(re2::RE2::Options::EncodingLatin1);
  regex->re2_ = std::make_unique<re2::RE2>(re2::StringPiece(source.data(), source.size()), options);
  if (!regex->re2_->ok()) return Error{regex->re2_->error()};
  regex->group_names_.resize(static_cast<size_t>(regex->re2_->NumberOfCapturingGroups()) + 1);
  for (const auto& [name, index] : regex->re2_->NamedCapturingGroups()) {
    regex->group_names_[static_cast<size_t>(index)] = name;
  }

  const bool ascii = std::all_of(source.begin(), source.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  if (!ascii || regex->group_names_.size() > kMaxGroups) return regex;
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  // $ only at the very end, as in RE2 (PCRE2's also matches before a final newline).
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(), PCRE2_DOLLAR_ENDONLY,
                                   &error, &error_offset, nullptr);
  if (code == nullptr) return regex;
  auto compiled = std::make_unique<Code>();
  compiled->code = code;
  uint32_t groups = 0;
  // Both engines number groups alike; the names are read by number from RE2.
  if (pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &groups) != 0 || groups + 1 != regex->group_names_.size()) {
    return regex;
  }
  // Without the JIT (a kernel that forbids writable executable memory) PCRE2's interpreter is no faster than RE2.
  if (pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) != 0) return regex;
  regex->pcre2_ = std::move(compiled);
  return regex;
}

bool FieldRegex::Match(std::string_view text, Buffers& buffers, std::vector<EventField>& fields, Engine engine) const {
  if (engine == Engine::kRe2Only || !pcre2_ || buffers.pcre2_->data == nullptr || SharedMatchContext() == nullptr ||
      text.find('\v') != std::string_view::npos) {
    return MatchRe2(text, fields);
  }
  pcre2_match_data* data = buffers.pcre2_->data;
  const int found = pcre2_match(pcre2_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0, data,
                                SharedMatchContext());
  if (found == PCRE2_ERROR_NOMATCH) return false;
  if (found <= 0) return MatchRe2(text, fields);  // the match limit, or the JIT's stack
  fields.clear();
  const PCRE2_SIZE* offsets = pcre2_get_ovector_pointer(data);
  for (size_t group = 1; group < group_names_.size() && group < static_cast<size_t>(found); ++group) {
    const PCRE2_SIZE begin = offsets[2 * group];
    const PCRE2_SIZE end = offsets[2 * group + 1];
    if (begin == PCRE2_UNSET || end < begin) continue;
    AddField(group_names_[group], text.substr(begin, end - begin), fields);
  }
  return true;
}

bool FieldRegex::MatchRe2(std::string_view text, std::vector<EventField>& fields) const {
  const int groups = static_cast<int>(group_names_.size());
  re2::StringPiece stack_groups[16];
  std::vector<re2::StringPiece> heap_groups;
  re2::StringPiece* submatches = stack_groups;
  if (groups > 16) {
    heap_groups.resize(static_cast<size_t>(groups));
    submatches = heap_groups.data();
  }
  const re2::StringPiece input(text.data(), text.size());
  // Asked for groups, RE2 runs a regex anchored at the start ("^...") on a short text with its capture
  // engine straight away, without its DFA: a line that does not match then costs 2-3 µs instead of
  // 0.05-0.3 µs. So the DFA says first whether the line matches.
  if (!re2_->Match(input, 0, input.size(), re2::RE2::UNANCHORED, nullptr, 0)) return false;
  if (!re2_->Match(input, 0, input.size(), re2::RE2::UNANCHORED, submatches, groups)) return false;
  fields.clear();
  for (size_t group = 1; group < group_names_.size(); ++group) {
    if (submatches[group].data() == nullptr) continue;
    AddField(group_names_[group], std::string_view(submatches[group].data(), submatches[group].size()), fields);
  }
  return true;
}

}  // namespace gpudoctor
