#include "logs/log_reader.h"

#include <sched.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/input_test_support.h"
#include "common/text.h"
#include "logs/event_json.h"

namespace gpudoctor {
namespace {

const std::string kCorpus = std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/kernel_logs/";
const std::string kXid79 = "[   35.563936] NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\n";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string Gzip(const std::string& data) {
  z_stream stream{};
  deflateInit2(&stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&stream, data.size()) + 64, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    char name[] = "/tmp/gd_logs_test_XXXXXX";
    int fd = mkstemp(name);
    path_ = name;
    std::ofstream(path_, std::ios::binary) << contents;
    close(fd);
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct Scan {
  std::vector<LogEvent> events;
  ReadStats stats;
};

// `read_ahead_after`: bytes read before reading ahead starts; nullopt: never.
Scan ScanBytes(const std::string& data, size_t max_read = SIZE_MAX, bool prefilter = true,
               std::optional<uint64_t> read_ahead_after = 256u << 10) {
  MemoryByteSource source(data, "memory", max_read);
  ReadOptions options;
  options.prefilter = prefilter;
  options.read_ahead = read_ahead_after.has_value();
  if (read_ahead_after) options.read_ahead_after = *read_ahead_after;
  options.parse.prefix.reference_time = WallTime{std::chrono::hours(24 * 365 * 55)};
  LogScanner scanner(options);
  Scan scan;
  ReadAll(source, scanner, [&](LogEvent&& event) { scan.events.push_back(std::move(event)); });
  scan.stats = scanner.stats();
  return scan;
}

std::vector<std::string> Summary(const std::vector<LogEvent>& events) {
  std::vector<std::string> out;
  for (const LogEvent& e : events) {
    out.push_back(e.kind + "@" + std::to_string(e.line_number) + " " + e.pci_bus_id + " " + e.detail + " " + e.raw);
  }
  return out;
}

TEST(LogReader, MissingFileIsAnError) {
  auto result = ReadLogFile("/nonexistent/kern.log");
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("/nonexistent/kern.log"), std::string::npos);
}

// A path that is no regular file is refused with the reason; standard input
// is read only as "-".
TEST(LogReader, ReadsOnlyRegularFilesByName) {
  input_testing::RefusedInputs refused;
  for (const input_testing::RefusedInput& input : refused.All()) {
    auto result = ReadLogFile(input.path);
    ASSERT_FALSE(result) << input.kind;
    EXPECT_EQ(result.error().message, input.path + ": " + input.message) << input.kind;
  }
}

TEST(LogReader, GzipFilesAreDecodedByContent) {
  std::string plain = ReadFile(kCorpus + "047.log");
  TempFile compressed(Gzip(plain));
  auto from_gzip = ReadLogFile(compressed.path());
  ASSERT_TRUE(from_gzip);
  EXPECT_EQ(from_gzip->stats.error, "");
  auto from_plain = ReadLogFile(kCorpus + "047.log");
  ASSERT_TRUE(from_plain);
  EXPECT_EQ(Summary(from_gzip->events), Summary(from_plain->events));
  EXPECT_EQ(from_gzip->events.size(), 3u);
  EXPECT_EQ(from_gzip->events[0].source, compressed.path());
}

TEST(LogReader, ConcatenatedGzipMembers) {
  TempFile compressed(Gzip(kXid79) + Gzip(kXid79));
  auto result = ReadLogFile(compressed.path());
  ASSERT_TRUE(result);
  EXPECT_EQ(result->stats.error, "");
  EXPECT_EQ(result->events.size(), 4u);  // xid + gpu_off_bus, twice
  EXPECT_EQ(result->stats.lines, 2u);
}

TEST(LogReader, TruncatedGzipKeepsWhatWasDecodedAndSaysWhy) {
  std::string many;
  for (int i = 0; i < 2000; ++i) many += "[ 1.0] ordinary line " + std::to_string(i) + "\n";
  std::string data = kXid79 + many;
  std::string compressed = Gzip(data);
  TempFile cut(compressed.substr(0, compressed.size() * 2 / 3));
  auto result = ReadLogFile(cut.path());
  ASSERT_TRUE(result);
  EXPECT_NE(result->stats.error.find("truncated gzip"), std::string::npos) << result->stats.error;
  ASSERT_EQ(result->events.size(), 2u);
  EXPECT_EQ(result->events[0].xid, 79u);
  EXPECT_GT(result->stats.lines, 100u);
}

TEST(LogReader, CorruptGzipIsAClearError) {
  std::string compressed = Gzip(kXid79 + kXid79);
  for (size_t i = 12; i < compressed.size() - 8; ++i) compressed[i] = static_cast<char>(compressed[i] ^ 0x5a);
  TempFile corrupt(compressed);
  auto result = ReadLogFile(corrupt.path());
  ASSERT_TRUE(result);
  EXPECT_NE(result->stats.error, "");
}

TEST(LogReader, AnySplitOfTheInputGivesTheSameEvents) {
  for (const char* name : {"001.log", "015.log", "018.log", "029.log", "043.log"}) {
    std::string data = ReadFile(kCorpus + name);
    auto whole = Summary(ScanBytes(data).events);
    ASSERT_FALSE(whole.empty()) << name;
    for (size_t piece : {1u, 7u, 64u, 1000u}) {
      EXPECT_EQ(Summary(ScanBytes(data, piece).events), whole) << name << " in pieces of " << piece;
    }
  }
}

TEST(LogReader, PrefilterAgreesWithFullParseAmidNoise) {
  std::string data;
  for (int i = 0; i < 8000; ++i) {
    data += "[ " + std::to_string(i) + ".000000] usb 1-1: new high-speed USB device number " + std::to_string(i) + "\n";
    if (i % 500 == 7) data += ReadFile(kCorpus + "018.log") + ReadFile(kCorpus + "001.log");
    if (i % 700 == 3) data += kXid79;
  }
  ASSERT_GT(data.size(), 512u << 10);  // several of the scanner's cache-sized pieces
  Scan slow = ScanBytes(data, 4096, false);
  EXPECT_GT(slow.events.size(), 40u);
  // Small reads, and reads large enough that a block is split into pieces.
  for (size_t read_size : {size_t{4096}, size_t{1} << 20}) {
    Scan fast = ScanBytes(data, read_size, true);
    EXPECT_EQ(Summary(fast.events), Summary(slow.events)) << read_size;
    EXPECT_LT(fast.stats.parsed_lines, slow.stats.parsed_lines / 4) << read_size;
    EXPECT_EQ(fast.stats.lines, slow.stats.lines) << read_size;
  }
}

// The fast reader parses an open event's window only where a line holds a literal or a literal-less
// continue pattern reaches; both readers must give the same events whatever lies between.
TEST(LogReader, AWindowsOtherLinesChangeNothing) {
  const std::string start = "[  100.000000] INFO: task python3:4242 blocked for more than 120 seconds.\n";
  const std::string tainted = "[  100.000100]       Tainted: P           O    4.4.146-1.el7.elrepo.x86_64 #1\n";
  const std::string legacy_state = "[  100.000300] python3         D ffff883f2cc43bd8     0  4242   5396 0x00000084\n";
  const std::string noise = "[  100.000200] usb 1-1: new high-speed USB device number 3\n";
  const std::string late_noise = "[  300.000000] usb 1-1: new high-speed USB device number 4\n";
  const std::string state = "[  100.000400] task:python3     state:D stack:0     pid:4242  ppid:1 flags:0x00004000\n";
  struct Case {
    std::string name, input, state;  // the state the hung task ends with ("" for none)
    size_t events = 1;
  };
  const std::vector<Case> cases = {
      {"legacy state where kernels print it", start + tainted + noise + legacy_state, "D"},
      {"legacy state past its reach", start + tainted + noise + noise + noise + noise + noise + legacy_state, ""},
      // Past the reach, a line that can be part of no event does not close one by its time: only lines
      // that may be read decide (the clock went back here, as it does when a log interleaves two sources).
      {"a late line between the start and its state",
       start + noise + noise + noise + noise + noise + late_noise + state, "D"},
      // The late line closed the report: its state line is then a report cut from its first line, an event
      // of its own.
      {"a late line within the reach", start + late_noise + state, "", 2},
  };
  for (const Case& c : cases) {
    Scan slow = ScanBytes(c.input, SIZE_MAX, false);
    ASSERT_EQ(slow.events.size(), c.events) << c.name;
    EXPECT_EQ(slow.events[0].kind, "hung_task") << c.name;
    EXPECT_EQ(slow.events[0].Field("state"), c.state) << c.name;
    for (size_t read_size : {SIZE_MAX, size_t{61}}) {
      Scan fast = ScanBytes(c.input, read_size, true);
      EXPECT_EQ(Summary(fast.events), Summary(slow.events)) << c.name << " " << read_size;
      EXPECT_EQ(fast.events.empty() ? "" : fast.events[0].Field("state"), c.state) << c.name << " " << read_size;
    }
  }
  // Past its reach, the fast reader parses none of the window's other lines.
  std::string long_window = start + tainted;
  for (int i = 0; i < 30; ++i) long_window += noise;
  EXPECT_EQ(ScanBytes(long_window).stats.parsed_lines, 1u + 5u);
}

// A raw "NVRM:" line continues the driver's prefixed line before it, never a line of another program.
TEST(LogReader, ARawDriverLineContinuesOnlyTheDriversLine) {
  const std::string record =
      "Jun 17 13:06:42 node kernel: NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:20b5)\n"
      "NVRM: installed in this system has fallen off the bus and is not responding to commands.\n";
  for (const std::string& before : {std::string(), std::string("Jun 17 13:06:41 node kernel: usb 1-1: new device\n")}) {
    Scan slow = ScanBytes(before + record, SIZE_MAX, false);
    Scan fast = ScanBytes(before + record, SIZE_MAX, true);
    EXPECT_EQ(Summary(fast.events), Summary(slow.events)) << before;
    ASSERT_FALSE(slow.events.empty()) << before;
    EXPECT_EQ(slow.events[0].kind, "gpu_off_bus") << before;
  }
  // After another program's line, the raw line is a record of its own: both readers agree.
  const std::string after_other = "Jun 17 13:06:41 node kernel: usb 1-1: new device\n"
                                  "NVRM: installed in this system has fallen off the bus and is not responding.\n";
  EXPECT_EQ(Summary(ScanBytes(after_other, SIZE_MAX, true).events),
            Summary(ScanBytes(after_other, SIZE_MAX, false).events));
}

TEST(LogReader, LinesBeforeAnIndentedCandidateAreReadFirst) {
  // madMAx43v3r/chia-plotter#535: the header names no event's words, the indented line after it does.
  const std::string data =
      "Message from syslogd@plot-071 at Jun 17 13:06:42 ...\n"
      " kernel:[405108.698255] watchdog: BUG: soft lockup - CPU#2 stuck for 22s! [chia_plot:29632]\n";
  for (const std::string& input : {data, "[ 1.000000] usb 1-1: new device\n" + data}) {
    Scan slow = ScanBytes(input, SIZE_MAX, false);
    // Whole, and read a few bytes at a time, so that the header and its message come in different blocks.
    for (size_t read_size : {SIZE_MAX, size_t{7}, size_t{53}}) {
      Scan fast = ScanBytes(input, read_size, true);
      ASSERT_EQ(fast.events.size(), 1u) << input << read_size;
      EXPECT_EQ(fast.events[0].host, "plot-071") << input << read_size;
      EXPECT_EQ(Summary(fast.events), Summary(slow.events)) << input << read_size;
    }
  }
}

TEST(LogReader, NulBytesSplitLines) {
  // Counted among the lines parsed: the second line holds a literal, so the fast reader parses it.
  std::string data = std::string(300, '\0') + kXid79 + std::string("NVRM: text\0more\n", 16);
  Scan scan = ScanBytes(data);
  ASSERT_EQ(scan.events.size(), 2u);
  EXPECT_EQ(scan.events[0].line_number, 1u);
  EXPECT_EQ(scan.stats.lines_with_nul, 2u);
  EXPECT_EQ(scan.stats.lines, 2u);
}

TEST(LogReader, InvalidUtf8IsCountedAndStillParsed) {
  std::string data = "[ 1.0] NVRM: Xid (PCI:0000:01:00): 31, pid=7, name=caf\xe9\xff, MMU Fault\n";
  Scan scan = ScanBytes(data);
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.stats.invalid_utf8_lines, 1u);
  std::string json = JsonLine(LogEventToJson(scan.events[0]));
  EXPECT_TRUE(nlohmann::json::accept(json));
}

TEST(LogReader, Utf8IsJudgedAtEveryOffset) {
  // The check passes ASCII eight bytes at a time: a sequence anywhere in or across those words, valid or
  // not, and one cut by the line's end, must be judged as one byte at a time would.
  std::string data;
  size_t invalid = 0;
  for (size_t pad = 0; pad < 20; ++pad) {
    const std::string head = "[ 1.0] NVRM: Xid (PCI:0000:01:00): 31, pid=7, name=" + std::string(pad, 'p');
    data += head + "caf\xc3\xa9 \xe2\x82\xac, MMU Fault\n";  // valid: e-acute, euro sign
    data += head + "caf\xe9, MMU Fault\n";                    // invalid: Latin-1
    data += head + "\xed\xa0\x80, MMU Fault\n";              // invalid: a surrogate
    data += head + "\xe2\x82\n";                               // invalid: cut by the line's end
    invalid += 3;
  }
  Scan scan = ScanBytes(data);
  EXPECT_EQ(scan.events.size(), 80u);
  EXPECT_EQ(scan.stats.invalid_utf8_lines, invalid);
}

TEST(LogReader, HugeLinesAreSkippedAndCounted) {
  std::string huge = "[ 1.0] NVRM: Xid (PCI:0000:01:00): 79, " + std::string(1 << 20, 'x') + "\n";
  std::string data = huge + kXid79 + huge.substr(0, huge.size() - 1);  // the last one has no newline
  for (size_t piece : {SIZE_MAX, size_t{65536}, size_t{999}}) {
    Scan scan = ScanBytes(data, piece);
    EXPECT_EQ(scan.stats.overlong_lines, 2u) << piece;
    ASSERT_EQ(scan.events.size(), 2u) << piece;
    EXPECT_EQ(scan.events[0].line_number, 2u) << piece;
    EXPECT_EQ(scan.stats.lines, 3u) << piece;
  }
}

TEST(LogReader, DmesgHumanOutputIsDatedByItsMinuteStamps) {
  std::string data = "[Feb23 16:24] Linux version 6.8.0\n";
  for (int i = 0; i < 500; ++i) data += "[  +0.000100] usb 1-1: noise\n";
  data += "[Feb23 16:25] usb 1-2: new device\n[  +0.000316] " + kXid79.substr(kXid79.find("NVRM"));
  for (bool prefilter : {true, false}) {
    Scan scan = ScanBytes(data, 4096, prefilter);
    ASSERT_EQ(scan.events.size(), 2u) << prefilter;
    ASSERT_TRUE(scan.events[0].time) << prefilter;
    EXPECT_EQ(FormatIsoUtc(*scan.events[0].time).substr(5, 11), "02-23T16:25") << prefilter;
    EXPECT_TRUE(scan.events[0].time_estimated);
  }
}

bool SeveralCpus() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 1;
}

