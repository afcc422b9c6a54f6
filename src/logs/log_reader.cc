#include "logs/log_reader.h"

#include <string.h>  // memrchr

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace gpudoctor {

namespace {

// Bytes are read a block at a time into one buffer, small enough to stay in
// the CPU's cache between the copy from the page cache, the literal scan and
// the newline count. Reading beats mapping the file: mapping spent about 13 %
// of the time setting up and tearing down page tables, and a mapped window
// counted fully in the resident size (16 MiB).
constexpr size_t kBlockSize = 256u << 10;

// A block given by a caller is scanned a piece of this size at a time, for
// the same reason.
constexpr size_t kScanPiece = kBlockSize;

#if defined(__x86_64__) && defined(__GNUC__)
#define GPUDOCTOR_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define GPUDOCTOR_VECTOR_CLONES
#endif

// Counts '\n' bytes, 32 at a time in 8-bit lane counters that are summed
// before they can overflow. With AVX2 where the CPU has it (the compiler
// builds both versions and picks one at load time), about 1.7x memchr hopping
// from newline to newline on kernel-log lines (bench/logs_bench).
GPUDOCTOR_VECTOR_CLONES uint64_t CountNewlines(std::string_view text) {
  using Bytes32 = uint8_t __attribute__((vector_size(32)));
  const char* data = text.data();
  const size_t size = text.size();
  const Bytes32 newline = Bytes32{} + static_cast<uint8_t>('\n');
  uint64_t count = 0;
  size_t i = 0;
  while (size - i >= sizeof(Bytes32)) {
    const size_t rounds = std::min<size_t>((size - i) / sizeof(Bytes32), 255);
    Bytes32 lanes = {};
    for (size_t round = 0; round < rounds; ++round, i += sizeof(Bytes32)) {
      Bytes32 chunk;
      std::memcpy(&chunk, data + i, sizeof chunk);
      lanes -= reinterpret_cast<Bytes32>(chunk == newline);  // a match is all ones: -1
    }
    for (size_t lane = 0; lane < sizeof(Bytes32); ++lane) count += lanes[lane];
  }
  for (; i < size; ++i) count += data[i] == '\n';
  return count;
}

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    // Log lines are ASCII almost always: eight bytes without a high bit are passed at once.
    uint64_t word;
    if (text.size() - i >= sizeof word) {
      std::memcpy(&word, text.data() + i, sizeof word);
      if ((word & 0x8080808080808080ULL) == 0) {
        i += sizeof word;
        continue;
      }
    }
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t length = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
    if (length == 0 || (c >= 0xe0 && c < 0xf0 && length != 3) || i + length > text.size()) return false;
    for (size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return false;
    }
    unsigned char next = static_cast<unsigned char>(text[i + 1]);
    if ((c == 0xe0 && next < 0xa0) || (c == 0xed && next > 0x9f) || (c == 0xf0 && next < 0x90) ||
        (c == 0xf4 && next > 0x8f)) {
      return false;  // overlong, surrogate or beyond U+10FFFF
    }
    i += length;
  }
  return true;
}

// Lines fed before an indented candidate line, at most.
constexpr int kMaxBackedUpLines = 16;

bool IsIndented(std::string_view block, size_t line_start) {
  return line_start < block.size() && (block[line_start] == ' ' || block[line_start] == '\t');
}

}  // namespace

LogScanner::LogScanner(ReadOptions options)
    : options_(std::move(options)),
      parser_(options_.parse, options_.matcher ? options_.matcher : LineMatcher::Builtin()) {}

void LogScanner::Consume(std::string_view bytes, const EventSink& sink) {
  stats_.bytes += bytes.size();
  if (!partial_.empty() || skipping_overlong_) {
    const void* found = std::memchr(bytes.data(), '\n', bytes.size());
    size_t head = found ? static_cast<size_t>(static_cast<const char*>(found) - bytes.data()) : bytes.size();
    if (!skipping_overlong_ && partial_.size() + head > options_.max_line_bytes) {
      skipping_overlong_ = true;
      partial_.clear();
      partial_.shrink_to_fit();
    }
    if (!skipping_overlong_) partial_.append(bytes.data(), head);
    if (!found) return;
    bytes.remove_prefix(head + 1);
    if (skipping_overlong_) {
      skipping_overlong_ = false;
      ++stats_.overlong_lines;
      ++next_line_number_;
    } else {
      partial_.push_back('\n');
      ProcessBlock(partial_, sink);
      partial_.clear();
    }
  }
  const char* data = bytes.data();
  const void* last = bytes.empty() ? nullptr : memrchr(data, '\n', bytes.size());
  size_t complete = last ? static_cast<size_t>(static_cast<const char*>(last) - data) + 1 : 0;
  ProcessBlock(bytes.substr(0, complete), sink);
  std::string_view tail = bytes.substr(complete);
  if (tail.size() > options_.max_line_bytes) {
    skipping_overlong_ = true;
  } else {
    partial_.assign(tail);
  }
  stats_.lines = next_line_number_ - 1;
}

