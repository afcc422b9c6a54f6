// Reading whole logs fast: LogScanner takes bytes in blocks of any size,
// splits them into lines and hands the parser only the lines that can matter.
// A vectorscan scan over each block finds the lines that contain a pattern's
// literal; everything else (nearly all of a kernel log) is only counted. While
// an event is open the following lines are all parsed, so the result is the
// same as parsing every line. Memory stays bounded: one block plus one
// partial line of at most `max_line_bytes`.
//
// ReadAll reads ahead: where the process may run on more than one CPU,
// worker threads (as many as CPUs, up to four) read and decompress the next
// blocks in turn and run the literal scan over them side by side, while the
// calling thread parses them in order, two more blocks than workers in
// memory at most. The parser sees the same pieces in the same order either
// way, so the events are the same.
//
//   auto contents = ReadLogFile("/var/log/kern.log.1.gz");
//   if (contents) for (const LogEvent& e : contents->events) ...
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/input_file.h"
#include "common/result.h"
#include "logs/byte_source.h"
#include "logs/log_parser.h"

namespace gpudoctor {

struct ReadStats {
  uint64_t bytes = 0;
  uint64_t lines = 0;
  uint64_t parsed_lines = 0;        // lines that went through the parser
  uint64_t events = 0;
  uint64_t generic_driver_lines = 0;  // driver errors only the generic kind was found for
  uint64_t overlong_lines = 0;      // longer than max_line_bytes: skipped
  // Of the parsed lines (the fast reader parses only the lines that may matter):
  uint64_t lines_with_nul = 0;      // NUL bytes act as line breaks within them
  uint64_t invalid_utf8_lines = 0;  // parsed as they are; invalid bytes are replaced on output
  std::string error;                // why reading stopped early; empty when read to the end
  bool operator==(const ReadStats&) const = default;
};

struct ReadOptions {
  ParseOptions parse;
  size_t max_line_bytes = 64 * 1024;
  // false: every line goes through the full parser (slow; tests compare both).
  bool prefilter = true;
  // Compiled patterns of the catalog to use; null: the built-in catalog.
  std::shared_ptr<const LineMatcher> matcher;
  // ReadAll reads and scans on worker threads where the process may run on
  // more than one CPU, once `read_ahead_after` bytes have been read on the
  // calling thread (a short log is not worth starting threads for); false:
  // all on the calling thread (tests compare both).
  bool read_ahead = true;
  uint64_t read_ahead_after = 256u << 10;
};

using EventSink = std::function<void(LogEvent&&)>;

class LogScanner {
 public:
  explicit LogScanner(ReadOptions options);

  // Takes the next bytes of the log; lines may be split anywhere.
  void Consume(std::string_view bytes, const EventSink& sink);
  // End of input: parses a last line without newline and closes open events.
  void Finish(const EventSink& sink);
  // The input went quiet: closes open events so they are reported now.
  void FlushOpenEvents(const EventSink& sink);
  // The file was truncated or replaced: forgets a partial line and starts
  // numbering lines from 1 again.
  void Restart();

  const ReadStats& stats() const { return stats_; }
  ReadStats& mutable_stats() { return stats_; }

  // What the literal scan found in one piece of a block: the lines it
  // reported (offsets in the piece), each with its candidates in `ids`.
  struct PieceScan {
    struct Line {
      size_t begin;
      size_t ids_begin, ids_end;
    };
    std::vector<Line> lines;
    std::vector<uint32_t> ids;
  };
  // The part of a stream not yet passed on: a line cut by a read, or one
  // being skipped as longer than max_line_bytes.
  struct PendingLine {
    std::string bytes;
    bool skipping = false;
  };

 private:
  friend class ReadAhead;
  friend void ReadAll(ByteSource& source, LogScanner& scanner, const EventSink& sink);

  void ProcessBlock(std::string_view block, const EventSink& sink);
  // One cache-sized piece of whole lines, with the scan of it (null without the prefilter).
  void ProcessPiece(std::string_view piece, const PieceScan* scan, const EventSink& sink);
  void SkipOverlongLine();
  void SetMinuteStamps(bool minute_stamps);
  // Finish's part after the last line: counts, open events closed and passed on.
  void Close(const EventSink& sink);
  // `candidates`: the line's, from the block's scan (LogParser::Feed).
  void FeedLine(std::string_view line, uint64_t number, const EventSink& sink,
                std::optional<std::span<const uint32_t>> candidates = std::nullopt);
  void Emit(const EventSink& sink);

  ReadOptions options_;
  LogParser parser_;
  PendingLine pending_;
  // The last line of the block before, when it was not fed: an indented candidate line that opens the
  // next block continues it (a console broadcast's header split from its message by a read).
  std::string carried_line_;
  uint64_t next_line_number_ = 1;
  // Whether the input is `dmesg -H` output, decided from its first line for
  // both the fast and the full path; nullopt until that line is seen.
  std::optional<bool> minute_stamps_;
  ReadStats stats_;
  PieceScan scan_;  // the scan of the piece at hand, on this thread
  std::vector<LogEvent> events_;
};

// Reads `source` to its end (or first error, kept in the stats) through
// `scanner`, reading ahead on worker threads when the options allow (above).
void ReadAll(ByteSource& source, LogScanner& scanner, const EventSink& sink);

struct LogFileContents {
  std::vector<LogEvent> events;
  ReadStats stats;  // stats.error set when only part of the file could be read
};

// Streams a log file ("-": standard input; gzip decoded by content) through
// `sink`, in constant memory: one block of bytes and one partial line.
// Errors only when the file cannot be opened (the input rule of
// common/input_file.h); a read error midway is in the returned stats' `error`.
Result<ReadStats> ScanLogFile(const std::string& path, ReadOptions options, const EventSink& sink);

// The same for a file already opened under the input rule.
ReadStats ScanLogFile(InputFile file, ReadOptions options, const EventSink& sink);

// Reads a whole log file into memory ("-": standard input; gzip decoded by content).
// Errors only when the file cannot be opened; a read error midway keeps the
// events found before it and sets stats.error.
Result<LogFileContents> ReadLogFile(const std::string& path, ReadOptions options = {});

}  // namespace gpudoctor
