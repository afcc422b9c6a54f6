// nvidia-bug-report.sh logs: the support bundle NVIDIA's driver ships a
// script for. It is one text file (usually gzip'd) of many sections, each
// after a line of 44 underscores, a blank line and a header: a file's path
// ("*** /var/log/kern.log"), a command ("/usr/bin/nvidia-smi --query",
// "dmesg:") or a title ("Scanning kernel log files for NVIDIA kernel
// messages:"). gpudoctor reads three kinds of section:
//   - kernel logs: the script's grep of the system logs, dmesg, journal
//     excerpts, the fabric manager's log and service status;
//   - the `nvidia-smi --query` and `nvidia-smi nvlink --errorcounters` outputs, which the smi module parses;
//   - the nvidia-debugdump dump: a base64 binary for NVIDIA's engineers,
//     which gpudoctor names but does not decode.
//
//   auto scan = ScanBugReportFile("nvidia-bug-report.log.gz", options, sink);  // kernel events
//   if (scan && *scan) (*scan)->summary.smi_query_lines;                       // nvidia-smi -q inside?
//   std::string smi = ExtractSmiQueryOutput(whole_text);                       // then ParseNvidiaSmi
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"
#include "logs/byte_source.h"
#include "logs/log_reader.h"

namespace gpudoctor {

// Whether `start`, the first bytes of a decoded file, begin a bug report.
bool IsBugReport(std::string_view start);

enum class BugReportPart { kOther, kKernelLog, kSmiQuery, kSmiNvlink, kDebugDump };

// Says which part each line of a bug report belongs to, fed the lines in order.
class BugReportSections {
 public:
  BugReportPart Classify(std::string_view line);

 private:
  enum class State { kBody, kAfterSeparator };
  State state_ = State::kBody;
  BugReportPart part_ = BugReportPart::kOther;
};

// What a bug report held, for telling the user.
struct BugReportSummary {
  std::string script_version;  // "nvidia-bug-report.sh Version: 35205957"
  std::string date;            // the script's "Date:" line
  uint64_t kernel_log_lines = 0;
  uint64_t smi_query_lines = 0;
  bool has_debugdump = false;
};

// Yields `report`'s bytes with every line outside its kernel-log sections
// emptied, so a log reader finds only kernel events and line numbers stay
// those of the file. `summary` (may be null) is filled while reading.
std::unique_ptr<ByteSource> MakeBugReportKernelLogSource(std::unique_ptr<ByteSource> report,
                                                         BugReportSummary* summary);

// The lines of the report's `nvidia-smi --query` output; empty when it has none.
std::string ExtractSmiQueryOutput(std::string_view report);
// The lines of the report's `nvidia-smi nvlink --errorcounters` (or `--status`) output; empty when it has none.
std::string ExtractSmiNvlinkOutput(std::string_view report);

struct BugReportScan {
  ReadStats stats;
  BugReportSummary summary;
};

// When the file at `path` (gzip decoded by content) is a bug report, reads its
// kernel-log sections through `sink`; nullopt when it is not one. Errors only
// when the file cannot be opened, under the input rule of common/input_file.h.
Result<std::optional<BugReportScan>> ScanBugReportFile(const std::string& path, ReadOptions options,
                                                       const EventSink& sink);

}  // namespace gpudoctor
