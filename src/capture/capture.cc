#include "capture/capture.h"

#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "capture/dcgmi.h"
#include "capture/gpu_burn.h"
#include "common/input_file.h"
#include "common/text.h"
#include "logs/bug_report.h"
#include "logs/byte_source.h"
#include "logs/line_prefix.h"
#include "logs/log_reader.h"
#include "smi/nvidia_smi.h"

namespace gpudoctor {
namespace {

// How much of a file decides what it is; a capture this size or smaller is read whole at once.
constexpr size_t kHeadBytes = 256 * 1024;
// The largest decoded bug report read for its nvidia-smi section (its logs are streamed).
constexpr size_t kMaxBugReportBytes = size_t{1} << 30;

constexpr std::string_view kFormats =
    "found no nvidia-smi output (table, -q, -q -x, --query-gpu CSV, -L, nvlink -s or -e, topo -m, its messages), "
    "nvidia-debugdump --list, nvidia-bug-report.sh log, dcgmi diag or dcgmi health report, gpu_burn output, or "
    "kernel, system or fabric manager log";

struct Text {
  std::string bytes;
  bool whole = false;  // the file ended within what was read
};

// Up to `limit` bytes of the file, gzip decoded.
Result<Text> ReadDecoded(const std::string& path, size_t limit) {
  auto source = OpenLogFile(path);
  if (!source) return source.error();
  Text text;
  char block[64 * 1024];
  while (text.bytes.size() < limit) {
    auto n = (*source)->Read(block, std::min(sizeof block, limit - text.bytes.size()));
    if (!n) return Error{path + ": " + n.error().message};
    if (*n == 0) {
      text.whole = true;
      return text;
    }
    text.bytes.append(block, *n);
  }
  char probe = 0;
  auto n = (*source)->Read(&probe, 1);
  text.whole = n && *n == 0;
  return text;
}

// Whether most of the first lines carry a log's prefix (a time, a host, a program), as no report does.
bool LooksLikeLog(std::string_view head) {
  size_t lines = 0, prefixed = 0;
  for (std::string_view line : Split(head, '\n')) {
    if (Trim(line).empty()) continue;
    if (++lines > 200) break;
    if (ParseLinePrefix(line, {}).format != LineFormat::kBare) ++prefixed;
  }
  return lines > 0 && prefixed * 2 >= lines;
}

Capture Named(CaptureKind kind, const std::string& path) {
  Capture capture;
  capture.kind = kind;
  capture.path = path;
  return capture;
}

// The links `nvlink --errorcounters` lists for each GPU, into the -q snapshot's GPU of the same index.
void MergeNvlinks(const Snapshot& from, Snapshot& into) {
  for (const GpuSnapshot& listed : from.gpus) {
    if (!listed.nvlinks.has_value()) continue;
    for (GpuSnapshot& gpu : into.gpus)
      if (gpu.index == listed.index) gpu.nvlinks = listed.nvlinks;
  }
}

Result<Capture> ReadBugReport(const std::string& path) {
  auto text = ReadDecoded(path, kMaxBugReportBytes);
  if (!text) return text.error();
  if (!text->whole) return Error{fmt::format("{}: decoded, it is larger than {} bytes", path, kMaxBugReportBytes)};
  Capture capture = Named(CaptureKind::kBugReport, path);
  capture.log_file = path;
  const std::string smi = ExtractSmiQueryOutput(text->bytes);
  if (!smi.empty()) {
    auto snapshot = ParseNvidiaSmi(smi, path);
    if (!snapshot) return Error{path + ": its nvidia-smi --query section: " + snapshot.error().message};
    capture.snapshot = std::move(*snapshot);
    const std::string nvlink = ExtractSmiNvlinkOutput(text->bytes);
    if (!nvlink.empty())
      if (auto links = ParseNvidiaSmi(nvlink, path)) MergeNvlinks(*links, *capture.snapshot);
  }
  return capture;
}

}  // namespace

const char* CaptureKindName(CaptureKind kind) {
  switch (kind) {
    case CaptureKind::kNvidiaSmi: return "captured nvidia-smi output";
    case CaptureKind::kBugReport: return "nvidia-bug-report.sh log";
    case CaptureKind::kDcgmiDiag: return "dcgmi diag report";
    case CaptureKind::kDcgmiHealth: return "dcgmi health report";
    case CaptureKind::kGpuBurn: return "gpu_burn output";
    case CaptureKind::kLog: return "captured log";
  }
  return "capture";
}

std::string Capture::Description() const {
  std::string description = std::string(CaptureKindName(kind)) + ": " + path;
  if (kind == CaptureKind::kBugReport)
    description += snapshot ? " (its nvidia-smi -q and kernel logs)" : " (its kernel logs; no nvidia-smi -q in it)";
  return description;
}

Result<Capture> ReadCapture(const std::string& path, bool* not_recognised) {
  if (not_recognised != nullptr) *not_recognised = false;
  auto head = ReadDecoded(path, kHeadBytes);
  if (!head) return head.error();
  auto refuse = [&](std::string why) -> Result<Capture> {
    if (not_recognised != nullptr) *not_recognised = true;
    return Error{path + ": not recognised: " + why};
  };
  // A report of a known kind that holds nothing to judge.
  auto unusable = [&](const std::string& why) -> Result<Capture> {
    if (not_recognised != nullptr) *not_recognised = true;
    return Error{path + ": " + why};
  };
  if (IsBugReport(head->bytes)) return ReadBugReport(path);

  // Reports are small; a larger file can only be a log.
  Text whole;
  if (head->whole) {
    whole = std::move(*head);
  } else if (!LooksLikeLog(head->bytes)) {
    std::error_code error;
    const uintmax_t size = std::filesystem::file_size(path, error);
    const bool gzip = head->bytes.size() >= 2 && head->bytes.compare(0, 2, "\x1f\x8b") == 0;
    auto over = [&](uintmax_t bytes) {
      return unusable(fmt::format("{} bytes, over the {} MiB limit of a report, and it does not read as a log", bytes,
                                  kMaxNvidiaSmiFileBytes >> 20));
    };
    if (!error && !gzip && size > kMaxNvidiaSmiFileBytes) return over(size);
    auto all = ReadDecoded(path, kMaxNvidiaSmiFileBytes);
    if (!all) return all.error();
    if (!all->whole) return over(all->bytes.size() + 1);
    whole = std::move(*all);
  }
  if (whole.whole && whole.bytes.find('\0') != std::string::npos) return refuse("it contains NUL bytes (binary data)");
  if (whole.whole && Trim(whole.bytes).empty()) return refuse("the input is empty");

  // Another tool's test report: its records, or why it holds none.
  auto tested = [&](CaptureKind kind, Result<std::vector<DiagnosticRecord>> records) -> Result<Capture> {
    if (!records) return unusable(records.error().message);
    Capture capture = Named(kind, path);
    capture.diagnostics = std::move(*records);
    return capture;
  };
  if (whole.whole && dcgmi::LooksLikeDiag(whole.bytes))
    return tested(CaptureKind::kDcgmiDiag, dcgmi::ParseDiag(whole.bytes));
  if (whole.whole && dcgmi::LooksLikeHealth(whole.bytes)) {
    auto conditions = dcgmi::ParseHealth(whole.bytes);
    if (!conditions) return unusable(conditions.error().message);
    Capture capture = Named(CaptureKind::kDcgmiHealth, path);
    capture.conditions = std::move(*conditions);
    return capture;
  }
  if (whole.whole && gpu_burn::LooksLikeGpuBurn(whole.bytes))
    return tested(CaptureKind::kGpuBurn, gpu_burn::ParseGpuBurn(whole.bytes));
  if (whole.whole && !LooksLikeLog(whole.bytes)) {
    Result<Snapshot> snapshot = ParseNvidiaSmi(whole.bytes, path);
    if (snapshot) {
      Capture capture = Named(CaptureKind::kNvidiaSmi, path);
      capture.snapshot = std::move(*snapshot);
      return capture;
    }
    // Not nvidia-smi's: still a log when the log engine finds events in it (lines pasted without a prefix).
    LogScanner scanner({});
    const EventSink ignore = [](LogEvent&&) {};
    scanner.Consume(whole.bytes, ignore);
    scanner.Finish(ignore);
    if (scanner.stats().events == 0) {
      // Output nvidia-smi's parser knew but could not use (CSV rows that no header names): its reason.
      if (!StartsWith(snapshot.error().message, kNotNvidiaSmiOutput)) return refuse(snapshot.error().message);
      return refuse(std::string(kFormats));
    }
  }
  Capture capture = Named(CaptureKind::kLog, path);
  capture.log_file = path;
  return capture;
}

}  // namespace gpudoctor