// Every count the reader keeps, to compare two reads of the same bytes.
std::string Counts(const ReadStats& s) {
  std::ostringstream out;
  out << "bytes " << s.bytes << " lines " << s.lines << " parsed " << s.parsed_lines << " events " << s.events
      << " generic " << s.generic_driver_lines << " overlong " << s.overlong_lines << " nul " << s.lines_with_nul
      << " utf8 " << s.invalid_utf8_lines << " error '" << s.error << "'";
  return out.str();
}

// The events as `logs --json` writes them: every field.
std::string JsonLines(const std::vector<LogEvent>& events) {
  std::string out;
  for (const LogEvent& event : events) AppendLogEventJsonLine(out, event);
  return out;
}

TEST(LogReader, ReadingAheadOnWorkerThreadsChangesNothing) {
  if (!SeveralCpus()) GTEST_SKIP() << "reading ahead needs more than one CPU";
  std::vector<std::string> inputs;
  for (const auto& entry : std::filesystem::directory_iterator(kCorpus)) inputs.push_back(ReadFile(entry.path()));
  ASSERT_GT(inputs.size(), 20u);
  // Lines cut by every read, over-long lines, NUL bytes, no newline at the end.
  std::string huge = "[ 1.0] NVRM: Xid (PCI:0000:01:00): 79, " + std::string(300 << 10, 'x') + "\n";
  inputs.push_back(huge + kXid79 + std::string(5, '\0') + kXid79 + huge.substr(0, huge.size() - 1));
  std::string big;
  for (int i = 0; i < 20000; ++i) big += (i % 97 ? "[ 1.5] usb 1-1: noise " + std::to_string(i) + "\n" : kXid79);
  inputs.push_back(big);
  std::string minutes = "[Feb23 16:24] Linux version 6.8.0\n";  // dmesg -H: dated by its minute stamps
  for (int i = 0; i < 300; ++i) {
    minutes += "[  +0.000100] usb 1-1: noise\n[Feb23 16:2" + std::to_string(5 + i % 4) + "] usb 1-2: new device\n";
    minutes += "[  +0.000316] " + kXid79.substr(kXid79.find("NVRM"));
  }
  inputs.push_back(minutes);
  for (const std::string& data : inputs) {
    for (size_t piece : {SIZE_MAX, size_t{4096}, size_t{7}}) {
      for (bool prefilter : {true, false}) {
        const Scan here = ScanBytes(data, piece, prefilter, std::nullopt);
        // From the start, and from somewhere inside the log (a cut line or an open event handed over).
        for (uint64_t after : {uint64_t{0}, uint64_t{data.size() / 3}}) {
          const Scan ahead = ScanBytes(data, piece, prefilter, after);
          ASSERT_EQ(JsonLines(ahead.events), JsonLines(here.events)) << data.substr(0, 80) << " piece " << piece;
          ASSERT_EQ(Counts(ahead.stats), Counts(here.stats)) << data.substr(0, 80) << " piece " << piece;
        }
      }
    }
  }
}

