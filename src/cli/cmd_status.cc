// `gpudoctor status`: an nvidia-smi-like table of every GPU with a health
// column, and each GPU's last `gpudoctor diag` tests from the agent's history.

#include <algorithm>
#include <cstdio>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "assess/assessment_json.h"
#include "cli/check_inputs.h"
#include "cli/commands.h"
#include "cli/diag_history.h"
#include "cli/sources.h"
#include "cli/terminal.h"
#include "common/json_text.h"
#include "health/finding_json.h"
#include "model/snapshot_json.h"

namespace gpudoctor {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

template <typename T, typename Format>
std::string Cell(const Field<T>& field, Format format) {
  if (field.has_value()) return format(field.value());
  return field.failed() ? "ERR" : "n/s";
}

// "61:00.0" for "0000:61:00.0": the table's column is narrow.
std::string ShortBusId(const std::string& bus) { return bus.starts_with("0000:") ? bus.substr(5) : bus; }

std::string Truncate(std::string text, size_t width) {
  if (text.size() > width) text = text.substr(0, width - 1) + "~";
  return text;
}

std::string FanCell(const GpuSnapshot& gpu) {
  return Cell(gpu.fan_speeds_percent, [](const std::vector<uint32_t>& speeds) {
    if (speeds.empty()) return std::string("none");
    auto [low, high] = std::minmax_element(speeds.begin(), speeds.end());
    return *low == *high ? fmt::format("{}%", *low) : fmt::format("{}-{}%", *low, *high);
  });
}

std::string PowerCell(const GpuSnapshot& gpu) {
  auto draw = Cell(gpu.power_draw_w, [](double w) { return fmt::format("{:.0f}W", w); });
  auto limit = Cell(gpu.power_limit_w, [](double w) { return fmt::format("{:.0f}W", w); });
  return draw + " / " + limit;
}

std::string MemoryCell(const GpuSnapshot& gpu) {
  auto mib = [](uint64_t bytes) { return fmt::format("{:.0f}", bytes / kMiB); };
  return Cell(gpu.memory_used_bytes, mib) + " / " + Cell(gpu.memory_total_bytes, mib) + " MiB";
}

void PrintTable(std::FILE* out, const Style& style, const CheckRun& run) {
  const Snapshot& snapshot = run.gathered.snapshot;
  const std::string& description = run.gathered.snapshot_description;
  const Assessment& assessment = run.assessment;
  std::string versions;
  if (snapshot.driver_version.has_value()) versions += "driver " + snapshot.driver_version.value();
  if (snapshot.cuda_driver_version.has_value())
    versions += (versions.empty() ? "" : ", ") + std::string("CUDA ") + FormatCudaVersion(snapshot.cuda_driver_version.value());
  std::fprintf(out, "%s  %s  %s  (%s, %lld ms)\n", style.Bold("gpudoctor status").c_str(), snapshot.hostname.c_str(),
               versions.c_str(), description.c_str(),
               static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(snapshot.collection_time).count()));
  if (snapshot.driver_error != AccessError::kNone && snapshot.gpus.empty()) {
    std::fprintf(out, "\n%s\n", snapshot.driver_message.c_str());
  } else if (snapshot.gpus.empty()) {
    std::fprintf(out, "\nNo NVIDIA GPUs found.\n");
  } else {
    std::fprintf(out, "\n%3s  %-24s %-13s %5s %7s %13s %21s %5s %4s  %s\n", "GPU", "Name", "Bus-Id", "Temp", "Fan",
                 "Power", "Memory", "Util", "ECC", "Health");
    for (const auto& gpu : snapshot.gpus) {
      const GpuVerdict* verdict = assessment.Gpu(gpu.index);
      const Severity severity = verdict ? verdict->health : Severity::kOk;
      std::string name = gpu.access_error != AccessError::kNone
                             ? std::string("<") + AccessErrorName(gpu.access_error) + ">"
                             : Cell(gpu.name, [](const std::string& s) { return s; });
      // A GPU that no longer answers shows the address it was last seen at, marked "~".
      std::string bus = Cell(gpu.pci_bus_id, [](const std::string& s) { return s; });
      if (!gpu.pci_bus_id.has_value() && verdict && !verdict->identity.pci_bus_id.empty())
        bus = "~" + ShortBusId(verdict->identity.pci_bus_id);
      std::fprintf(out, "%3u  %-24s %-13s %5s %7s %13s %21s %5s %4s  %s\n", gpu.index, Truncate(name, 24).c_str(),
                   bus.c_str(),
                   Cell(gpu.temperature_c, [](uint32_t c) { return fmt::format("{}C", c); }).c_str(),
                   FanCell(gpu).c_str(), PowerCell(gpu).c_str(), MemoryCell(gpu).c_str(),
                   Cell(gpu.utilization_gpu_percent, [](uint32_t u) { return fmt::format("{}%", u); }).c_str(),
                   Cell(gpu.ecc_volatile_uncorrected, [](uint64_t n) { return std::to_string(n); }).c_str(),
                   style.Severity(severity).c_str());
    }
    std::fprintf(out, "%s\n", style.Dim("n/s: not supported by this GPU   ERR: the read failed (see findings)   "
                                        "~: last known   ECC: volatile uncorrected errors").c_str());
    PrintRememberedIdentities(out, style, assessment);
    if (run.gathered.diagnostics)
      PrintLastDiagnostics(out, style, snapshot, *run.gathered.diagnostics, run.gathered.judged_at);
    bool header = false;
    for (const auto& gpu : snapshot.gpus) {
      if (!gpu.processes.has_value()) continue;
      for (const auto& p : gpu.processes.value()) {
        if (!header) {
          std::fprintf(out, "\n%3s  %8s  %-24s %12s\n", "GPU", "PID", "Process", "GPU Memory");
          header = true;
        }
        std::fprintf(out, "%3u  %8u  %-24s %12s\n", gpu.index, p.pid, Truncate(p.name.empty() ? "?" : p.name, 24).c_str(),
                     Cell(p.used_memory_bytes, [](uint64_t b) { return fmt::format("{:.0f} MiB", b / kMiB); }).c_str());
      }
    }
  }
  std::fprintf(out, "\n");
  if (assessment.worst != Severity::kOk) PrintFindings(out, style, assessment.findings, false);
  else std::fprintf(out, "%s no problems found.\n", style.Severity(Severity::kOk).c_str());
}

