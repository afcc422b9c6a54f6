#include "logs/log_reader.h"

#include <sched.h>   // sched_getaffinity
#include <string.h>  // memrchr

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
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

// Passes `bytes`, the next of a stream, on as runs of whole lines:
// `on_lines(text, transient)` for each (every line ends in '\n'; a transient
// run lives in `pending` and is valid only during the call), `on_overlong()`
// for a line longer than `max_line_bytes`, skipped. A line cut at the end
// waits in `pending` for the rest.
template <typename OnLines, typename OnOverlong>
void JoinLines(LogScanner::PendingLine& pending, std::string_view bytes, size_t max_line_bytes, OnLines&& on_lines,
               OnOverlong&& on_overlong) {
  if (!pending.bytes.empty() || pending.skipping) {
    const void* found = std::memchr(bytes.data(), '\n', bytes.size());
    size_t head = found ? static_cast<size_t>(static_cast<const char*>(found) - bytes.data()) : bytes.size();
    if (!pending.skipping && pending.bytes.size() + head > max_line_bytes) {
      pending.skipping = true;
      pending.bytes.clear();
      pending.bytes.shrink_to_fit();
    }
    if (!pending.skipping) pending.bytes.append(bytes.data(), head);
    if (!found) return;
    bytes.remove_prefix(head + 1);
    if (pending.skipping) {
      pending.skipping = false;
      on_overlong();
    } else {
      pending.bytes.push_back('\n');
      on_lines(std::string_view(pending.bytes), /*transient=*/true);
      pending.bytes.clear();
    }
  }
  const char* data = bytes.data();
  const void* last = bytes.empty() ? nullptr : memrchr(data, '\n', bytes.size());
  size_t complete = last ? static_cast<size_t>(static_cast<const char*>(last) - data) + 1 : 0;
  if (complete > 0) on_lines(bytes.substr(0, complete), /*transient=*/false);
  std::string_view tail = bytes.substr(complete);
  if (tail.size() > max_line_bytes) {
    pending.skipping = true;
  } else {
    pending.bytes.assign(tail);
  }
}

// The end of the stream: a last line without newline is passed on as if it had one.
template <typename OnLines, typename OnOverlong>
void FinishLines(LogScanner::PendingLine& pending, OnLines&& on_lines, OnOverlong&& on_overlong) {
  if (pending.skipping) {
    pending.skipping = false;
    on_overlong();
  } else if (!pending.bytes.empty()) {
    pending.bytes.push_back('\n');
    on_lines(std::string_view(pending.bytes), /*transient=*/true);
    pending.bytes.clear();
  }
}

// Cuts a run of whole lines into line-aligned pieces of about kScanPiece
// bytes; a line longer than a piece makes its piece longer.
template <typename OnPiece>
void ForEachPiece(std::string_view block, OnPiece&& on_piece) {
  while (block.size() > kScanPiece) {
    size_t end;
    if (const void* newline = memrchr(block.data(), '\n', kScanPiece)) {
      end = static_cast<size_t>(static_cast<const char*>(newline) - block.data()) + 1;
    } else {
      const size_t next = block.find('\n', kScanPiece);
      end = next == std::string_view::npos ? block.size() : next + 1;
    }
    on_piece(block.substr(0, end));
    block.remove_prefix(end);
  }
  if (!block.empty()) on_piece(block);
}

// Whether the log is `dmesg -H` (or delta) output, judged from the first line of its first run of lines.
bool HasMinuteStamps(std::string_view block, const PrefixOptions& prefix) {
  std::string_view first_line = block.substr(0, block.find('\n'));
  LineFormat format = ParseLinePrefix(first_line, prefix).format;
  return format == LineFormat::kDmesgMinute || format == LineFormat::kDmesgDelta;
}

void ScanPiece(const LineMatcher& matcher, std::string_view piece, bool minute_stamps, LineMatcher::Scratch& scratch,
               LogScanner::PieceScan& scan) {
  scan.lines.clear();
  scan.ids.clear();
  matcher.ScanBlock(piece, minute_stamps, scratch, [&scan](size_t begin, size_t, std::span<const uint32_t> ids) {
    const size_t first = scan.ids.size();
    scan.ids.insert(scan.ids.end(), ids.begin(), ids.end());
    scan.lines.push_back({begin, first, scan.ids.size()});
  });
}

}  // namespace

