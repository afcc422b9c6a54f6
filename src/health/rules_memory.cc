// Rules about GPU memory: ECC errors, page retirement, row remapping, use.
#include "health/rule_context.h"

namespace gpudoctor::rules_internal {
namespace {

std::string CountEvidence(std::string_view name, const Field<uint64_t>& field) {
  return field.has_value() ? fmt::format("{}: {}", name, field.value()) : fmt::format("{}: not available", name);
}

}  // namespace

void EccUncorrectable(RuleContext& context) {
  const auto& config = context.thresholds.ecc_uncorrectable;
  size_t checked = 0;
  bool reported = false;
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    const auto& volatile_count = gpu->ecc_volatile_uncorrected;
    const auto& aggregate_count = gpu->ecc_aggregate_uncorrected;
    if (!volatile_count.has_value() && !aggregate_count.has_value()) continue;
    ++checked;
    std::vector<std::string> evidence{CountEvidence("volatile uncorrectable (since the driver loaded)", volatile_count),
                                      CountEvidence("aggregate uncorrectable (lifetime)", aggregate_count)};
    if (config.volatile_count > 0 && volatile_count.value_or(0) >= config.volatile_count) {
      context.Report("ecc_uncorrectable", Severity::kCritical, RefFor(*gpu),
                     fmt::format("{}: {} since the driver loaded", GpuLabel(*gpu),
                                 Plural(volatile_count.value(), "uncorrectable ECC error", "uncorrectable ECC errors")),
                     std::move(evidence));
      reported = true;
    } else if (config.aggregate_count > 0 && aggregate_count.value_or(0) >= config.aggregate_count) {
      context.Report(
          "ecc_uncorrectable", Severity::kWarning, RefFor(*gpu),
          fmt::format("{}: {} in its lifetime", GpuLabel(*gpu),
                      Plural(aggregate_count.value(), "uncorrectable ECC error", "uncorrectable ECC errors")),
          std::move(evidence));
      reported = true;
    }
  }
  if (!reported && checked > 0) {
    context.Pass("ecc_uncorrectable", fmt::format("No uncorrectable ECC errors ({})", Plural(checked, "GPU", "GPUs")));
  }
}

void EccCorrectedHigh(RuleContext& context) {
  const uint64_t limit = context.thresholds.ecc_corrected_high.volatile_count;
  size_t checked = 0;
  bool reported = false;
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    if (!gpu->ecc_volatile_corrected.has_value()) continue;
    ++checked;
    const uint64_t corrected = gpu->ecc_volatile_corrected.value();
    if (limit == 0 || corrected < limit) continue;
    context.Report(
        "ecc_corrected_high", Severity::kWarning, RefFor(*gpu),
        fmt::format("{}: {} corrected ECC errors since the driver loaded", GpuLabel(*gpu), corrected),
        {CountEvidence("volatile corrected", gpu->ecc_volatile_corrected),
         CountEvidence("aggregate corrected", gpu->ecc_aggregate_corrected), fmt::format("warning at {}", limit)});
    reported = true;
  }
  if (!reported && checked > 0) {
    context.Pass("ecc_corrected_high",
                 fmt::format("Corrected ECC errors below {} ({})", limit, Plural(checked, "GPU", "GPUs")));
  }
}

void RetiredPages(RuleContext& context) {
  const auto& config = context.thresholds.retired_pages;
  size_t checked = 0;
  bool reported = false;
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    const bool have_counts = gpu->retired_pages_sbe.has_value() || gpu->retired_pages_dbe.has_value();
    if (!have_counts && !gpu->retired_pages_pending.has_value()) continue;
    ++checked;
    const uint64_t total = uint64_t{gpu->retired_pages_sbe.value_or(0)} + gpu->retired_pages_dbe.value_or(0);
    const bool pending = gpu->retired_pages_pending.value_or(false);
    std::vector<std::string> evidence{
        fmt::format("retired pages: {} single-bit, {} double-bit",
                    gpu->retired_pages_sbe.has_value() ? std::to_string(gpu->retired_pages_sbe.value()) : "?",
                    gpu->retired_pages_dbe.has_value() ? std::to_string(gpu->retired_pages_dbe.value()) : "?"),
        fmt::format("pending retirement: {}", gpu->retired_pages_pending.has_value() ? (pending ? "yes" : "no") : "?"),
        fmt::format("warning at {}, limit {}", config.warning_count, config.critical_count)};
    if (have_counts && total >= config.critical_count) {
      context.Report("retired_pages", Severity::kCritical, RefFor(*gpu),
                     fmt::format("{} has retired {} memory pages: at the limit", GpuLabel(*gpu), total),
                     std::move(evidence));
    } else if (pending) {
      context.Report("retired_pages", Severity::kWarning, RefFor(*gpu),
                     fmt::format("{} has memory pages waiting to be retired: reset needed", GpuLabel(*gpu)),
                     std::move(evidence));
    } else if (have_counts && total >= config.warning_count) {
      context.Report("retired_pages", Severity::kWarning, RefFor(*gpu),
                     fmt::format("{} has retired {} memory pages", GpuLabel(*gpu), total), std::move(evidence));
    } else {
      continue;
    }
    reported = true;
  }
  if (!reported && checked > 0) {
    context.Pass("retired_pages",
                 fmt::format("No pages pending retirement, none near the limit ({})", Plural(checked, "GPU", "GPUs")));
  }
}