// NVML could not be used at all: the driver or the library is missing or broken.
bool DriverUnavailable(const Snapshot& snapshot) {
  switch (snapshot.driver_error) {
    case AccessError::kLibraryNotFound:
    case AccessError::kDriverNotLoaded:
    case AccessError::kVersionMismatch:
    case AccessError::kHang:
    case AccessError::kNoPermission:
    case AccessError::kOther:
    case AccessError::kUnknown: return snapshot.gpus.empty();
    default: return false;
  }
}

}  // namespace

void RegisterStatusCommand(CLI::App& app, CommandContext& context) {
  auto* command = app.add_subcommand("status", "Show every GPU with its health, like nvidia-smi with a diagnosis");
  auto options = std::make_shared<CheckOptions>();
  AddCheckInputOptions(command, *options);
  command->footer(
      "Reads each GPU through a separate probe process with a deadline (--probe-timeout), so a hung driver\n"
      "is reported as the finding nvml_hang instead of hanging this command. The health column and the\n"
      "findings are `check`'s judgement of the same inputs (this machine's host signals, kernel log and\n"
      "agent history, or what --from-smi and --logs captured), so the two never disagree.\n"
      "Each GPU's last gpudoctor diag tests come from the agent's history (--db), when there is one.\n"
      "Exit status: 0 when the GPUs could be read (findings do not change it; use `check` for that),\n"
      "69 when NVML is unavailable (no driver, library mismatch, hung at start), 64/65/66 for bad input.");
  command->callback([&context, options] {
    CheckRun run = RunChecks(context, *options);
    if (run.error) {
      std::fprintf(stderr, "gpudoctor: %s\n", run.error->message.c_str());
      context.exit_code = run.error->exit_code;
      return;
    }
    const Snapshot& snapshot = run.gathered.snapshot;
    const Assessment& assessment = run.assessment;
    const bool unavailable = DriverUnavailable(snapshot);
    if (context.options.json) {
      nlohmann::json json = SnapshotToJson(snapshot);
      const nlohmann::json verdicts =
          GpuVerdictsToJson(assessment, run.gathered.diagnostics ? &*run.gathered.diagnostics : nullptr);
      for (size_t i = 0; i < snapshot.gpus.size() && i < verdicts.size(); ++i) {
        for (const char* key : {"health", "identity", "identity_source", "findings"})
          json["gpus"][i][key] = verdicts[i][key];
        json["gpus"][i]["diagnostics"] = verdicts[i].value("diagnostics", nlohmann::json::array());
      }
      json["verdicts"] = verdicts;
      json["findings"] = FindingsToJson(assessment.findings);
      json["status"] = SeverityName(assessment.worst);
      json["sources"] = SourcesToJson(run.gathered.sources);
      json["not_checked"] = NotCheckedToJson(assessment.unchecked);
      std::printf("%s\n", ToJsonText(json, 2).c_str());
    } else if (unavailable && snapshot.driver_error == AccessError::kLibraryNotFound) {
      // The one-line answer for a machine with no NVIDIA driver at all.
      std::fprintf(stderr, "gpudoctor: %s\n", snapshot.driver_message.c_str());
    } else {
      PrintTable(stdout, Style(context.options.color, stdout), run);
    }
    context.exit_code = unavailable ? exit_code::kUnavailable : exit_code::kOk;
  });
}

}  // namespace gpudoctor