LogScanner::LogScanner(ReadOptions options)
    : options_(std::move(options)),
      parser_(options_.parse, options_.matcher ? options_.matcher : LineMatcher::Builtin()) {}

void LogScanner::Consume(std::string_view bytes, const EventSink& sink) {
  stats_.bytes += bytes.size();
  JoinLines(
      pending_, bytes, options_.max_line_bytes, [&](std::string_view lines, bool) { ProcessBlock(lines, sink); },
      [this] { SkipOverlongLine(); });
  stats_.lines = next_line_number_ - 1;
}

void LogScanner::Finish(const EventSink& sink) {
  FinishLines(
      pending_, [&](std::string_view lines, bool) { ProcessBlock(lines, sink); }, [this] { SkipOverlongLine(); });
  Close(sink);
}

void LogScanner::Close(const EventSink& sink) {
  stats_.lines = next_line_number_ - 1;
  parser_.Flush(events_);
  Emit(sink);
}

void LogScanner::FlushOpenEvents(const EventSink& sink) {
  parser_.Flush(events_);
  Emit(sink);
}

void LogScanner::Restart() {
  pending_ = {};
  carried_line_.clear();
  next_line_number_ = 1;
  minute_stamps_.reset();
}

void LogScanner::SkipOverlongLine() {
  ++stats_.overlong_lines;
  ++next_line_number_;
}

void LogScanner::SetMinuteStamps(bool minute_stamps) {
  minute_stamps_ = minute_stamps;
  parser_.set_minute_stamps(minute_stamps);
}

void LogScanner::ProcessBlock(std::string_view block, const EventSink& sink) {
  if (block.empty()) return;
  if (!minute_stamps_) SetMinuteStamps(HasMinuteStamps(block, options_.parse.prefix));
  ForEachPiece(block, [&](std::string_view piece) {
    if (!options_.prefilter) return ProcessPiece(piece, nullptr, sink);
    ScanPiece(parser_.matcher(), piece, *minute_stamps_, parser_.scratch(), scan_);
    ProcessPiece(piece, &scan_, sink);
  });
}

