// What an operator pastes from a sick machine, recognised by its content and read into what the assessment
// judges, so `gpudoctor check --from FILE` takes whatever they have:
//   - nvidia-smi's outputs (the smi module: table, -q, -q -x, --query-gpu CSV, -L, nvlink -s/-e, topo -m,
//     its messages and warnings) and nvidia-debugdump --list: GPU readings;
//   - an nvidia-bug-report.sh log, gzip'd or not: its nvidia-smi -q section as the readings, and its kernel-log
//     sections (system logs, dmesg, the fabric manager's log) as the capture's log;
//   - `dcgmi diag` output: DCGM's tests, as diagnostic records of the GPUs they name;
//   - `dcgmi health -c` output: what DCGM's health watches found, under the rule that judges the same thing live;
//   - gpu_burn's output: its burn, as a diagnostic record of each GPU it names;
//   - a kernel, system or fabric manager log on its own: the capture's log, with no GPU readings.
// Nothing of the machine reading the capture is part of it.
//
//   Result<Capture> capture = ReadCapture("ticket-1234.txt");
//   if (!capture) return Fail(capture.error().message);  // "ticket-1234.txt: not recognised: ..."
//   capture->snapshot;     // nullopt for a log or a dcgmi report alone
//   capture->log_file;     // read it with the log engine when set
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/diagnostic.h"
#include "model/reported_condition.h"
#include "model/snapshot.h"

namespace gpudoctor {

enum class CaptureKind {
  kNvidiaSmi,    // nvidia-smi's or nvidia-debugdump's output
  kBugReport,    // nvidia-bug-report.sh log
  kDcgmiDiag,    // dcgmi diag
  kDcgmiHealth,  // dcgmi health -c
  kGpuBurn,      // gpu_burn's output
  kLog,          // a kernel, system or fabric manager log
};
// "nvidia-smi output", "nvidia-bug-report.sh log", "dcgmi diag output", ...
const char* CaptureKindName(CaptureKind kind);

struct Capture {
  CaptureKind kind = CaptureKind::kNvidiaSmi;
  std::string path;
  // The GPU readings the capture holds; nullopt when it holds none (a log, a dcgmi report).
  std::optional<Snapshot> snapshot;
  std::vector<DiagnosticRecord> diagnostics;   // dcgmi diag's tests or gpu_burn's, one record per GPU and test
  std::vector<ReportedCondition> conditions;   // dcgmi health's findings
  // A file to read with the log engine as the capture's own log: a bug report (its kernel-log sections) or the
  // capture itself when it is a log. Empty when the capture has no log.
  std::string log_file;

  // "captured nvidia-smi output: node7.txt"
  std::string Description() const;
};

// Reads the file at `path` under the input rule (common/input_file.h). Errors start with the path and say
// which formats were looked for; `not_recognised` (may be null) tells a file in no known format from one that
// cannot be opened (exit 65 and 66 at the command line).
Result<Capture> ReadCapture(const std::string& path, bool* not_recognised = nullptr);

}  // namespace gpudoctor
