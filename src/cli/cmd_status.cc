// `gpudoctor status`: an nvidia-smi-like table of every GPU with a health
// column, and each GPU's last `gpudoctor diag` tests from the agent's history.

#include <algorithm>
#include <cstdio>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/diag_history.h"
#include "cli/sources.h"
#include "cli/status_findings.h"
#include "cli/terminal.h"
#include "common/json_text.h"
#include "health/finding_json.h"
#include "host/command_runner.h"
#include "host/host_env.h"
#include "model/snapshot_json.h"

namespace gpudoctor {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

template <typename T, typename Format>
std::string Cell(const Field<T>& field, Format format) {
  if (field.has_value()) return format(field.value());
  return field.failed() ? "ERR" : "n/s";
}

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

std::map<uint32_t, Severity> HealthByGpu(const std::vector<Finding>& findings) {
  std::map<uint32_t, Severity> health;
  for (const auto& f : findings) {
    if (!f.gpu || !f.gpu->index) continue;
    auto [it, inserted] = health.emplace(*f.gpu->index, f.severity);
    if (!inserted && SeverityRank(f.severity) > SeverityRank(it->second)) it->second = f.severity;
  }
  return health;
}

void PrintTable(std::FILE* out, const Style& style, const Snapshot& snapshot, const std::string& description,
                const std::vector<Finding>& findings, const std::vector<DiagnosticRecord>& diagnostics, WallTime now) {
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
    const auto health = HealthByGpu(findings);
    std::fprintf(out, "\n%3s  %-24s %-13s %5s %7s %13s %21s %5s %4s  %s\n", "GPU", "Name", "Bus-Id", "Temp", "Fan",
                 "Power", "Memory", "Util", "ECC", "Health");
    for (const auto& gpu : snapshot.gpus) {
      auto severity = health.count(gpu.index) ? health.at(gpu.index) : Severity::kOk;
      std::string name = gpu.access_error != AccessError::kNone
                             ? std::string("<") + AccessErrorName(gpu.access_error) + ">"
                             : Cell(gpu.name, [](const std::string& s) { return s; });
      std::fprintf(out, "%3u  %-24s %-13s %5s %7s %13s %21s %5s %4s  %s\n", gpu.index, Truncate(name, 24).c_str(),
                   Cell(gpu.pci_bus_id, [](const std::string& s) { return s; }).c_str(),
                   Cell(gpu.temperature_c, [](uint32_t c) { return fmt::format("{}C", c); }).c_str(),
                   FanCell(gpu).c_str(), PowerCell(gpu).c_str(), MemoryCell(gpu).c_str(),
                   Cell(gpu.utilization_gpu_percent, [](uint32_t u) { return fmt::format("{}%", u); }).c_str(),
                   Cell(gpu.ecc_volatile_uncorrected, [](uint64_t n) { return std::to_string(n); }).c_str(),
                   style.Severity(severity).c_str());
    }
    std::fprintf(out, "%s\n", style.Dim("n/s: not supported by this GPU   ERR: the read failed (see findings)   "
                                        "ECC: volatile uncorrected errors").c_str());
    PrintLastDiagnostics(out, style, snapshot, diagnostics, now);
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
  bool any = std::any_of(findings.begin(), findings.end(), [](const Finding& f) { return f.severity != Severity::kOk; });
  if (any) PrintFindings(out, style, findings, false);
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

// The history `status` reads the last diagnostics from: --db, else the agent's
// default path when the GPUs are this machine's, read live; none otherwise.
std::string HistoryPath(const CommandContext& context, const std::string& from_smi, const std::string& database) {
  if (!database.empty()) return database;
  return context.options.simulate.empty() && from_smi.empty() ? kDefaultHistoryDatabase : "";
}

// The last diagnostics; none, with a note, when the history cannot be read
// (status shows the GPUs whatever the history says).
std::vector<DiagnosticRecord> LastDiagnostics(const std::string& database) {
  if (database.empty()) return {};
  auto latest = LoadLatestDiagnostics(database);
  if (latest) return std::move(*latest);
  std::fprintf(stderr, "gpudoctor status: note: last diagnostics not read: %s\n", latest.error().message.c_str());
  return {};
}

}  // namespace

void RegisterStatusCommand(CLI::App& app, CommandContext& context) {
  auto* command = app.add_subcommand("status", "Show every GPU with its health, like nvidia-smi with a diagnosis");
  auto from_smi = std::make_shared<std::string>();
  auto database = std::make_shared<std::string>();
  command->add_option("--from-smi", *from_smi,
                      "Read a captured nvidia-smi output (-q -x, -q, table or --query-gpu csv) instead of NVML");
  command->add_option("--db", *database,
                      std::string("History of `gpudoctor agent`, read-only: each GPU's last gpudoctor diag tests. "
                                  "Default: ") +
                          kDefaultHistoryDatabase + " when reading this machine's GPUs live");
  command->footer(
      "Reads each GPU through a separate probe process with a deadline (--probe-timeout), so a hung driver\n"
      "is reported as the finding nvml_hang instead of hanging this command.\n"
      "Each GPU's last gpudoctor diag tests come from the agent's history (--db), when there is one.\n"
      "Exit status: 0 when the GPUs could be read (findings do not change it; use `check` for that),\n"
      "69 when NVML is unavailable (no driver, library mismatch, hung at start), 66/65 for unreadable input.");
  command->callback([&context, from_smi, database] {
    const GlobalOptions& options = context.options;
    auto made = MakeSnapshotSource(context, *from_smi);
    if (made.error) {
      std::fprintf(stderr, "gpudoctor: %s\n", made.error->message.c_str());
      context.exit_code = made.error->exit_code;
      return;
    }
    CommandConfig config = LoadCommandConfig(context);
    if (config.error) {
      std::fprintf(stderr, "gpudoctor: %s\n", config.error->message.c_str());
      context.exit_code = config.error->exit_code;
      return;
    }
    Snapshot snapshot = made.source->Collect();
    const WallTime now = SystemClock::Instance().Now();
    SubprocessRunner runner;
    LinuxHostEnv host("/", runner);
    std::vector<Finding> findings =
        StatusFindings(snapshot, config.config, now, from_smi->empty() ? CommandLinesFrom(host) : ProcessCommandLines());
    const std::vector<DiagnosticRecord> diagnostics = LastDiagnostics(HistoryPath(context, *from_smi, *database));
    const bool unavailable = DriverUnavailable(snapshot);
    if (options.json) {
      nlohmann::json json = SnapshotToJson(snapshot);
      const auto health = HealthByGpu(findings);
      for (size_t i = 0; i < snapshot.gpus.size(); ++i) {
        const GpuSnapshot& gpu = snapshot.gpus[i];
        json["gpus"][i]["health"] = SeverityName(health.count(gpu.index) ? health.at(gpu.index) : Severity::kOk);
        json["gpus"][i]["diagnostics"] = GpuDiagnosticsToJson(diagnostics, gpu);
      }
      json["findings"] = FindingsToJson(findings);
      json["status"] = SeverityName(WorstSeverity(findings));
      std::printf("%s\n", ToJsonText(json, 2).c_str());
    } else if (unavailable && snapshot.driver_error == AccessError::kLibraryNotFound) {
      // The one-line answer for a machine with no NVIDIA driver at all.
      std::fprintf(stderr, "gpudoctor: %s\n", snapshot.driver_message.c_str());
    } else {
      Style style(options.color, stdout);
      PrintTable(stdout, style, snapshot, made.description, findings, diagnostics, now);
    }
    context.exit_code = unavailable ? exit_code::kUnavailable : exit_code::kOk;
  });
}

}  // namespace gpudoctor