void LogScanner::ProcessPiece(std::string_view block, const PieceScan* scan, const EventSink& sink) {
  size_t cursor = 0;  // start of the next line not yet handled
  size_t scanned = 0;  // the first of the scan's lines that does not start before the cursor
  // The candidates of the line at the cursor: the scan's, and none for a line it did not report.
  auto candidates_at_cursor = [&]() -> std::optional<std::span<const uint32_t>> {
    if (!scan) return std::nullopt;
    while (scanned < scan->lines.size() && scan->lines[scanned].begin < cursor) ++scanned;
    if (scanned == scan->lines.size() || scan->lines[scanned].begin != cursor) return std::span<const uint32_t>();
    const PieceScan::Line& line = scan->lines[scanned];
    return std::span<const uint32_t>(scan->ids.data() + line.ids_begin, line.ids_end - line.ids_begin);
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

  if (!scan) {
    while (cursor < block.size()) feed_next();
    return;
  }
  const uint64_t carried_number = next_line_number_ - 1;
  for (const PieceScan::Line& line : scan->lines) {
    const size_t candidate = line.begin;
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

namespace {

// The CPUs this process may run on.
int UsableCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return static_cast<int>(std::thread::hardware_concurrency());
  return CPU_COUNT(&set);
}

}  // namespace

// ReadAll's reading ahead: worker threads read the source in turn, cut what
// they read into pieces of whole lines and run the literal scan over them,
// a few blocks ahead of the thread that parses. Reading is one worker at a
// time, in order (each block gets the next sequence number under the read
// lock); the scans, most of the work when events are few, run side by side;
// the parsing thread takes the blocks back in sequence. Everything a block
// carries is in a Batch: the bytes of one read and the pieces cut from them,
// in the order the scanner on the calling thread would have made them.
// Batches go back to be filled again, so memory stays at two blocks more
// than workers.
class ReadAhead {
 public:
  struct Piece {
    bool overlong = false;  // a line too long, skipped: no text
    std::string_view text;
    LogScanner::PieceScan scan;
  };
  struct Batch {
    std::unique_ptr<char[]> buffer{new char[kBlockSize]};
    size_t bytes = 0;    // read into buffer
    std::string joined;  // a line joined across reads: pieces may point here too
    std::vector<Piece> pieces;
    size_t piece_count = 0;
    uint64_t sequence = 0;
    std::optional<bool> minute_stamps;  // as decided when it was read; set once a piece has text
  };

  // Reads the rest of `source` ahead on `workers` threads while this one parses it through `scanner`,
  // to its end; false, having read nothing, when no thread can be had (a process or memory limit).
  static bool ReadRest(ByteSource& source, LogScanner& scanner, const EventSink& sink, int workers);

  ReadAhead(ByteSource& source, LogScanner& scanner, int workers)
      : source_(source),
        matcher_(scanner.parser_.matcher()),
        max_line_bytes_(scanner.options_.max_line_bytes),
        prefilter_(scanner.options_.prefilter),
        prefix_(scanner.options_.parse.prefix),
        batches_(static_cast<size_t>(workers) + 2),
        pending_(scanner.pending_),
        minute_stamps_(scanner.minute_stamps_),
        slots_(batches_) {
    threads_.reserve(static_cast<size_t>(workers));  // so that only starting a thread can fail below
    try {
      for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { Work(); });
    } catch (const std::system_error&) {
      if (threads_.empty()) throw;  // none: the caller reads on its own thread
    }
    scanner.pending_ = {};  // the rest of a cut line now comes from the workers
  }

  ~ReadAhead() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    space_.notify_all();
    for (std::thread& thread : threads_) thread.join();
  }

  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // The next batch, in order; null at the end of the source, or when a worker failed (then
  // error() and failure() say why).
  std::unique_ptr<Batch> Next() {
    std::unique_lock lock(mutex_);
    std::unique_ptr<Batch>* slot = &slots_[next_ % batches_];
    filled_.wait(lock, [&] { return *slot || failure_ || (last_ && next_ > *last_); });
    if (failure_ || !*slot) return nullptr;
    ++next_;
    return std::move(*slot);
  }

  // Hands a batch back to be filled again.
  void Recycle(std::unique_ptr<Batch> batch) {
    {
      std::lock_guard lock(mutex_);
      free_.push_back(std::move(batch));
    }
    space_.notify_one();
  }

  // After Next gave null: why the source ended before its end, or empty; and
  // an exception a worker met (they stopped there), to rethrow on this thread.
  std::string error() {
    std::lock_guard lock(mutex_);
    return error_;
  }
  std::exception_ptr failure() {
    std::lock_guard lock(mutex_);
    return failure_;
  }

 private:
  void Work() {
    try {
      LineMatcher::Scratch scratch(matcher_);
      while (std::unique_ptr<Batch> batch = Empty()) {
        if (!Read(*batch)) {
          Recycle(std::move(batch));
          return;
        }
        if (prefilter_) {
          for (size_t i = 0; i < batch->piece_count; ++i) {
            Piece& piece = batch->pieces[i];
            if (!piece.overlong) ScanPiece(matcher_, piece.text, *batch->minute_stamps, scratch, piece.scan);
          }
        }
        Publish(std::move(batch));
      }
    } catch (...) {
      {
        std::lock_guard lock(mutex_);
        if (!failure_) failure_ = std::current_exception();
        stopping_ = true;
      }
      filled_.notify_all();
      space_.notify_all();
    }
  }

  // A batch to fill: a recycled one, or a new one while fewer than batches_ exist; null when stopping.
  std::unique_ptr<Batch> Empty() {
    std::unique_lock lock(mutex_);
    space_.wait(lock, [this] { return stopping_ || !free_.empty() || made_ < batches_; });
    if (stopping_) return nullptr;
    if (!free_.empty()) {
      std::unique_ptr<Batch> batch = std::move(free_.back());
      free_.pop_back();
      return batch;
    }
    ++made_;
    lock.unlock();
    return std::make_unique<Batch>();
  }

  // Reads the next block into `batch` and cuts it into pieces, under the read lock; false when
  // another worker has already read to the end.
  bool Read(Batch& batch) {
    std::lock_guard read_lock(read_mutex_);
    if (read_to_end_) return false;
    batch.bytes = 0;
    batch.joined.clear();
    batch.piece_count = 0;
    batch.sequence = next_sequence_++;
    auto add_lines = [&](std::string_view lines, bool transient) { AddLines(batch, lines, transient); };
    auto add_overlong = [&] { AddPiece(batch).overlong = true; };
    Result<size_t> n = source_.Read(batch.buffer.get(), kBlockSize);
    if (!n || *n == 0) {
      FinishLines(pending_, add_lines, add_overlong);
      read_to_end_ = true;
      std::lock_guard lock(mutex_);
      if (!n) error_ = n.error().message;
      last_ = batch.sequence;
    } else {
      batch.bytes = *n;
      JoinLines(pending_, std::string_view(batch.buffer.get(), *n), max_line_bytes_, add_lines, add_overlong);
    }
    batch.minute_stamps = minute_stamps_;
    return true;
  }

  void Publish(std::unique_ptr<Batch> batch) {
    {
      std::lock_guard lock(mutex_);
      slots_[batch->sequence % batches_] = std::move(batch);
    }
    filled_.notify_one();
  }

  Piece& AddPiece(Batch& batch) {
    if (batch.piece_count == batch.pieces.size()) batch.pieces.emplace_back();
    Piece& piece = batch.pieces[batch.piece_count++];
    piece.overlong = false;
    piece.text = {};
    return piece;
  }

  void AddLines(Batch& batch, std::string_view lines, bool transient) {
    if (transient) {
      // At most one joined line per read, and it comes first: nothing points into `joined` yet.
      batch.joined.assign(lines);
      lines = batch.joined;
    }
    if (!minute_stamps_) minute_stamps_ = HasMinuteStamps(lines, prefix_);
    ForEachPiece(lines, [&](std::string_view text) { AddPiece(batch).text = text; });
  }

  ByteSource& source_;
  const LineMatcher& matcher_;
  const size_t max_line_bytes_;
  const bool prefilter_;
  const PrefixOptions prefix_;
  const size_t batches_;

  // The reading, one worker at a time.
  std::mutex read_mutex_;
  LogScanner::PendingLine pending_;
  std::optional<bool> minute_stamps_;
  uint64_t next_sequence_ = 0;
  bool read_to_end_ = false;

  // The hand-over.
  std::mutex mutex_;
  std::condition_variable filled_;  // a batch is ready, or the end is, or a worker failed
  std::condition_variable space_;   // a batch came back, or stopping
  std::vector<std::unique_ptr<Batch>> slots_;  // scanned batches by sequence, modulo batches_
  std::vector<std::unique_ptr<Batch>> free_;
  size_t made_ = 0;
  uint64_t next_ = 0;              // the sequence the parsing thread takes next
  std::optional<uint64_t> last_;   // the sequence of the last batch, once read
  std::string error_;
  std::exception_ptr failure_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;  // last: they start once everything above is made
};

