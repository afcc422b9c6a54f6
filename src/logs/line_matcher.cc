#include "logs/line_matcher.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <hs/hs.h>

#include "common/embedded_bytes.h"
#include "common/text.h"

namespace gpudoctor {

// Generated at build time by pattern_database_tool from data/events.toml.
std::vector<std::string_view> BuiltinPatternDatabaseBytes();

LineMatcher::Scratch::Scratch(const LineMatcher& matcher) {
  // The databases share one scratch, sized for the largest of them.
  const PatternDatabases& databases = *matcher.databases_;
  if (hs_alloc_scratch(databases.line(), &scratch_) != HS_SUCCESS ||
      hs_alloc_scratch(databases.block(), &scratch_) != HS_SUCCESS ||
      hs_alloc_scratch(databases.stamped_block(), &scratch_) != HS_SUCCESS) {
    std::fprintf(stderr, "gpudoctor: out of memory allocating pattern scratch space\n");
    std::abort();
  }
}

LineMatcher::Scratch::~Scratch() { hs_free_scratch(scratch_); }

LineMatcher::LineMatcher() = default;
LineMatcher::~LineMatcher() = default;

Result<std::shared_ptr<const LineMatcher>> LineMatcher::Create(LogCatalog catalog) {
  return Create(std::move(catalog), {});
}

Result<std::shared_ptr<const LineMatcher>> LineMatcher::Create(LogCatalog catalog,
                                                               const std::vector<std::string_view>& prebuilt) {
  auto matcher = Make(std::make_shared<const LogCatalog>(std::move(catalog)), prebuilt);
  if (!matcher) return matcher.error();
  if (Status compiled = (*matcher)->CompileAll(); !compiled) return compiled.error();
  return std::shared_ptr<const LineMatcher>(std::move(*matcher));
}

const LineMatcher::LazyRegex& LineMatcher::Compiled(LazyRegex& lazy) {
  std::call_once(lazy.once, [&] {
    auto regex = FieldRegex::Compile(lazy.source);
    if (regex) lazy.regex = std::move(regex).value();
    else lazy.error = regex.error().message;
  });
  return lazy;
}

Status LineMatcher::CompileAll() const {
  const auto& patterns = catalog_->patterns();
  for (size_t i = 0; i < patterns.size(); ++i) {
    if (const LazyRegex& lazy = Compiled(regexes_[i]); !lazy.regex) {
      return Error{"pattern " + patterns[i].id + ": bad regex: " + lazy.error};
    }
  }
  for (const IdentitySpec& identity : kIdentitySpecs) {
    if (!Compiled(identity_regexes_[static_cast<size_t>(identity.kind)]).regex) {
      return Error{"pattern " + std::string(identity.literal) + ": bad regex"};
    }
  }
  return {};
}

Result<std::shared_ptr<LineMatcher>> LineMatcher::Make(std::shared_ptr<const LogCatalog> catalog,
                                                       const std::vector<std::string_view>& prebuilt) {
  std::shared_ptr<LineMatcher> matcher(new LineMatcher());
  matcher->catalog_ = std::move(catalog);
  matcher->driver_ = std::make_unique<DriverClassifier>(matcher->catalog_->driver());
  const auto& patterns = matcher->catalog_->patterns();
  matcher->regexes_ = std::make_unique<LazyRegex[]>(patterns.size());
  for (uint32_t index = 0; index < patterns.size(); ++index) {
    const PatternSpec& spec = patterns[index];
    matcher->regexes_[index].source = spec.regex;
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
  matcher->identity_regexes_ = std::make_unique<LazyRegex[]>(std::size(kIdentitySpecs));
  for (const IdentitySpec& identity : kIdentitySpecs) {
    matcher->identity_regexes_[static_cast<size_t>(identity.kind)].source = identity.regex;
  }
  const uint64_t cpu_features = HostCpuFeatures();
  for (std::string_view bytes : prebuilt) {
    auto loaded = PatternDatabases::Deserialize(bytes, *matcher->catalog_, cpu_features);
    if (!loaded) continue;  // built for another CPU, catalog or Vectorscan
    matcher->databases_ = std::make_unique<PatternDatabases>(std::move(loaded).value());
    matcher->prebuilt_ = true;
    break;
  }
  if (!matcher->databases_) {
    auto compiled = PatternDatabases::Compile(*matcher->catalog_, cpu_features);
    if (!compiled) return compiled.error();
    matcher->databases_ = std::make_unique<PatternDatabases>(std::move(compiled).value());
  }
  return matcher;
}

std::shared_ptr<const LineMatcher> LineMatcher::Builtin() {
  static const std::shared_ptr<const LineMatcher> matcher = [] {
    // The built-in catalog lives as long as the program: shared, not copied.
    std::shared_ptr<const LogCatalog> catalog(&LogCatalog::Builtin(), [](const LogCatalog*) {});
    const std::vector<std::string_view> prebuilt = BuiltinPatternDatabaseBytes();
    auto created = Make(std::move(catalog), prebuilt);
    for (std::string_view bytes : prebuilt) ReleaseEmbeddedPages(bytes);  // copied by Vectorscan
    if (!created) {
      std::fprintf(stderr, "gpudoctor: built-in event patterns do not compile: %s\n",
                   created.error().message.c_str());
      std::abort();
    }
    return std::shared_ptr<const LineMatcher>(std::move(*created));
  }();
  return matcher;
}

void LineMatcher::Candidates(std::string_view line, Scratch& scratch, std::vector<uint32_t>& out) const {
  out.clear();
  auto on_match = [](unsigned id, unsigned long long, unsigned long long, unsigned, void* context) -> int {
    static_cast<std::vector<uint32_t>*>(context)->push_back(id);
    return 0;
  };
  hs_scan(databases_->line(), line.data(), static_cast<unsigned>(std::min<size_t>(line.size(), UINT32_MAX)), 0,
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

bool LineMatcher::Match(uint32_t index, std::string_view message, Scratch& scratch,
                        std::vector<EventField>& fields) const {
  const LazyRegex& lazy = Compiled(regexes_[index]);
  return lazy.regex && lazy.regex->Match(message, scratch.buffers_, fields);
}

std::optional<IdentityLine> LineMatcher::MatchIdentity(std::string_view message, Scratch& scratch,
                                                       std::vector<EventField>& fields) const {
  for (const IdentitySpec& identity : kIdentitySpecs) {
    size_t i = static_cast<size_t>(identity.kind);
    if (message.find(identity.literal) == std::string_view::npos) continue;
    const LazyRegex& lazy = Compiled(identity_regexes_[i]);
    if (lazy.regex && lazy.regex->Match(message, scratch.buffers_, fields)) return identity.kind;
  }
  return std::nullopt;
}

bool LineMatcher::ScanFinds(std::string_view line, Scratch& scratch) const {
  auto on_match = [](unsigned, unsigned long long, unsigned long long, unsigned, void*) -> int { return 1; };
  return hs_scan(databases_->block(), line.data(), static_cast<unsigned>(std::min<size_t>(line.size(), UINT32_MAX)), 0,
                 scratch.scratch_, on_match, nullptr) == HS_SCAN_TERMINATED;
}

void LineMatcher::ScanBlock(std::string_view block, bool minute_stamps, Scratch& scratch,
                            const LineCallback& on_line) const {
  // Matches arrive in order of their end offset, so a line's matches come together: the line is
  // reported when the first match past it arrives, or when the scan ends, with the ids it holds.
  struct Context {
    std::string_view block;
    size_t next_line_start = 0;  // start of the line after the one pending
    bool pending = false;        // a line [begin, end) waits to be reported
    size_t begin = 0, end = 0;
    std::vector<uint32_t>* ids;
    const LineCallback* on_line;

    void Report() {
      std::sort(ids->begin(), ids->end());
      ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
      (*on_line)(begin, end, *ids);
      pending = false;
    }
  } context{block, 0, false, 0, 0, &scratch.line_ids_, &on_line};
  auto on_match = [](unsigned id, unsigned long long, unsigned long long to, unsigned, void* opaque) -> int {
    auto* c = static_cast<Context*>(opaque);
    const size_t end_of_match = static_cast<size_t>(to);
    if (end_of_match == 0) return 0;
    // A match's last byte is never a newline (the catalog refuses literals with one, and the minute
    // stamp ends in ']'), so it lies in the line to report.
    const size_t last = end_of_match - 1;
    if (c->pending && last < c->end) {
      if (id != PatternDatabases::kNotACandidate) c->ids->push_back(id);
      return 0;
    }
    if (c->pending) c->Report();
    const char* data = c->block.data();
    const void* previous_newline =
        last > c->next_line_start ? memrchr(data + c->next_line_start, '\n', last - c->next_line_start) : nullptr;
    c->begin = previous_newline ? static_cast<size_t>(static_cast<const char*>(previous_newline) - data) + 1
                                : c->next_line_start;
    const void* next_newline = std::memchr(data + last, '\n', c->block.size() - last);
    c->end = next_newline ? static_cast<size_t>(static_cast<const char*>(next_newline) - data) : c->block.size();
    c->next_line_start = c->end + 1;
    c->pending = true;
    c->ids->clear();
    if (id != PatternDatabases::kNotACandidate) c->ids->push_back(id);
    return 0;
  };
  // hs_scan takes at most 4 GiB at once; callers pass blocks of a few MiB.
  hs_scan(minute_stamps ? databases_->stamped_block() : databases_->block(), block.data(),
          static_cast<unsigned>(std::min<size_t>(block.size(), UINT32_MAX)), 0, scratch.scratch_, on_match, &context);
  if (context.pending) context.Report();
}

}  // namespace gpudoctor