// Gives `data` in reads of `read` bytes, then fails or throws as told.
class FailingSource final : public ByteSource {
 public:
  enum class End { kError, kThrow, kNever };
  FailingSource(std::string data, size_t read, End end) : data_(std::move(data)), read_(read), end_(end) {}
  Result<size_t> Read(char* buffer, size_t capacity) override {
    if (offset_ >= data_.size()) {
      if (end_ == End::kThrow) throw std::runtime_error("the source broke");
      if (end_ == End::kError) return Error{"read failed midway"};
      offset_ = 0;  // kNever: the same bytes again, for ever
    }
    size_t n = std::min({capacity, read_, data_.size() - offset_});
    std::memcpy(buffer, data_.data() + offset_, n);
    offset_ += n;
    return n;
  }
  const std::string& name() const override { return name_; }

 private:
  std::string data_;
  size_t read_;
  End end_;
  size_t offset_ = 0;
  std::string name_ = "failing";
};

TEST(LogReader, AReadErrorMidwayKeepsWhatCameBeforeItEitherWay) {
  std::string data = ReadFile(kCorpus + "001.log") + "[ 9.9] NVRM: Xid (PCI:0000:02:00): 48, cut";
  for (bool read_ahead : {true, false}) {
    FailingSource source(data, 1000, FailingSource::End::kError);
    ReadOptions options;
    options.read_ahead = read_ahead;
    options.read_ahead_after = 0;
    LogScanner scanner(options);
    std::vector<LogEvent> events;
    ReadAll(source, scanner, [&](LogEvent&& e) { events.push_back(std::move(e)); });
    EXPECT_EQ(scanner.stats().error, "read failed midway") << read_ahead;
    EXPECT_EQ(scanner.stats().bytes, data.size()) << read_ahead;
    ASSERT_FALSE(events.empty()) << read_ahead;
    EXPECT_NE(events.back().raw.find("48, cut"), std::string::npos) << "the cut last line still counts";
  }
}