bool ReadAhead::ReadRest(ByteSource& source, LogScanner& scanner, const EventSink& sink, int workers) {
  std::optional<ReadAhead> ahead;
  try {
    ahead.emplace(source, scanner, workers);
  } catch (const std::system_error&) {
    return false;
  }
  while (std::unique_ptr<Batch> batch = ahead->Next()) {
    scanner.stats_.bytes += batch->bytes;
    for (size_t i = 0; i < batch->piece_count; ++i) {
      const Piece& piece = batch->pieces[i];
      if (piece.overlong) {
        scanner.SkipOverlongLine();
        continue;
      }
      if (!scanner.minute_stamps_) scanner.SetMinuteStamps(*batch->minute_stamps);
      scanner.ProcessPiece(piece.text, scanner.options_.prefilter ? &piece.scan : nullptr, sink);
    }
    ahead->Recycle(std::move(batch));
  }
  if (std::exception_ptr failure = ahead->failure()) std::rethrow_exception(failure);
  scanner.stats_.error = ahead->error();
  scanner.Close(sink);
  return true;
}

void ReadAll(ByteSource& source, LogScanner& scanner, const EventSink& sink) {
  // As many workers as CPUs, up to four: beyond that the parsing thread is the bottleneck at any
  // density of events.
  const int workers = scanner.options_.read_ahead ? std::min(UsableCpus(), 4) : 0;
  bool may_read_ahead = workers > 1;
  // Not zero-filled: every byte is written by Read before it is scanned.
  std::unique_ptr<char[]> buffer(new char[kBlockSize]);
  uint64_t read_here = 0;
  while (true) {
    if (may_read_ahead && read_here >= scanner.options_.read_ahead_after) {
      if (ReadAhead::ReadRest(source, scanner, sink, workers)) return;
      may_read_ahead = false;  // no thread to be had: not asked again for every block
    }
    Result<size_t> n = source.Read(buffer.get(), kBlockSize);
    if (!n) {
      scanner.mutable_stats().error = n.error().message;
      break;
    }
    if (*n == 0) break;
    read_here += *n;
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
