#include "logs/line_matcher.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <hs/hs.h>
#include <re2/re2.h>

#include "common/text.h"

namespace gpudoctor {

namespace {

struct IdentitySpec {
  IdentityLine kind;
  const char* literal;
  const char* regex;
};

constexpr IdentitySpec kIdentitySpecs[] = {
    {IdentityLine::kUuid, "GPU at PCI:",
     R"(NVRM: GPU at PCI:(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?): (?P<uuid>GPU-[0-9A-Fa-f-]+))"},
    {IdentityLine::kBoardSerial, "GPU Board Serial Number:", R"(NVRM: GPU Board Serial Number: (?P<serial>\S+))"},
    {IdentityLine::kSerial, "serial number is",
     R"(NVRM: GPU (?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?): GPU serial number is (?P<serial>[\w-]+))"},
};

// `dmesg -H` prints "[Feb23 16:24]" when the minute changes; the parser needs
// these lines to date the "[  +0.000316]" lines after them.
constexpr const char* kMinuteStampRegex = R"(^\[[^\s\]]{1,12}\s*\d{1,2}\s+\d{1,2}:\d\d\])";

std::string EscapeLiteral(std::string_view literal) {
  std::string out;
  for (unsigned char c : literal) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
      out.push_back(static_cast<char>(c));
    } else {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\x%02x", c);
      out += buffer;
    }
  }
  return out;
}

struct HsInput {
  std::vector<std::string> expressions;
  std::vector<unsigned> flags;
  std::vector<unsigned> ids;

  void Add(std::string expression, unsigned flag, unsigned id) {
    expressions.push_back(std::move(expression));
    flags.push_back(flag);
    ids.push_back(id);
  }

  Result<hs_database_t*> Compile(std::string_view what) const {
    std::vector<const char*> pointers;
    for (const std::string& e : expressions) pointers.push_back(e.c_str());
    hs_database_t* database = nullptr;
    hs_compile_error_t* error = nullptr;
    if (hs_compile_multi(pointers.data(), flags.data(), ids.data(), static_cast<unsigned>(pointers.size()),
                         HS_MODE_BLOCK, nullptr, &database, &error) != HS_SUCCESS) {
      std::string message = std::string("cannot compile the ") + std::string(what) + ": " +
                            (error && error->message ? error->message : "unknown error");
      hs_free_compile_error(error);
      return Error{message};
    }
    return database;
  }
};

Result<std::unique_ptr<re2::RE2>> CompileRegex(const std::string& regex, std::string_view id) {
  re2::RE2::Options options;
  options.set_log_errors(false);
  auto compiled = std::make_unique<re2::RE2>(regex, options);
  if (!compiled->ok()) return Error{"pattern " + std::string(id) + ": bad regex: " + compiled->error()};
  return compiled;
}

std::vector<std::string> GroupNames(const re2::RE2& regex) {
  std::vector<std::string> names(static_cast<size_t>(regex.NumberOfCapturingGroups()) + 1);
  for (const auto& [name, index] : regex.NamedCapturingGroups()) names[static_cast<size_t>(index)] = name;
  return names;
}

bool RunRegex(const re2::RE2& regex, const std::vector<std::string>& names, std::string_view text,
              std::vector<EventField>& fields) {
  const int groups = static_cast<int>(names.size());
  re2::StringPiece stack_groups[16];
  std::vector<re2::StringPiece> heap_groups;
  re2::StringPiece* submatches = stack_groups;
  if (groups > 16) {
    heap_groups.resize(static_cast<size_t>(groups));
    submatches = heap_groups.data();
  }
  re2::StringPiece input(text.data(), text.size());
  if (!regex.Match(input, 0, input.size(), re2::RE2::UNANCHORED, submatches, groups)) return false;
  fields.clear();
  for (int i = 1; i < groups; ++i) {
    const std::string& name = names[static_cast<size_t>(i)];
    if (name.empty() || submatches[i].data() == nullptr) continue;
    std::string_view value = Trim(std::string_view(submatches[i].data(), submatches[i].size()));
    if (value.empty() || value == "<unknown>" || value == "'<unknown>'") continue;
    fields.push_back(EventField{name, std::string(value)});
  }
  return true;
}

}  // namespace