TEST(LogReader, AnExceptionOnEitherThreadReachesTheCaller) {
  const std::string data = ReadFile(kCorpus + "001.log");
  for (bool read_ahead : {true, false}) {
    // The source throws: the worker that read it hands the exception over.
    FailingSource broken(data, 1000, FailingSource::End::kThrow);
    ReadOptions options;
    options.read_ahead = read_ahead;
    options.read_ahead_after = 0;
    LogScanner first(options);
    EXPECT_THROW(ReadAll(broken, first, [](LogEvent&&) {}), std::runtime_error) << read_ahead;
    // The sink throws while the source never ends: the workers are stopped, not waited for.
    FailingSource endless(data, 1 << 20, FailingSource::End::kNever);
    LogScanner second(options);
    EXPECT_THROW(ReadAll(endless, second, [](LogEvent&&) { throw std::logic_error("sink"); }), std::logic_error);
  }
}

TEST(LogReader, EmptyInput) {
  Scan scan = ScanBytes("");
  EXPECT_EQ(Counts(scan.stats), Counts(ScanBytes("", SIZE_MAX, true, std::nullopt).stats));
  EXPECT_EQ(Counts(scan.stats), Counts(ScanBytes("", SIZE_MAX, true, 0).stats));
  EXPECT_TRUE(scan.events.empty());
  EXPECT_EQ(scan.stats.lines, 0u);
}

}  // namespace
}  // namespace gpudoctor
