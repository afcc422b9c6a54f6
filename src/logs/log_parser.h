// LogParser: turns log lines, fed in order, into LogEvents.
//
// Each line goes through ParseLinePrefix (time, host) and the catalog's
// patterns (LineMatcher); a driver line that no pattern takes goes to the
// driver classifier (driver_classifier.h), which makes an event of its
// subsystem's kind when it is an error. The parser keeps the little state that spans lines:
// an event stays open for its kind's window so that the lines belonging to it
// (an AER report's details, a hung task's stack, an OOM report) are added to
// it; NVRM messages continued on following lines are joined (indented by
// journalctl or dmesg, written raw into syslog, or escaped as "#012" or "\x0a"
// inside one line); "GPU at PCI:..." lines link a bus id to a GPU UUID and
// serial for later events.
//
//   LogParser parser(options);
//   std::vector<LogEvent> events;
//   for (each line, numbered from 1) parser.Feed(line, number, events);
//   parser.Flush(events);
//
// Events come out in line order. A line that holds no pattern's literal, no
// identity or driver tag, and that no literal-less continue pattern of an open
// event reaches (data/events.toml `reach`) changes nothing: it closes no event
// by its time, only the windows count it. A caller may skip such lines (the
// fast reader does) as long as it feeds every line while WantsNextLine() is
// true; the result is then the same as feeding all lines.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "logs/event.h"
#include "logs/line_matcher.h"
#include "logs/line_prefix.h"

namespace gpudoctor {

struct ParseOptions {
  PrefixOptions prefix;               // year, reference time and zone for local timestamps
  std::optional<WallTime> boot_time;  // turns kernel uptime stamps into wall time
  std::string host;                   // for lines that name no host
  std::string source;                 // copied into every event
};

class LogParser {
 public:
  explicit LogParser(ParseOptions options,
                     std::shared_ptr<const LineMatcher> matcher = LineMatcher::Builtin());

  // Parses one line (without its newline); appends finished events to `out`.
  // `candidates`, when given, is what LineMatcher::Candidates gives for the
  // line, found by a scan of the block it came from (ScanBlock).
  void Feed(std::string_view line, uint64_t line_number, std::vector<LogEvent>& out,
            std::optional<std::span<const uint32_t>> candidates = std::nullopt);
  // True while an open event, or a driver record no pattern has taken yet, may still take the next line.
  bool WantsNextLine() const {
    return Reached(last_line_ + 1) ||
           (record_.line != 0 && !record_.taken && record_.last_line - record_.line < kRecordLines);
  }
  // Closes every open event (end of input, or the input went quiet).
  void Flush(std::vector<LogEvent>& out);
  // Whether `dmesg -H` minute stamps date the "[  +0.000316]" lines after
  // them (default true). The fast reader turns it off for input that does
  // not start in that format, so that it need not look for the stamps.
  void set_minute_stamps(bool enabled) { minute_stamps_enabled_ = enabled; }

  const LineMatcher& matcher() const { return *matcher_; }
  // Driver lines that no pattern named and that the driver tables gave only
  // the generic kind (data/events.toml [driver]).
  uint64_t generic_driver_lines() const { return generic_driver_lines_; }
  LineMatcher::Scratch& scratch() { return scratch_; }
  const ParseOptions& options() const { return options_; }

 private:
  // An event in the order it was started: events of one line come out in that
  // order, however long each stays open.
  struct StartedEvent {
    StartedEvent(LogEvent&& started, uint64_t order) : event(std::move(started)), start_order(order) {}
    LogEvent event;
    uint64_t start_order = 0;
  };
  struct OpenEvent {
    LogEvent event;
    uint64_t start_order = 0;
    std::vector<uint32_t> joined;  // patterns that contributed (kAlsoPattern for Xid extras)
    uint64_t last_line = 0;        // the last line it may take
    std::optional<uint32_t> origin;  // the pattern that started it
    uint64_t message_end_line = 0;   // last line of its (possibly wrapped) message
    uint64_t taken_line = 0;         // the last line it took
    // How far after the line it took last its kind's continue patterns without literals look, and the
    // last line they may take (0: it has none).
    std::optional<uint32_t> reach;
    uint64_t reach_until = 0;
  };

