#include "logs/bug_report.h"

#include <algorithm>
#include <array>
#include <vector>

#include "common/text.h"

namespace gpudoctor {
namespace {

constexpr std::string_view kSeparator = "____________________________________________";

// The logs the script copies or greps whose lines are kernel or service log lines.
constexpr std::array<std::string_view, 6> kKernelLogFiles = {"kern", "messages", "syslog", "dmesg", "fabricmanager",
                                                            "nvidia-imex"};

bool IsSeparator(std::string_view line) { return Trim(line) == kSeparator; }

// "/usr/bin/nvidia-smi --query" -> "--query"; nullopt when `line` does not run `program`.
std::optional<std::string_view> ArgumentsOf(std::string_view line, std::string_view program) {
  line = Trim(line);
  if (line.empty() || line.front() != '/') return std::nullopt;
  size_t space = line.find(' ');
  std::string_view path = line.substr(0, space);
  if (!EndsWith(path, "/" + std::string(program))) return std::nullopt;
  return space == std::string_view::npos ? std::string_view() : Trim(line.substr(space));
}

// A command line inside the nvidia-smi section: the script runs several there.
std::optional<BugReportPart> SmiCommandPart(std::string_view line) {
  std::optional<std::string_view> arguments = ArgumentsOf(line, "nvidia-smi");
  if (!arguments) return std::nullopt;
  if (*arguments == "--query" || *arguments == "-q") return BugReportPart::kSmiQuery;
  if (*arguments == "nvlink --errorcounters" || *arguments == "nvlink -e" || *arguments == "nvlink --status" ||
      *arguments == "nvlink -s")
    return BugReportPart::kSmiNvlink;
  return BugReportPart::kOther;
}

BugReportPart PartOfHeader(std::string_view header) {
  header = Trim(header);
  if (StartsWith(header, "Scanning kernel log files for") || header == "dmesg:" || StartsWith(header, "journalctl ") ||
      header.find("systemctl status") != std::string_view::npos) {
    return BugReportPart::kKernelLog;
  }
  if (StartsWith(header, "*** /var/log/") && header.find(" does not exist") == std::string_view::npos) {
    std::string_view file = header.substr(4);
    file = file.substr(file.rfind('/') + 1);
    for (std::string_view name : kKernelLogFiles)
      if (StartsWith(file, name)) return BugReportPart::kKernelLog;
    return BugReportPart::kOther;
  }
  if (std::optional<BugReportPart> smi = SmiCommandPart(header)) return *smi;
  if (ArgumentsOf(header, "nvidia-debugdump")) return BugReportPart::kDebugDump;
  return BugReportPart::kOther;
}

// Splits `text` into lines without their '\n' (a last line without one included).
template <typename Visit>
void ForEachLine(std::string_view text, Visit visit) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = std::min(text.find('\n', start), text.size());
    visit(text.substr(start, end - start));
    start = end + 1;
  }
}

class BugReportKernelLogSource final : public ByteSource {
 public:
  BugReportKernelLogSource(std::unique_ptr<ByteSource> report, BugReportSummary* summary)
      : report_(std::move(report)), summary_(summary) {}

  Result<size_t> Read(char* buffer, size_t capacity) override {
    while (output_offset_ == output_.size() && !done_) {
      output_.clear();
      output_offset_ = 0;
      if (Status filled = Fill(); !filled) return filled.error();
    }
    size_t n = std::min(capacity, output_.size() - output_offset_);
    std::copy_n(output_.data() + output_offset_, n, buffer);
    output_offset_ += n;
    return n;
  }
  const std::string& name() const override { return report_->name(); }

 private:
  // Reads one block of the report and turns its whole lines into output.
  Status Fill() {
    char block[64 * 1024];
    auto n = report_->Read(block, sizeof block);
    if (!n) return n.error();
    if (*n == 0) {
      if (!partial_.empty()) Emit(partial_, /*newline=*/false);
      partial_.clear();
      done_ = true;
      return Status::Ok();
    }
    partial_.append(block, *n);
    size_t start = 0;
    for (size_t end = partial_.find('\n'); end != std::string::npos; end = partial_.find('\n', start)) {
      Emit(std::string_view(partial_).substr(start, end - start), /*newline=*/true);
      start = end + 1;
    }
    partial_.erase(0, start);
    return Status::Ok();
  }

  void Emit(std::string_view line, bool newline) {
    BugReportPart part = sections_.Classify(line);
    if (part == BugReportPart::kKernelLog) output_.append(line);
    if (newline) output_.push_back('\n');
    if (summary_ != nullptr) Note(line, part);
  }

