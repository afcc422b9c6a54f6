#include "capture/gpu_burn.h"

#include <re2/re2.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "common/re2_view.h"
#include "common/text.h"

namespace gpudoctor::gpu_burn {
namespace {

// gpu_burn's words (gpu_burn-drv.cpp): a progress record "%.1f%%  proc'd: " then, per GPU, "%d (%.0f Gflop/s) "
// apart by "- ", then "  errors: " and per GPU "%d " with " (DIED!)" or " (WARNING!)", then "  temps: " and per
// GPU "%d C " or "-- ", and in newer versions "  power: ".
const RE2& ProgressRecord() {
  static const RE2 kProgress(
      R"(([0-9]+(?:\.[0-9]+)?)%\s+proc'd: (.*?)\s+errors: (.*?)(?:\s+temps: (.*?))?(?:\s+power: .*?)?\s*$)");
  return kProgress;
}

// No server has more GPUs than this: a larger index or a longer row is not gpu_burn's.
constexpr uint32_t kMostGpus = 1024;

// What the output says of one GPU, across its progress records and its verdict.
struct GpuSeen {
  std::string uuid;                    // from the nvidia-smi -L gpu_burn prints first
  std::optional<int64_t> processed;    // the latest count; -1: its worker died
  int64_t most_processed = 0;
  std::optional<double> gflops;        // the latest rate
  uint64_t worst_errors = 0;           // the largest count of wrong results in one interval
  bool died = false;
  double died_at_percent = 0;
  std::optional<int> temperature;      // the latest, in °C
  std::optional<std::string> verdict;  // "OK" or "FAULTY"
};

struct Output {
  std::map<uint32_t, GpuSeen> gpus;
  std::optional<uint32_t> tested;  // "Tested N GPUs:"
  std::optional<double> last_percent;
  bool aborted = false;            // "No clients are alive!  Aborting": every worker died
  std::vector<std::string> init_errors;
};

void ReadProgress(const std::string& procs, const std::string& errors, const std::string& temps, double percent,
                  Output& out) {
  static const RE2 kProc(R"((-?\d+) \(\s*([^ )]*) Gflop/s\))");  // older builds pad: "( 0 Gflop/s)"
  static const RE2 kError(R"((-?\d+)\s*(?:\((DIED|WARNING)!\))?)");
  static const RE2 kTemp(R"((\d+) C|--)");
  re2::StringPiece rest = Piece(procs);
  int64_t count = 0;
  std::string rate;
  for (uint32_t gpu = 0; gpu < kMostGpus && RE2::FindAndConsume(&rest, kProc, &count, &rate); ++gpu) {
    GpuSeen& seen = out.gpus[gpu];
    seen.processed = count;
    seen.most_processed = std::max(seen.most_processed, count);
    seen.gflops = ParseDouble(rate);
    if (count == -1 && !seen.died) {
      seen.died = true;
      seen.died_at_percent = percent;
    }
  }
  rest = Piece(errors);
  std::string mark;
  for (uint32_t gpu = 0; gpu < kMostGpus && RE2::FindAndConsume(&rest, kError, &count, &mark); ++gpu) {
    GpuSeen& seen = out.gpus[gpu];
    if (mark == "DIED") {
      if (!seen.died) seen.died_at_percent = percent;
      seen.died = true;
    } else if (count != 0) {
      // gpu_burn's counter wraps negative; its size is what counts (negated as unsigned: -INT64_MIN overflows).
      const uint64_t size = count < 0 ? 0 - static_cast<uint64_t>(count) : static_cast<uint64_t>(count);
      seen.worst_errors = std::max(seen.worst_errors, size);
    }
  }
  rest = Piece(temps);
  std::string degrees;
  for (uint32_t gpu = 0; gpu < kMostGpus && RE2::FindAndConsume(&rest, kTemp, &degrees); ++gpu) {
    if (auto value = ParseInt<int>(degrees)) out.gpus[gpu].temperature = *value;
  }
}

Output Read(std::string_view text) {
  static const RE2 kListed(R"(GPU (\d+): (\S.*?) \(UUID: (GPU-[^)]*)\))");
  static const RE2 kTested(R"(Tested (\d+) GPUs?:)");
  static const RE2 kVerdict(R"(GPU (\d+): (OK|FAULTY))");
  static const RE2 kInitError(R"(Couldn't init a GPU test: ?(.*))");
  Output out;
  // Progress records overwrite each other on a terminal: in a file they are \r apart.
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find_first_of("\r\n", start), text.size());
    const std::string_view trimmed = Trim(text.substr(start, end - start));
    start = end + 1;
    if (trimmed.empty()) continue;
    const re2::StringPiece body = Piece(trimmed);
    uint32_t gpu = 0;
    std::string first, second, third;
    if (RE2::FullMatch(body, kVerdict, &gpu, &first)) {
      if (gpu < kMostGpus) out.gpus[gpu].verdict = first;
    } else if (RE2::FullMatch(body, kListed, &gpu, &first, &second)) {
      if (gpu < kMostGpus) out.gpus[gpu].uuid = second;
    } else if (RE2::FullMatch(body, kTested, &gpu)) {
      out.tested = gpu;
    } else if (RE2::PartialMatch(body, kInitError, &first)) {
      const std::string_view reason = Trim(first);
      out.init_errors.emplace_back(reason.empty() ? "(no reason given)" : reason);
    } else if (trimmed.find("No clients are alive!") != std::string_view::npos) {
      out.aborted = true;
    } else if (std::string percent; RE2::PartialMatch(body, ProgressRecord(), &percent, &first, &second, &third)) {
      const double at = ParseDouble(percent).value_or(0);
      out.last_percent = at;
      ReadProgress(first, second, third, at, out);
    }
  }
  if (out.tested) {
    for (uint32_t gpu = 0; gpu < std::min(*out.tested, kMostGpus); ++gpu) out.gpus[gpu];
  }
  return out;
}