namespace {

std::vector<std::string> RemapEvidence(const GpuSnapshot& gpu) {
  auto count = [](const Field<uint32_t>& f) { return f.has_value() ? std::to_string(f.value()) : std::string("?"); };
  auto flag = [](const Field<bool>& f) { return f.has_value() ? (f.value() ? "yes" : "no") : "?"; };
  return {fmt::format("remapped rows: {} for correctable errors, {} for uncorrectable errors",
                      count(gpu.remapped_rows_correctable), count(gpu.remapped_rows_uncorrectable)),
          fmt::format("remap pending: {}, remap failure: {}", flag(gpu.remapped_rows_pending),
                      flag(gpu.remapped_rows_failure))};
}

}  // namespace

void RemappedRowsPending(RuleContext& context) {
  size_t checked = 0;
  bool reported = false;
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    if (!gpu->remapped_rows_pending.has_value()) continue;
    ++checked;
    if (!gpu->remapped_rows_pending.value()) continue;
    context.Report("remapped_rows_pending", Severity::kWarning, RefFor(*gpu),
                   fmt::format("{} has memory rows waiting to be remapped: reset needed", GpuLabel(*gpu)),
                   RemapEvidence(*gpu));
    reported = true;
  }
  if (!reported && checked > 0) {
    context.Pass("remapped_rows_pending", fmt::format("No row remap pending ({})", Plural(checked, "GPU", "GPUs")));
  }
}

void RowRemapFailure(RuleContext& context) {
  size_t checked = 0;
  bool reported = false;
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    if (!gpu->remapped_rows_failure.has_value()) continue;
    ++checked;
    if (!gpu->remapped_rows_failure.value()) continue;
    context.Report("row_remap_failure", Severity::kCritical, RefFor(*gpu),
                   fmt::format("{} failed to remap a memory row", GpuLabel(*gpu)), RemapEvidence(*gpu));
    reported = true;
  }
  if (!reported && checked > 0) {
    context.Pass("row_remap_failure", fmt::format("No row remap failure ({})", Plural(checked, "GPU", "GPUs")));
  }
}

void InforomCorrupted(RuleContext& context) {
  size_t checked = 0;
  bool reported = false;
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    if (!gpu->inforom_valid.has_value()) continue;
    ++checked;
    if (gpu->inforom_valid.value()) continue;
    context.Report("inforom_corrupted", Severity::kWarning, RefFor(*gpu),
                   fmt::format("{}'s infoROM is corrupted", GpuLabel(*gpu)),
                   {"the infoROM fails its checksum (nvidia-smi: WARNING: infoROM is corrupted)"});
    reported = true;
  }
  if (!reported && checked > 0) {
    context.Pass("inforom_corrupted", fmt::format("No corrupted infoROM ({})", Plural(checked, "GPU", "GPUs")));
  }
}

void MemoryHigh(RuleContext& context) {
  const double limit = context.thresholds.memory_high.warning_percent;
  size_t checked = 0;
  bool reported = false;
  double highest = -1;
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    if (!gpu->memory_total_bytes.has_value() || !gpu->memory_used_bytes.has_value() ||
        gpu->memory_total_bytes.value() == 0) {
      continue;
    }
    ++checked;
    const uint64_t used = gpu->memory_used_bytes.value(), total = gpu->memory_total_bytes.value();
    const double percent = 100.0 * static_cast<double>(used) / static_cast<double>(total);
    highest = std::max(highest, percent);
    if (percent <= limit) continue;
    std::vector<std::string> evidence{
        fmt::format("memory used: {} of {} ({}%)", FormatBytes(used), FormatBytes(total), FormatNumber(percent))};
    if (gpu->processes.has_value()) {
      for (const ProcessInfo& process : gpu->processes.value()) {
        evidence.push_back(fmt::format("pid {} {}: {}", process.pid, process.name.empty() ? "?" : process.name,
                                       process.used_memory_bytes.has_value()
                                           ? FormatBytes(process.used_memory_bytes.value())
                                           : std::string("memory not reported")));
      }
    }
    // The process holding the most names the program for trace-alloc ({command} in the actions).
    const ProcessInfo* largest = nullptr;
    if (gpu->processes.has_value())
      for (const ProcessInfo& process : gpu->processes.value())
        if (!largest || process.used_memory_bytes.value_or(0) > largest->used_memory_bytes.value_or(0))
          largest = &process;
    std::vector<std::string> command;
    if (largest && context.input.command_lines && !context.SnapshotCaptured())
      command = context.input.command_lines(largest->pid, largest->name);
    if (!command.empty())
      evidence.push_back(fmt::format("pid {} command line: {}", largest->pid, ShellQuote(command)));
    Finding& finding =
        context.Report("memory_high", Severity::kWarning, RefFor(*gpu),
                       fmt::format("{} memory {}% used", GpuLabel(*gpu), FormatNumber(percent)), std::move(evidence));
    for (std::string& action : finding.actions)
      action = ReplaceAll(action, "{command}", command.empty() ? "COMMAND" : ShellQuote(command));
    reported = true;
  }
  if (!reported && checked > 0) {
    context.Pass("memory_high", fmt::format("GPU memory use at most {}% (warning above {}%, {})", FormatNumber(highest),
                                            FormatNumber(limit), Plural(checked, "GPU", "GPUs")));
  }
}

}  // namespace gpudoctor::rules_internal