  void Note(std::string_view line, BugReportPart part) {
    switch (part) {
      case BugReportPart::kKernelLog: ++summary_->kernel_log_lines; return;
      case BugReportPart::kSmiQuery: ++summary_->smi_query_lines; return;
      case BugReportPart::kDebugDump: summary_->has_debugdump = true; return;
      case BugReportPart::kSmiNvlink: return;
      case BugReportPart::kOther: break;
    }
    line = Trim(line);
    if (summary_->script_version.empty() && StartsWith(line, "nvidia-bug-report.sh Version:"))
      summary_->script_version = std::string(Trim(line.substr(line.find(':') + 1)));
    if (summary_->date.empty() && StartsWith(line, "Date:")) summary_->date = std::string(Trim(line.substr(5)));
  }

  std::unique_ptr<ByteSource> report_;
  BugReportSummary* summary_;
  BugReportSections sections_;
  std::string partial_;  // bytes of a line not yet ended
  std::string output_;
  size_t output_offset_ = 0;
  bool done_ = false;
};

// Serves `prefix`, then the rest of `rest`: a source whose first bytes were read to recognise it.
class PrefixedSource final : public ByteSource {
 public:
  PrefixedSource(std::string prefix, std::unique_ptr<ByteSource> rest) : prefix_(std::move(prefix)), rest_(std::move(rest)) {}
  Result<size_t> Read(char* buffer, size_t capacity) override {
    if (offset_ == prefix_.size()) return rest_->Read(buffer, capacity);
    size_t n = std::min(capacity, prefix_.size() - offset_);
    std::copy_n(prefix_.data() + offset_, n, buffer);
    offset_ += n;
    return n;
  }
  const std::string& name() const override { return rest_->name(); }

 private:
  std::string prefix_;
  size_t offset_ = 0;
  std::unique_ptr<ByteSource> rest_;
};

}  // namespace

bool IsBugReport(std::string_view start) {
  start = start.substr(0, 4096);
  return start.find("Start of NVIDIA bug report log file") != std::string_view::npos ||
         start.find("nvidia-bug-report.sh Version:") != std::string_view::npos;
}

BugReportPart BugReportSections::Classify(std::string_view line) {
  if (IsSeparator(line)) {
    state_ = State::kAfterSeparator;
    part_ = BugReportPart::kOther;
    return part_;
  }
  if (state_ == State::kAfterSeparator) {
    if (Trim(line).empty()) return BugReportPart::kOther;
    state_ = State::kBody;
    part_ = PartOfHeader(line);
    return BugReportPart::kOther;  // the header names the section; it is not part of it
  }
  // The script runs several nvidia-smi commands in one section, each after its command line.
  if (std::optional<BugReportPart> smi = SmiCommandPart(line);
      smi && (part_ == BugReportPart::kSmiQuery || part_ == BugReportPart::kSmiNvlink || part_ == BugReportPart::kOther)) {
    part_ = *smi;
    return BugReportPart::kOther;
  }
  return part_;
}

std::unique_ptr<ByteSource> MakeBugReportKernelLogSource(std::unique_ptr<ByteSource> report,
                                                         BugReportSummary* summary) {
  return std::make_unique<BugReportKernelLogSource>(std::move(report), summary);
}

namespace {

std::string ExtractPart(std::string_view report, BugReportPart part) {
  BugReportSections sections;
  std::string out;
  ForEachLine(report, [&](std::string_view line) {
    if (sections.Classify(line) != part) return;
    out.append(line);
    out.push_back('\n');
  });
  return out;
}

}  // namespace

std::string ExtractSmiQueryOutput(std::string_view report) { return ExtractPart(report, BugReportPart::kSmiQuery); }

std::string ExtractSmiNvlinkOutput(std::string_view report) { return ExtractPart(report, BugReportPart::kSmiNvlink); }

Result<std::optional<BugReportScan>> ScanBugReportFile(const std::string& path, ReadOptions options,
                                                       const EventSink& sink) {
  auto source = OpenLogFile(path);
  if (!source) return source.error();
  // The banner is in the first few lines; a gzip source may hand them over in small pieces.
  std::string start(4096, '\0');
  size_t filled = 0;
  while (filled < start.size()) {
    auto n = (*source)->Read(start.data() + filled, start.size() - filled);
    if (!n || *n == 0) break;
    filled += *n;
  }
  start.resize(filled);
  if (!IsBugReport(start)) return std::optional<BugReportScan>();
  BugReportScan scan;
  auto sections = MakeBugReportKernelLogSource(std::make_unique<PrefixedSource>(std::move(start), std::move(*source)),
                                               &scan.summary);
  if (options.parse.source.empty()) options.parse.source = path;
  LogScanner scanner(std::move(options));
  ReadAll(*sections, scanner, sink);
  scan.stats = scanner.stats();
  return std::optional<BugReportScan>(std::move(scan));
}

}  // namespace gpudoctor
