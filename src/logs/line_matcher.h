// LineMatcher: the catalog's patterns compiled for speed. A vectorscan
// (hyperscan) database of every pattern's literals finds the few patterns
// worth trying on a line, or the few lines worth parsing in a large buffer;
// each pattern's regex (field_regex.h) then does the detailed match and
// extracts the fields. The built-in catalog's databases are compiled at
// build time and only loaded at start (pattern_databases.h).
//
//   auto matcher = LineMatcher::Builtin();
//   LineMatcher::Scratch scratch(*matcher);
//   matcher->Candidates(line, scratch, hits);           // pattern indices
//   matcher->Match(hits[0], message, scratch, fields);   // its fields
//
// A LineMatcher is immutable and may be shared between threads; each thread
// needs its own Scratch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "logs/catalog.h"
#include "logs/driver_classifier.h"
#include "logs/event.h"
#include "logs/field_regex.h"
#include "logs/pattern_databases.h"

struct hs_scratch;

namespace gpudoctor {

class LineMatcher {
 public:
  class Scratch {
   public:
    explicit Scratch(const LineMatcher& matcher);
    ~Scratch();
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

   private:
    friend class LineMatcher;
    hs_scratch* scratch_ = nullptr;
    FieldRegex::Buffers buffers_;
    std::vector<uint32_t> line_ids_;  // ScanBlock's: the ids found in the line it reports next
  };

  // Compiles the catalog's literal databases and every regex now (a catalog
  // named at run time: a bad regex is an error here, not on some later line).
  static Result<std::shared_ptr<const LineMatcher>> Create(LogCatalog catalog);
  // Loads the first of `prebuilt` (PatternDatabases::Serialize bytes) that
  // fits this CPU, this Vectorscan and `catalog`; compiles when none does.
  static Result<std::shared_ptr<const LineMatcher>> Create(LogCatalog catalog,
                                                           const std::vector<std::string_view>& prebuilt);
  // The matcher for LogCatalog::Builtin(), made once, from the databases
  // compiled at build time when they fit this machine. Its regexes, checked
  // when the build made those databases, are compiled on first use: most
  // commands read logs in which few patterns ever get that far.
  static std::shared_ptr<const LineMatcher> Builtin();
  ~LineMatcher();

  // Whether the literal databases were loaded from prebuilt bytes rather than compiled.
  bool prebuilt() const { return prebuilt_; }

  const LogCatalog& catalog() const { return *catalog_; }
  // The catalog's driver tables, for the driver lines no pattern names.
  const DriverClassifier& driver() const { return *driver_; }
  const PatternSpec& pattern(uint32_t index) const { return catalog_->patterns()[index]; }
  uint32_t pattern_count() const { return static_cast<uint32_t>(catalog_->patterns().size()); }

  // Indices of the catalog patterns whose literals occur in `line`, ascending.
  // Continue patterns without literals are never listed (see ContinuationsOf).
  void Candidates(std::string_view line, Scratch& scratch, std::vector<uint32_t>& out) const;
  // Continue patterns of `kind` that have no literals: tried on every line
  // while an event of that kind is open.
  const std::vector<uint32_t>& ContinuationsOf(std::string_view kind) const;
  // Runs pattern `index` on `message`; on a match fills `fields` with its
  // named groups (empty and "<unknown>" values left out).
  bool Match(uint32_t index, std::string_view message, Scratch& scratch, std::vector<EventField>& fields) const;

  // Whether `line` is an identity line; fills pci / uuid / serial fields.
  std::optional<IdentityLine> MatchIdentity(std::string_view message, Scratch& scratch,
                                            std::vector<EventField>& fields) const;

  // Calls `on_line(begin, end, candidates)` once for every line of `block` that
  // may matter to the parser: it contains a literal of a pattern, of an
  // identity line or a driver module's tag, or (with `minute_stamps`) is a
  // `dmesg -H` minute stamp. Offsets are relative to `block`; lines are
  // reported in order; `end` excludes the newline. `candidates` is what
  // Candidates gives for the line, found by the same scan; a line not reported
  // has none.
  using LineCallback = std::function<void(size_t begin, size_t end, std::span<const uint32_t> candidates)>;
  void ScanBlock(std::string_view block, bool minute_stamps, Scratch& scratch, const LineCallback& on_line) const;
  // Whether ScanBlock (without minute stamps) reports `line`: only such a line
  // may become an event without a pattern (the driver classifier's), so that
  // a reader that reads every line finds what the fast reader finds.
  bool ScanFinds(std::string_view line, Scratch& scratch) const;

 private:
  // A regex compiled on first use, by whichever thread gets there first.
  struct LazyRegex {
    std::string_view source;
    std::once_flag once;
    std::unique_ptr<FieldRegex> regex;  // null if it does not compile
    std::string error;                  // then, why
  };

  LineMatcher();
  static Result<std::shared_ptr<LineMatcher>> Make(std::shared_ptr<const LogCatalog> catalog,
                                                   const std::vector<std::string_view>& prebuilt);
  static const LazyRegex& Compiled(LazyRegex& lazy);
  // Compiles every regex now; the first that does not compile is the error.
  Status CompileAll() const;

  std::shared_ptr<const LogCatalog> catalog_;
  std::unique_ptr<LazyRegex[]> regexes_;           // one per catalog pattern
  std::vector<std::pair<std::string, std::vector<uint32_t>>> continuations_;
  std::unique_ptr<LazyRegex[]> identity_regexes_;  // by IdentityLine
  std::unique_ptr<PatternDatabases> databases_;
  std::unique_ptr<DriverClassifier> driver_;
  bool prebuilt_ = false;
};

}  // namespace gpudoctor