  LogEvent NewEvent(const LinePrefix& prefix, std::string_view line, uint64_t line_number) const;
  // Whether the line made an event or joined an open one.
  bool ApplyPattern(uint32_t index, const std::vector<EventField>& fields, const LinePrefix& prefix,
                    std::string_view line, uint64_t line_number);
  // Both take the event whole: a LogEvent is a dozen strings, and each move of one costs.
  void StartEvent(LogEvent&& event, uint32_t join_key, std::optional<uint32_t> origin, uint64_t line_number);
  void MergeOrStart(LogEvent&& event, uint32_t join_key, std::optional<uint32_t> origin, uint64_t line_number);
  // A driver line no pattern took: an event of its subsystem's kind when it is an error.
  void ClassifyDriverLine(const LinePrefix& prefix, std::string_view line, uint64_t line_number);
  bool JoinWrappedLine(const LinePrefix& prefix, std::string_view line, uint64_t line_number);
  // Runs `candidates` (on entry, the patterns whose literals the line or a joined record's text holds; the
  // open events' literal-less continue patterns that reach `line_number` are added); whether one made or
  // joined an event, or the text names a GPU.
  bool MatchLine(const LinePrefix& prefix, std::string_view raw, uint64_t line_number,
                 std::vector<uint32_t>& candidates);
  // matcher_->Match, remembering each pattern's last message and result: a storm repeats its lines word
  // for word, and the regex is then run once. The fields when it matched (valid until the pattern's next
  // MatchPattern), else null.
  const std::vector<EventField>* MatchPattern(uint32_t index, std::string_view message);
  // Whether a literal-less continue pattern of an open event reaches `line_number`.
  bool Reached(uint64_t line_number) const;
  // `open` took line `line_number`: its literal-less continue patterns look on from there.
  static void Took(OpenEvent& open, uint64_t line_number);
  // A driver record printed over several lines ("NVRM: The NVIDIA GPU 0000:b3:00.0" then indented
  // "NVRM: (PCI ID: ...) ... has" and "NVRM: fallen off the bus ..."): its head starts a record, each
  // continuation extends it, and the joined text is matched again until a pattern takes it. The
  // event is dated and numbered by the head line; its raw text holds every line.
  void StartRecord(const LinePrefix& prefix, std::string_view line, uint64_t line_number, bool recognised);
  bool JoinRecord(const LinePrefix& prefix, std::string_view line, uint64_t line_number);
  void NoteIdentity(IdentityLine kind, const std::vector<EventField>& fields, uint64_t line_number);
  // The open event of `kind` on device `pci` when one is open, else the one of `kind` started last.
  OpenEvent* FindOpen(std::string_view kind, std::string_view pci = {});
  void Close(size_t open_index);
  void Release(std::vector<LogEvent>& out);
  void FillIdentity(LogEvent& event) const;

  ParseOptions options_;
  std::shared_ptr<const LineMatcher> matcher_;
  LineMatcher::Scratch scratch_;
  std::vector<OpenEvent> open_;   // in start order; at most one per kind and device
  std::vector<StartedEvent> closed_;  // finished, waiting for earlier open events
  std::vector<uint32_t> release_order_;  // Release's scratch: closed_ by line and start order
  std::vector<StartedEvent> kept_;       // Release's scratch: what waits on
  uint64_t next_start_order_ = 0;
  uint64_t generic_driver_lines_ = 0;
  std::unordered_map<std::string, std::string> uuid_by_pci_;
  std::unordered_map<std::string, std::string> serial_by_pci_;
  std::string last_gpu_at_pci_;  // from the latest "GPU at PCI:" line
  uint64_t last_gpu_at_line_ = 0;
  std::optional<WallTime> minute_stamp_;  // latest dmesg -H "[Feb23 16:24]"
  bool minute_stamps_enabled_ = true;
  uint64_t last_line_ = 0;              // the number of the line fed last
  uint64_t prefixed_nvrm_line_ = 0;     // the latest line with a time or host prefix and the NVRM tag
  std::string unfolded_;  // a message whose escaped line breaks were unfolded
  // A record is matched again for at most this many lines: dumps run to hundreds.
  static constexpr uint64_t kRecordLines = 16;
  struct Record {
    uint64_t line = 0;       // its head line; 0: none
    uint64_t last_line = 0;  // the last line joined to it
    bool taken = false;      // a pattern made an event of it already
    LinePrefix prefix;       // the head's; its views are replaced by the strings below when used
    std::string host, program, level, message, raw;
  };
  Record record_;
  struct Broadcast {
    uint64_t line = 0;  // of the latest "Message from syslogd@..." header
    std::optional<WallTime> time;
    bool time_estimated = false;
    std::string host;
  };
  Broadcast broadcast_;
  struct JsonWrapped {
    std::string text;  // the line a JSON object wraps
    std::string host;
    std::optional<WallTime> time;
  };
  JsonWrapped json_;
  LearnedPrefix learned_prefix_;  // sets options_.prefix.learned once the first lines agree
  // Reused buffers.
  std::vector<uint32_t> candidates_;         // the line's
  std::vector<uint32_t> record_candidates_;  // a joined record's
  std::vector<EventField> fields_;
  struct Memo {
    bool filled = false;
    std::string message;
    bool matched = false;
    std::vector<EventField> fields;
  };
  std::vector<Memo> memos_;  // by pattern index
};

// Parses one line on its own: every event it yields, fully closed.
std::vector<LogEvent> ParseLine(std::string_view line, const ParseOptions& options = {});
// Parses a whole text, lines separated by '\n', numbered from 1.
std::vector<LogEvent> ParseText(std::string_view text, const ParseOptions& options = {});

}  // namespace gpudoctor