void LogScanner::Finish(const EventSink& sink) {
  if (skipping_overlong_) {
    skipping_overlong_ = false;
    ++stats_.overlong_lines;
    ++next_line_number_;
  } else if (!partial_.empty()) {
    partial_.push_back('\n');
    ProcessBlock(partial_, sink);
    partial_.clear();
  }
  stats_.lines = next_line_number_ - 1;
  parser_.Flush(events_);
  Emit(sink);
}

void LogScanner::FlushOpenEvents(const EventSink& sink) {
  parser_.Flush(events_);
  Emit(sink);
}

void LogScanner::Restart() {
  partial_.clear();
  carried_line_.clear();
  skipping_overlong_ = false;
  next_line_number_ = 1;
  minute_stamps_.reset();
}

void LogScanner::ProcessBlock(std::string_view block, const EventSink& sink) {
  if (block.empty()) return;
  if (!minute_stamps_) {
    std::string_view first_line = block.substr(0, block.find('\n'));
    LineFormat format = ParseLinePrefix(first_line, options_.parse.prefix).format;
    minute_stamps_ = format == LineFormat::kDmesgMinute || format == LineFormat::kDmesgDelta;
    parser_.set_minute_stamps(*minute_stamps_);
  }
  // Line-aligned pieces; a line longer than a piece makes its piece longer.
  while (block.size() > kScanPiece) {
    size_t end;
    if (const void* newline = memrchr(block.data(), '\n', kScanPiece)) {
      end = static_cast<size_t>(static_cast<const char*>(newline) - block.data()) + 1;
    } else {
      const size_t next = block.find('\n', kScanPiece);
      end = next == std::string_view::npos ? block.size() : next + 1;
    }
    ProcessLines(block.substr(0, end), sink);
    block.remove_prefix(end);
  }
  ProcessLines(block, sink);
}

void LogScanner::ProcessLines(std::string_view block, const EventSink& sink) {
  if (block.empty()) return;
  size_t cursor = 0;  // start of the next line not yet handled
  size_t scanned = 0;  // the first of scanned_lines_ that does not start before the cursor
  // The candidates of the line at the cursor: the scan's, and none for a line it did not report.
  auto candidates_at_cursor = [&]() -> std::optional<std::span<const uint32_t>> {
    if (!options_.prefilter) return std::nullopt;
    while (scanned < scanned_lines_.size() && scanned_lines_[scanned].begin < cursor) ++scanned;
    if (scanned == scanned_lines_.size() || scanned_lines_[scanned].begin != cursor) {
      return std::span<const uint32_t>();
    }
    const ScannedLine& line = scanned_lines_[scanned];
    return std::span<const uint32_t>(scanned_ids_.data() + line.ids_begin, line.ids_end - line.ids_begin);
  };
  auto feed_next = [&] {
    size_t end = block.find('\n', cursor);
    FeedLine(block.substr(cursor, end - cursor), next_line_number_++, sink, candidates_at_cursor());
    cursor = end + 1;
  };
  // The previous block's last line, when it was not fed: the first line here may continue it.
  std::string carried;
  carried.swap(carried_line_);
  auto feed_while_wanted = [&] {
    while (parser_.WantsNextLine() && cursor < block.size()) feed_next();
  };

  if (!options_.prefilter) {
    while (cursor < block.size()) feed_next();
    return;
  }
  const uint64_t carried_number = next_line_number_ - 1;
  scanned_lines_.clear();
  scanned_ids_.clear();
  parser_.matcher().ScanBlock(block, *minute_stamps_, parser_.scratch(),
                              [this](size_t begin, size_t, std::span<const uint32_t> ids) {
                                const size_t first = scanned_ids_.size();
                                scanned_ids_.insert(scanned_ids_.end(), ids.begin(), ids.end());
                                scanned_lines_.push_back({begin, first, scanned_ids_.size()});
                              });
  for (size_t i = 0; i < scanned_lines_.size(); ++i) {
    const size_t candidate = scanned_lines_[i].begin;
    feed_while_wanted();
    if (candidate < cursor) continue;  // already fed as part of an open event
    // An indented line continues the lines before it (a console broadcast's header, a driver
    // record's head): those are fed first, as the full path reads them before it.
    size_t begin = candidate;
    for (int lines = 0; lines < kMaxBackedUpLines && begin > cursor && IsIndented(block, begin); ++lines) {
      const void* newline = memrchr(block.data() + cursor, '\n', begin - 1 - cursor);
      begin = newline ? static_cast<size_t>(static_cast<const char*>(newline) - block.data()) + 1 : cursor;
    }
    if (begin == 0 && IsIndented(block, 0) && !carried.empty()) FeedLine(carried, carried_number, sink);
    carried.clear();
    next_line_number_ += CountNewlines(block.substr(cursor, begin - cursor));
    cursor = begin;
    feed_next();
    while (cursor <= candidate && cursor < block.size()) feed_next();
  }
  feed_while_wanted();
  if (cursor < block.size()) {
    const void* newline = block.size() > 1 ? memrchr(block.data(), '\n', block.size() - 1) : nullptr;
    const size_t last = newline ? static_cast<size_t>(static_cast<const char*>(newline) - block.data()) + 1 : 0;
    if (last >= cursor) carried_line_.assign(block.substr(last, block.size() - 1 - last));
  }
  next_line_number_ += CountNewlines(block.substr(cursor));
}