LineMatcher::Scratch::Scratch(const LineMatcher& matcher) {
  // The databases share one scratch, sized for the largest of them.
  if (hs_alloc_scratch(matcher.line_database_, &scratch_) != HS_SUCCESS ||
      hs_alloc_scratch(matcher.block_database_, &scratch_) != HS_SUCCESS ||
      hs_alloc_scratch(matcher.stamped_block_database_, &scratch_) != HS_SUCCESS) {
    std::fprintf(stderr, "gpudoctor: out of memory allocating pattern scratch space\n");
    std::abort();
  }
}

LineMatcher::Scratch::~Scratch() { hs_free_scratch(scratch_); }

LineMatcher::~LineMatcher() {
  hs_free_database(line_database_);
  hs_free_database(block_database_);
  hs_free_database(stamped_block_database_);
}

Result<std::shared_ptr<const LineMatcher>> LineMatcher::Create(LogCatalog catalog) {
  std::shared_ptr<LineMatcher> matcher(new LineMatcher());
  matcher->catalog_ = std::move(catalog);
  const auto& patterns = matcher->catalog_.patterns();

  HsInput line_input;
  HsInput block_input;
  for (uint32_t index = 0; index < patterns.size(); ++index) {
    const PatternSpec& spec = patterns[index];
    auto regex = CompileRegex(spec.regex, spec.id);
    if (!regex) return regex.error();
    matcher->group_names_.push_back(GroupNames(**regex));
    matcher->regexes_.push_back(std::move(regex).value());
    for (const std::string& literal : spec.literals) {
      unsigned flags = spec.caseless ? HS_FLAG_CASELESS : 0u;
      line_input.Add(EscapeLiteral(literal), flags | HS_FLAG_SINGLEMATCH, index);
      // Continue patterns only matter while an event is open, and then the
      // reader feeds every line anyway: the block scan need not find them.
      if (spec.role != PatternRole::kContinue) block_input.Add(EscapeLiteral(literal), flags, 0);
    }
    if (spec.literals.empty()) {
      auto it = std::find_if(matcher->continuations_.begin(), matcher->continuations_.end(),
                             [&](const auto& entry) { return entry.first == spec.kind; });
      if (it == matcher->continuations_.end()) {
        matcher->continuations_.push_back({spec.kind, {}});
        it = std::prev(matcher->continuations_.end());
      }
      it->second.push_back(index);
    }
  }
  for (const IdentitySpec& identity : kIdentitySpecs) {
    auto regex = CompileRegex(identity.regex, identity.literal);
    if (!regex) return regex.error();
    matcher->identity_group_names_.push_back(GroupNames(**regex));
    matcher->identity_regexes_.push_back(std::move(regex).value());
    unsigned id = static_cast<unsigned>(patterns.size()) + static_cast<unsigned>(identity.kind);
    line_input.Add(EscapeLiteral(identity.literal), HS_FLAG_SINGLEMATCH, id);
    block_input.Add(EscapeLiteral(identity.literal), 0, 0);
  }
  auto line_database = line_input.Compile("line literals");
  if (!line_database) return line_database.error();
  matcher->line_database_ = *line_database;
  auto block_database = block_input.Compile("block literals");
  if (!block_database) return block_database.error();
  matcher->block_database_ = *block_database;
  // Matching the minute-stamp expression at every line start costs a third
  // of the scan, so only dmesg -H input pays for it.
  block_input.Add(kMinuteStampRegex, HS_FLAG_MULTILINE, 0);
  auto stamped_database = block_input.Compile("block literals with minute stamps");
  if (!stamped_database) return stamped_database.error();
  matcher->stamped_block_database_ = *stamped_database;
  return std::shared_ptr<const LineMatcher>(std::move(matcher));
}