// "; gpu_burn said: Couldn't init a GPU test: Error in "load module":"
std::string InitErrors(const Output& out) {
  if (out.init_errors.empty()) return "";
  return fmt::format("; gpu_burn said: Couldn't init a GPU test: {}", fmt::join(out.init_errors, "; "));
}

std::string Conditions(const GpuSeen& seen) {
  std::string text;
  if (seen.gflops) text += fmt::format(", {:.0f} Gflop/s", *seen.gflops);
  if (seen.temperature) text += fmt::format(", last at {} C", *seen.temperature);
  return text;
}

DiagnosticRecord Judge(uint32_t gpu, const GpuSeen& seen, const Output& out) {
  DiagnosticRecord record;
  record.gpu_index = gpu;
  record.uuid = seen.uuid;
  record.test = "burn";
  record.tool = std::string(kTool);
  record.command = fmt::format("gpu_burn -i {} 300", gpu);
  const std::string said = seen.verdict ? fmt::format(" (gpu_burn printed {})", *seen.verdict) : "";
  // Every worker dead ends the run before any verdict; its last progress record may be cut from the capture.
  const bool died = seen.died || (out.aborted && !seen.verdict);
  if (died) {
    record.state = "faulty";
    record.summary = fmt::format(
        "gpu_burn's worker on GPU {} died during the burn, at {:.1f}%{}{}: a GPU whose test process dies under load "
        "failed it, though gpu_burn counts only wrong results as FAULTY{}",
        gpu, seen.died ? seen.died_at_percent : out.last_percent.value_or(0), said,
        out.aborted ? " (No clients are alive!  Aborting)" : "", InitErrors(out));
  } else if (seen.verdict == "FAULTY" || seen.worst_errors != 0) {
    record.state = "faulty";
    record.summary =
        seen.worst_errors != 0
            ? fmt::format("gpu_burn found wrong results on GPU {}: up to {} in one report interval, after {} "
                          "operations{}{}",
                          gpu, seen.worst_errors, seen.most_processed, Conditions(seen), said)
            : fmt::format("gpu_burn found wrong results on GPU {} (FAULTY) in a report interval the capture does not "
                          "show, after {} operations{}",
                          gpu, seen.most_processed, Conditions(seen));
  } else if (seen.processed && seen.most_processed == 0) {
    record.state = "could_not_run";
    record.summary = fmt::format("gpu_burn did no work on GPU {} (0 operations processed){}: it tested nothing{}",
                                 gpu, said, InitErrors(out));
  } else if (seen.verdict == "OK") {
    record.state = "passed";
    record.summary = seen.processed ? fmt::format("gpu_burn computed {} operations on GPU {} without a wrong result{}",
                                                  seen.most_processed, gpu, Conditions(seen))
                                    : fmt::format("gpu_burn printed OK for GPU {} (its progress is not in the capture)",
                                                  gpu);
  } else if (!seen.processed) {
    record.state = "could_not_run";
    record.summary = fmt::format("gpu_burn reported no progress on GPU {}{}", gpu, InitErrors(out));
  } else {
    record.state = "interrupted";
    record.summary = fmt::format("gpu_burn's output ends at {:.1f}% before its verdict; GPU {} had computed {} "
                                 "operations without a wrong result{}",
                                 out.last_percent.value_or(0), gpu, seen.most_processed, Conditions(seen));
  }
  return record;
}

}  // namespace

bool LooksLikeGpuBurn(std::string_view text) {
  static const RE2 kMarks(
      R"(proc'd: -?\d+ \(|(?m)^\s*Tested \d+ GPUs?:\s*$|No clients are alive!|Couldn't init a GPU test)");
  return RE2::PartialMatch(Piece(text.substr(0, 1 << 20)), kMarks);
}

Result<std::vector<DiagnosticRecord>> ParseGpuBurn(std::string_view text) {
  const Output out = Read(text);
  if (out.gpus.empty()) {
    if (!out.init_errors.empty()) return Error{"gpu_burn tested no GPU" + InitErrors(out)};
    return Error{"no GPU found in gpu_burn's output (no progress record, verdict or GPU list)"};
  }
  std::vector<DiagnosticRecord> records;
  for (const auto& [gpu, seen] : out.gpus) records.push_back(Judge(gpu, seen, out));
  return records;
}

}  // namespace gpudoctor::gpu_burn