void LogScanner::FeedLine(std::string_view line, uint64_t number, const EventSink& sink,
                          std::optional<std::span<const uint32_t>> candidates) {
  if (line.size() > options_.max_line_bytes) {
    ++stats_.overlong_lines;
    return;
  }
  ++stats_.parsed_lines;
  if (std::memchr(line.data(), '\0', line.size())) {
    // Files cut by a crash often hold runs of NUL bytes glued to the next
    // message; each NUL-free piece is read as a line of its own.
    ++stats_.lines_with_nul;
    size_t start = 0;
    while (start < line.size()) {
      size_t end = line.find('\0', start);
      if (end == std::string_view::npos) end = line.size();
      if (end > start) parser_.Feed(line.substr(start, end - start), number, events_);
      start = end + 1;
    }
  } else {
    if (!IsValidUtf8(line)) ++stats_.invalid_utf8_lines;
    parser_.Feed(line, number, events_, candidates);
  }
  Emit(sink);
}

void LogScanner::Emit(const EventSink& sink) {
  stats_.generic_driver_lines = parser_.generic_driver_lines();
  for (LogEvent& event : events_) {
    ++stats_.events;
    sink(std::move(event));
  }
  events_.clear();
}

void ReadAll(ByteSource& source, LogScanner& scanner, const EventSink& sink) {
  // Not zero-filled: every byte is written by Read before it is scanned.
  std::unique_ptr<char[]> buffer(new char[kBlockSize]);
  while (true) {
    Result<size_t> n = source.Read(buffer.get(), kBlockSize);
    if (!n) {
      scanner.mutable_stats().error = n.error().message;
      break;
    }
    if (*n == 0) break;
    scanner.Consume(std::string_view(buffer.get(), *n), sink);
  }
  scanner.Finish(sink);
}

namespace {

// Reads a gzip or piped log to its end. A source that failed to start (its
// first bytes could not be read) is an error midway, like any later one.
ReadStats ScanStream(Result<std::unique_ptr<ByteSource>> source, LogScanner& scanner, const EventSink& sink) {
  if (source) {
    ReadAll(**source, scanner, sink);
  } else {
    scanner.mutable_stats().error = source.error().message;
    scanner.Finish(sink);
  }
  return scanner.stats();
}

}  // namespace

Result<ReadStats> ScanLogFile(const std::string& path, ReadOptions options, const EventSink& sink) {
  if (path == "-") {
    if (options.parse.source.empty()) options.parse.source = path;
    LogScanner scanner(std::move(options));
    return ScanStream(OpenLogFile(path), scanner, sink);
  }
  auto file = InputFile::Open(path);
  if (!file) return file.error();
  return ScanLogFile(std::move(*file), std::move(options), sink);
}

ReadStats ScanLogFile(InputFile file, ReadOptions options, const EventSink& sink) {
  if (options.parse.source.empty()) options.parse.source = file.path();
  LogScanner scanner(std::move(options));
  return ScanStream(OpenLogFile(std::move(file)), scanner, sink);
}

Result<LogFileContents> ReadLogFile(const std::string& path, ReadOptions options) {
  LogFileContents contents;
  auto stats = ScanLogFile(path, std::move(options),
                           [&](LogEvent&& event) { contents.events.push_back(std::move(event)); });
  if (!stats) return stats.error();
  contents.stats = std::move(stats).value();
  return contents;
}
}  // namespace gpudoctor
