// LogCatalog: what every Xid and every log event kind means, and the patterns
// that recognise them, loaded from data (data/events.toml, compiled in).
//
//   const LogCatalog& catalog = LogCatalog::Builtin();
//   if (const XidInfo* xid = catalog.FindXid(79)) std::cout << xid->action;
//
// A replacement file can be loaded with LogCatalog::LoadFile; the format is
// described in docs/events.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "logs/event.h"

namespace gpudoctor {

// The largest replacement catalog read; data/events.toml is about 125 KiB.
inline constexpr uint64_t kMaxCatalogFileBytes = 4 << 20;

// The cause tags an entry may use.
inline constexpr const char* kCauseTags[] = {"hardware", "driver", "application", "thermal", "power",
                                             "PCIe",     "memory", "NVLink",      "GSP"};

struct XidInfo {
  uint32_t code = 0;
  std::string name;
  std::string mnemonic;  // the driver's symbolic name, may be empty
  EventSeverity severity = EventSeverity::kWarning;
  std::vector<std::string> causes;      // cause tags
  std::vector<std::string> also_kinds;  // extra event kinds an Xid line yields, e.g. "gpu_off_bus"
  // What to do, as ordered steps when the catalog gives them (`steps`): the
  // one advice text for this fault, which the rules that judge the same fault
  // share (`advice = "xid 79"` in data/rules.toml). `action` is the steps as
  // one paragraph, or the catalog's `action` when it gives no steps.
  std::vector<std::string> steps;
  std::string action;

  bool operator==(const XidInfo&) const = default;
};

// The Xid an `advice = "xid 79"` key names (data/events.toml kinds,
// data/rules.toml rules); nullopt when it is not of that form.
std::optional<uint32_t> XidOfAdvice(std::string_view advice);

// An NVSwitch error code (SXid) from NVIDIA's Fabric Manager User Guide.
struct SxidInfo {
  uint32_t code = 0;
  std::string name;
  EventSeverity severity = EventSeverity::kWarning;  // used when the SXid line does not say
  std::string action;

  bool operator==(const SxidInfo&) const = default;
};

// One row of NVIDIA's decode table for the NVLink5 Xids 144-150: a unit's
// error status (and, for link-down events, the sub-code) and what to do.
struct NvLink5Row {
  uint32_t xid = 0;
  std::vector<std::string> units;  // the unit's names, any of which a line may print
  uint32_t error_status = 0;
  std::optional<uint32_t> subcode;  // bits 20-25 of the interrupt info; nullopt: any
  bool fatal = false;               // NVIDIA's severity column
  std::string immediate;            // resolution bucket, a key of nvlink5_actions
  std::string investigatory;        // resolution bucket, a key of nvlink5_actions

  bool operator==(const NvLink5Row&) const = default;
};

// A recovery action Xid 154 can name.
struct RecoveryAction {
  std::string action;              // "gpu_reset"
  std::vector<std::string> names;  // lower-case substrings of the driver's wording
  EventSeverity severity = EventSeverity::kWarning;
  std::string step;  // what the operator does

  bool operator==(const RecoveryAction&) const = default;
};

// What some bits of one of Xid 74's registers mean.
struct Xid74Bits {
  uint32_t register_index = 0;
  std::vector<uint32_t> bits;
  EventSeverity severity = EventSeverity::kWarning;
  std::string meaning;
  std::string step;

  bool operator==(const Xid74Bits&) const = default;
};

// The tables that decode Xid lines carrying more than a number.
struct XidDecodeTables {
  std::vector<NvLink5Row> nvlink5;
  std::map<std::string, std::string, std::less<>> nvlink5_actions;  // bucket -> what to do
  std::vector<RecoveryAction> recovery_actions;                      // first match wins
  std::vector<Xid74Bits> xid74_bits;

  bool operator==(const XidDecodeTables&) const = default;
};

// Whether events of a kind concern one device or the whole host.
enum class EventScope { kGpu, kHost };

struct KindInfo {
  std::string name;  // "pcie_aer"
  std::string title;
  EventSeverity severity = EventSeverity::kWarning;
  EventScope scope = EventScope::kGpu;
  std::vector<std::string> causes;
  std::string cause;   // one or two sentences
  std::string action;  // what the operator should do
  // Lines after an event's first line during which lines belonging to it
  // (merge/continue patterns) are added to it. 0: the event is one line.
  uint32_t window_lines = 0;