std::shared_ptr<const LineMatcher> LineMatcher::Builtin() {
  static const std::shared_ptr<const LineMatcher> matcher = [] {
    auto created = Create(LogCatalog::Builtin());
    if (!created) {
      std::fprintf(stderr, "gpudoctor: built-in event patterns do not compile: %s\n",
                   created.error().message.c_str());
      std::abort();
    }
    return *created;
  }();
  return matcher;
}

void LineMatcher::Candidates(std::string_view line, Scratch& scratch, std::vector<uint32_t>& out) const {
  out.clear();
  auto on_match = [](unsigned id, unsigned long long, unsigned long long, unsigned, void* context) -> int {
    static_cast<std::vector<uint32_t>*>(context)->push_back(id);
    return 0;
  };
  hs_scan(line_database_, line.data(), static_cast<unsigned>(std::min<size_t>(line.size(), UINT32_MAX)), 0,
          scratch.scratch_, on_match, &out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

const std::vector<uint32_t>& LineMatcher::ContinuationsOf(std::string_view kind) const {
  static const std::vector<uint32_t> kNone;
  for (const auto& [name, indices] : continuations_) {
    if (name == kind) return indices;
  }
  return kNone;
}

bool LineMatcher::Match(uint32_t index, std::string_view message, std::vector<EventField>& fields) const {
  return RunRegex(*regexes_[index], group_names_[index], message, fields);
}

std::optional<IdentityLine> LineMatcher::MatchIdentity(std::string_view message,
                                                       std::vector<EventField>& fields) const {
  for (const IdentitySpec& identity : kIdentitySpecs) {
    size_t i = static_cast<size_t>(identity.kind);
    if (message.find(identity.literal) == std::string_view::npos) continue;
    if (RunRegex(*identity_regexes_[i], identity_group_names_[i], message, fields)) return identity.kind;
  }
  return std::nullopt;
}

void LineMatcher::ScanBlock(std::string_view block, bool minute_stamps, Scratch& scratch,
                            const std::function<void(size_t, size_t)>& on_line) const {
  struct Context {
    std::string_view block;
    size_t next_line_start = 0;  // matches before this are in a line already reported
    const std::function<void(size_t, size_t)>* on_line;
  } context{block, 0, &on_line};
  auto on_match = [](unsigned, unsigned long long, unsigned long long to, unsigned, void* opaque) -> int {
    auto* c = static_cast<Context*>(opaque);
    size_t end_of_match = static_cast<size_t>(to);
    if (end_of_match == 0 || end_of_match <= c->next_line_start) return 0;
    // Matches never contain a newline, so the match's last byte lies in the
    // line to report.
    size_t last = end_of_match - 1;
    const char* data = c->block.data();
    const void* previous_newline =
        last > c->next_line_start ? memrchr(data + c->next_line_start, '\n', last - c->next_line_start) : nullptr;
    size_t begin = previous_newline ? static_cast<size_t>(static_cast<const char*>(previous_newline) - data) + 1
                                    : c->next_line_start;
    const void* next_newline = std::memchr(data + last, '\n', c->block.size() - last);
    size_t end = next_newline ? static_cast<size_t>(static_cast<const char*>(next_newline) - data) : c->block.size();
    (*c->on_line)(begin, end);
    c->next_line_start = end + 1;
    return 0;
  };
  // hs_scan takes at most 4 GiB at once; callers pass blocks of a few MiB.
  // Matches arrive in order of their end offset.
  hs_scan(minute_stamps ? stamped_block_database_ : block_database_, block.data(),
          static_cast<unsigned>(std::min<size_t>(block.size(), UINT32_MAX)), 0, scratch.scratch_, on_match, &context);
}

}  // namespace gpudoctor
