#include "cli/diag_history.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "assess/agent_history.h"
#include "common/text.h"
#include "model/diagnostic_json.h"

namespace gpudoctor {

std::string DescribeAge(WallTime then, WallTime now) {
  const auto minutes = duration_cast<std::chrono::minutes>(now - then).count();
  if (minutes < 1) return "just now";
  if (minutes < 60) return fmt::format("{} min ago", minutes);
  if (minutes < 24 * 60) return fmt::format("{} h ago", minutes / 60);
  return fmt::format("{} d ago", minutes / (24 * 60));
}

namespace {

// "passed", "could not run"; a fault in capitals so that it stands out: "FAULTY", "HUNG".
std::string StateWords(const DiagnosticRecord& record) {
  const std::string words = ReplaceAll(record.state, "_", " ");
  return FoundFault(record) ? ToUpper(words) : words;
}

}  // namespace

std::string DescribeGpuDiagnostics(std::span<const DiagnosticRecord> latest, uint32_t index, std::string_view uuid,
                                   WallTime now) {
  std::string line;
  for (const DiagnosticRecord& record : latest) {
    if (!IsRecordOf(record, index, uuid)) continue;
    line += fmt::format("{}{} {} {}", line.empty() ? "" : ", ", record.test, StateWords(record),
                        DescribeAge(record.finished_at, now));
  }
  return line;
}

void PrintLastDiagnostics(std::FILE* out, const Style& style, const Snapshot& snapshot,
                          std::span<const DiagnosticRecord> latest, WallTime now) {
  bool header = false;
  for (const GpuSnapshot& gpu : snapshot.gpus) {
    const std::string line = DescribeGpuDiagnostics(latest, gpu.index, gpu.uuid.value_or(""), now);
    if (line.empty()) continue;
    if (!header) std::fprintf(out, "\n%s\n", style.Bold("Last diagnostics (gpudoctor diag)").c_str());
    header = true;
    std::fprintf(out, "  GPU %-3u %s\n", gpu.index, line.c_str());
  }
}

nlohmann::json GpuDiagnosticsToJson(std::span<const DiagnosticRecord> latest, const GpuSnapshot& gpu) {
  return GpuDiagnosticsToJson(latest, gpu.index, gpu.uuid.value_or(""));
}

}  // namespace gpudoctor