  bool operator==(const KindInfo&) const = default;
};

enum class PatternRole {
  kStart,     // always a new event
  kMerge,     // joins a compatible open event of its kind, else starts one
  kContinue,  // only adds details to an open event of its kind
};

struct PatternSpec {
  std::string id;
  std::string kind;
  PatternRole role = PatternRole::kStart;
  std::vector<std::string> literals;  // at least one is in every matching line
  bool caseless = false;              // literals match case-insensitively
  std::string regex;                  // RE2, with {PCI} expanded
  std::optional<EventSeverity> severity;
  std::string severity_from;                        // field whose value picks the severity
  std::map<std::string, EventSeverity> severity_map;  // keys lower-cased
  std::vector<std::string> append;                  // fields that collect several values
  std::optional<uint32_t> window_lines;             // overrides the kind's window for events it starts
  // A continue pattern without literals is tried on the lines up to this many after its event's first
  // line (default: the event's window); the fast reader reads those lines in full, and skips the others.
  std::optional<uint32_t> reach_lines;
  // Tried only on a line that no other pattern matched (an SXid line that states no severity).
  bool fallback = false;

  bool operator==(const PatternSpec&) const = default;
};

// A part of the NVIDIA driver (data/events.toml [driver]) and the kind of event its messages
// become when no pattern names them.
struct DriverSubsystem {
  std::string name;                       // "nvlink"
  std::string kind;                       // "nvlink_error", or the generic kind
  std::optional<EventSeverity> severity;  // overrides the kind's
  std::vector<std::string> functions;     // prefixes of the driver's function names: "knvlink"
  std::vector<std::string> modules;       // tags of the driver's modules in the log: "nvidia-nvlink"
  std::vector<std::string> folders;       // where its functions live in the driver's source

  bool operator==(const DriverSubsystem&) const = default;
};

// An error-level driver message that is no fault, or that prints no driver
// tag (neither text nor starts: only the function, which the line never shows).
struct DriverBenign {
  std::string function;  // a prefix of the printing function's name; empty: any line
  std::string text;      // found anywhere in the line's text
  std::string starts;    // or: the text starts with it
  std::string reason;

  bool operator==(const DriverBenign&) const = default;
};

struct DriverTables {
  // The kind of a driver error no subsystem has a kind for; empty: such lines give no event.
  std::string generic_kind;
  std::vector<std::string> error_words;  // lower case; one in a line's text makes it an error
  std::vector<DriverSubsystem> subsystems;
  std::vector<DriverBenign> benign;

  bool operator==(const DriverTables&) const = default;
};

class LogCatalog {
 public:
  // The catalog compiled into the binary from data/events.toml.
  static const LogCatalog& Builtin();
  static Result<LogCatalog> FromToml(std::string_view text, std::string_view origin);
  // Reads `path` under the input rule (common/input_file.h), at most kMaxCatalogFileBytes.
  static Result<LogCatalog> LoadFile(const std::string& path);

  const XidInfo* FindXid(uint32_t code) const;
  const SxidInfo* FindSxid(uint32_t code) const;
  const KindInfo* FindKind(std::string_view name) const;

  // The severity of an event of `kind` (and Xid `xid` for kind "xid").
  EventSeverity SeverityOf(std::string_view kind, std::optional<uint32_t> xid) const;
  // A short human title: the Xid name for Xid events, else the kind's title.
  std::string TitleOf(std::string_view kind, std::optional<uint32_t> xid) const;
  // The same for an event, naming the SXid of an NVSwitch event too.
  std::string TitleOf(const LogEvent& event) const;
  // The same title, appended to `out` (a JSON line is written one event after another).
  void AppendTitleOf(std::string& out, const LogEvent& event) const;

  const std::vector<XidInfo>& xids() const { return xids_; }    // sorted by code
  const std::vector<SxidInfo>& sxids() const { return sxids_; }  // sorted by code
  const XidDecodeTables& decode() const { return decode_; }
  const std::vector<KindInfo>& kinds() const { return kinds_; }
  const std::vector<PatternSpec>& patterns() const { return patterns_; }
  const DriverTables& driver() const { return driver_; }

  bool operator==(const LogCatalog&) const = default;

 private:
  friend class CatalogCodec;  // catalog_codec.h

  std::vector<XidInfo> xids_;
  std::vector<SxidInfo> sxids_;
  XidDecodeTables decode_;
  std::vector<KindInfo> kinds_;
  std::vector<PatternSpec> patterns_;
  DriverTables driver_;
};

}  // namespace gpudoctor
