// Rules about the GPUs' PCIe and NVLink connections.
#include <re2/re2.h>

#include <algorithm>

#include "common/re2_view.h"
#include "common/text.h"
#include "health/rule_context.h"

namespace gpudoctor::rules_internal {
namespace {

// How much a counter rose between two snapshots. A counter that went down
// was reset (driver reload, GPU reset): all of its current value is new.
struct Rise {
  uint64_t delta = 0;
  double per_minute = 0;
};

Rise CounterRise(uint64_t now, uint64_t before, Duration interval) {
  Rise rise;
  rise.delta = now >= before ? now - before : now;
  // Shorter intervals count as a minute so two replays in ten seconds do not read as twelve a minute.
  const double minutes = std::max(1.0, std::chrono::duration<double, std::ratio<60>>(interval).count());
  rise.per_minute = static_cast<double>(rise.delta) / minutes;
  return rise;
}

Duration Interval(const RuleContext& context) {
  return context.input.snapshot->taken_at - context.input.previous->taken_at;
}

const NvLinkInfo* FindLink(const GpuSnapshot* gpu, uint32_t link) {
  if (gpu == nullptr || !gpu->nvlinks.has_value()) return nullptr;
  for (const NvLinkInfo& info : gpu->nvlinks.value())
    if (info.link == link) return &info;
  return nullptr;
}

// What a GPU's fabric registration says is wrong, worst first; empty when all is well.
std::vector<std::pair<Severity, std::string>> FabricProblems(const GpuSnapshot& gpu) {
  std::vector<std::pair<Severity, std::string>> problems;
  const std::string& state = gpu.fabric_state.value();
  const std::string status = gpu.fabric_status.value_or("success");
  if (state == "not_started") problems.emplace_back(Severity::kCritical, "registration with the NVLink fabric never started");
  if (state == "in_progress") problems.emplace_back(Severity::kWarning, "registration with the NVLink fabric still in progress");
  if (state == "completed" && status != "success")
    problems.emplace_back(Severity::kCritical, "registration with the NVLink fabric failed: " + status);
  if (!gpu.fabric_health_mask.has_value()) return problems;
  using namespace fabric_health;
  const uint32_t mask = gpu.fabric_health_mask.value();
  if (IsTrue(mask, kRouteUnhealthyShift)) problems.emplace_back(Severity::kCritical, "a fabric route is unhealthy");
  if (IsTrue(mask, kDegradedBandwidthShift)) problems.emplace_back(Severity::kWarning, "NVLink bandwidth is degraded");
  if (IsTrue(mask, kRouteRecoveryShift)) problems.emplace_back(Severity::kWarning, "a fabric route is being recovered");
  if (IsTrue(mask, kAccessTimeoutRecoveryShift))
    problems.emplace_back(Severity::kWarning, "the fabric is recovering from an access timeout");
  return problems;
}

}  // namespace

void PcieLinkDegraded(RuleContext& context) {
  const double busy_percent = context.thresholds.pcie_link_degraded.min_utilization_percent;
  size_t checked = 0;
  bool reported = false;
  std::vector<std::string> idle_notes;
  std::vector<std::string> judged_by_nvml;  // PCI ids NVML gave a width for
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    const bool have_width = gpu->pcie_width_current.has_value() && gpu->pcie_width_max.has_value();
    const bool have_generation = gpu->pcie_generation_current.has_value() && gpu->pcie_generation_max.has_value();
    if (!have_width && !have_generation) continue;
    ++checked;
    if (have_width && gpu->pci_bus_id.has_value()) {
      judged_by_nvml.push_back(NormalizePciBusId(gpu->pci_bus_id.value()).value_or(gpu->pci_bus_id.value()));
    }
    std::vector<std::string> problems, evidence;
    if (have_width) {
      evidence.push_back(
          fmt::format("link width: x{} of x{}", gpu->pcie_width_current.value(), gpu->pcie_width_max.value()));
      if (gpu->pcie_width_current.value() < gpu->pcie_width_max.value()) {
        problems.push_back(
            fmt::format("x{} instead of x{}", gpu->pcie_width_current.value(), gpu->pcie_width_max.value()));
      }
    }
    if (have_generation) {
      const uint32_t current = gpu->pcie_generation_current.value(), max = gpu->pcie_generation_max.value();
      evidence.push_back(fmt::format("link generation: Gen{} of Gen{}", current, max));
      if (current < max) {
        const std::optional<uint32_t> utilization = gpu->utilization_gpu_percent.optional();
        if (utilization && *utilization >= busy_percent) {
          problems.push_back(fmt::format("Gen{} instead of Gen{} at {}% utilization", current, max, *utilization));
        } else {
          idle_notes.push_back(
              fmt::format("{} at Gen{} of Gen{} while idle (power saving)", GpuLabel(*gpu), current, max));
        }
      }
    }
    if (problems.empty()) continue;
    context.Report("pcie_link_degraded", Severity::kWarning, RefFor(*gpu),
                   fmt::format("{} PCIe link degraded: {}", GpuLabel(*gpu), JoinWithAnd(problems)),
                   std::move(evidence));
    reported = true;
  }

  // GPUs NVML could not judge (not visible, unreadable, or read from a capture
  // without link data) are judged on the kernel's view of the link width.
  // Speed is not judged here: sysfs cannot tell an idle GPU from a slow link.
  const HostSignals* host = context.GpuHost();
  if (host != nullptr && host->pci_gpus.has_value()) {
    for (const PciGpuDevice& device : host->pci_gpus.value()) {
      if (std::find(judged_by_nvml.begin(), judged_by_nvml.end(), device.pci_bus_id) != judged_by_nvml.end()) continue;
      const PcieLink& link = device.link;
      if (!link.current_width.has_value() || !link.max_width.has_value()) continue;
      ++checked;
      if (link.current_width.value() >= link.max_width.value()) continue;
      const GpuSnapshot* gpu = context.GpuAtPci(device.pci_bus_id);
      std::vector<std::string> evidence{fmt::format("sysfs {}: current_link_width {}, max_link_width {}",
                                                    device.pci_bus_id, link.current_width.value(),
                                                    link.max_width.value())};
      if (link.current_speed_gts.has_value() && link.max_speed_gts.has_value()) {
        evidence.push_back(fmt::format("link speed: {} GT/s of {} GT/s", FormatNumber(link.current_speed_gts.value()),
                                       FormatNumber(link.max_speed_gts.value())));
      }
      context.Report(
          "pcie_link_degraded", Severity::kWarning, gpu ? RefFor(*gpu) : RefForPci(device.pci_bus_id),
          fmt::format("{} PCIe link degraded: x{} instead of x{}", gpu ? GpuLabel(*gpu) : "GPU at " + device.pci_bus_id,
                      link.current_width.value(), link.max_width.value()),
          std::move(evidence));
      reported = true;
    }
  }
  if (!reported && checked > 0) {
    context.Pass("pcie_link_degraded", fmt::format("PCIe links at full width ({})", Plural(checked, "GPU", "GPUs")),
                 std::move(idle_notes));
  }
}

void PcieReplay(RuleContext& context) {
  const double limit = context.thresholds.pcie_replay.warning_per_minute;
  size_t checked = 0, compared = 0;
  bool reported = false;
  std::vector<std::string> nonzero;
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    if (!gpu->pcie_replay_count.has_value()) continue;
    ++checked;
    const uint64_t count = gpu->pcie_replay_count.value();
    if (count > 0) nonzero.push_back(fmt::format("{}: {} replays since the driver loaded", GpuLabel(*gpu), count));
    const GpuSnapshot* before = context.PreviousOf(*gpu);
    if (before == nullptr || !before->pcie_replay_count.has_value()) continue;
    ++compared;
    const Duration interval = Interval(context);
    const Rise rise = CounterRise(count, before->pcie_replay_count.value(), interval);
    if (rise.per_minute <= limit) continue;
    context.Report(
        "pcie_replay", Severity::kWarning, RefFor(*gpu),
        fmt::format("{} PCIe replay counter rose by {} in {}", GpuLabel(*gpu), rise.delta, FormatSpan(interval)),
        {fmt::format("replay count: {} now, {} before", count, before->pcie_replay_count.value()),
         fmt::format("{} per minute, warning above {}", FormatNumber(rise.per_minute), FormatNumber(limit))});
    reported = true;
  }
  if (reported || checked == 0) return;
  if (compared > 0) {
    context.Pass("pcie_replay", fmt::format("PCIe replay counters steady ({})", Plural(compared, "GPU", "GPUs")),
                 std::move(nonzero));
  } else if (nonzero.empty()) {
    context.Pass("pcie_replay", fmt::format("No PCIe replays ({})", Plural(checked, "GPU", "GPUs")));
  } else {
    nonzero.push_back("a later check compares the counters to see whether they are rising");
    context.Pass("pcie_replay", "PCIe replay counters not zero; a single snapshot cannot tell whether they rise",
                 std::move(nonzero));
  }
}

// Whether the GPU is an SXM module, built to talk over NVLink, by the name NVML gives it: "NVIDIA
// A100-SXM4-80GB", "Tesla V100-SXM2-32GB", or a Blackwell module made only as one ("NVIDIA B200", "NVIDIA
// GB200"). The H100 and H200 SXM modules' names do not say so ("NVIDIA H100 80GB HBM3"), and are not told.
bool NamedSxm(const GpuSnapshot& gpu) {
  if (!gpu.name.has_value()) return false;
  static const RE2 kSxmOnly(R"(SXM|\bG?B[23]00\b)");
  return RE2::PartialMatch(Piece(gpu.name.value()), kSxmOnly);
}

// No link of the server is up: a GPU named an SXM module that reports its links (all of them down) has lost
// its NVLinks, whatever the others are; any other GPU may simply have none connected. A lone SXM GPU (index
// 0 of one: a cloud VM given one GPU of a baseboard) has no peer to link to.
void ReportSxmWithoutLinks(RuleContext& context) {
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    if (!gpu->nvlinks.has_value() || !NamedSxm(*gpu)) continue;
    if (context.input.snapshot->gpus.size() == 1 && gpu->index == 0) continue;
    const std::vector<NvLinkInfo>& links = gpu->nvlinks.value();
    // Links listed with their error counters only (nvlink -e) say nothing of their state.
    const size_t known = static_cast<size_t>(
        std::count_if(links.begin(), links.end(), [](const NvLinkInfo& link) { return link.active.has_value(); }));
    if (!links.empty() && known == 0) continue;
    context.Report("nvlink_down", Severity::kWarning, RefFor(*gpu),
                   fmt::format("{}: no NVLink up on an SXM module", GpuLabel(*gpu)),
                   {links.empty() ? std::string("every link inactive (nvidia-smi lists none)")
                                  : fmt::format("0 of {} links up", known),
                    "no GPU of this server has a link up, so the baseboard may not wire them: check the fabric "
                    "manager on NVSwitch systems, then reset the GPU"});
  }
}

void NvlinkDown(RuleContext& context) {
  // A server counts as having NVLink when some link is up; otherwise a link
  // that is not active is most likely one that is not connected at all,
  // except on an SXM module (above).
  size_t links_up = 0;
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    if (!gpu->nvlinks.has_value()) continue;
    for (const NvLinkInfo& link : gpu->nvlinks.value()) links_up += link.active.value_or(false) ? 1 : 0;
  }
  if (links_up == 0) {
    ReportSxmWithoutLinks(context);
    return;
  }
  bool reported = false;
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    if (!gpu->nvlinks.has_value()) continue;
    std::vector<std::string> down;
    size_t up = 0, known = 0;
    for (const NvLinkInfo& link : gpu->nvlinks.value()) {
      if (!link.active.has_value()) continue;
      ++known;
      if (link.active.value())
        ++up;
      else
        down.push_back(std::to_string(link.link));
    }
    if (down.empty()) continue;
    context.Report("nvlink_down", Severity::kCritical, RefFor(*gpu),
                   fmt::format("{} NVLink {} down", GpuLabel(*gpu), JoinWithAnd(down)),
                   {fmt::format("{} of {} links up", up, known)});
    reported = true;
  }
  if (!reported) context.Pass("nvlink_down", AllOf(links_up, "NVLink", "NVLinks") + " up");
}

void NvlinkFabric(RuleContext& context) {
  size_t registered = 0;
  bool reported = false;
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    if (!gpu->fabric_state.has_value()) continue;  // no NVSwitch fabric, or not readable (field_error)
    std::vector<std::pair<Severity, std::string>> problems = FabricProblems(*gpu);
    if (problems.empty()) {
      ++registered;
      continue;
    }
    std::vector<std::string> evidence{"fabric state: " + gpu->fabric_state.value(),
                                      "fabric status: " + gpu->fabric_status.value_or("not reported")};
    if (gpu->fabric_clique_id.has_value()) evidence.push_back(fmt::format("clique id: {}", gpu->fabric_clique_id.value()));
    if (gpu->fabric_health_mask.has_value())
      evidence.push_back(fmt::format("health mask: 0x{:x}", gpu->fabric_health_mask.value()));
    std::vector<std::string> said;
    for (const auto& problem : problems) said.push_back(problem.second);
    Severity worst = problems.front().first;
    for (const auto& problem : problems)
      if (SeverityRank(problem.first) > SeverityRank(worst)) worst = problem.first;
    context.Report("nvlink_fabric", worst, RefFor(*gpu), fmt::format("{}: {}", GpuLabel(*gpu), JoinWithAnd(said)),
                   std::move(evidence));
    reported = true;
  }
  if (!reported && registered > 0)
    context.Pass("nvlink_fabric", AllOf(registered, "GPU", "GPUs") + " registered with the NVLink fabric and healthy");
  else if (!reported)
    context.Unchecked("nvlink_fabric", "no GPU reports NVLink fabric registration (no NVSwitch fabric)");
}


namespace {

using NvlinkCounter = Field<uint64_t> NvLinkInfo::*;
constexpr std::pair<NvlinkCounter, std::string_view> kNvlinkCounters[] = {
    {&NvLinkInfo::replay_errors, "replay"},
    {&NvLinkInfo::recovery_errors, "recovery"},
    {&NvLinkInfo::crc_flit_errors, "CRC flit"},
    {&NvLinkInfo::crc_data_errors, "CRC data"},
};

// With no earlier snapshot to tell a rate, a link whose counters reached warning_total since they were last
// reset (driver load, GPU reset) has been erring far more than a healthy link ever does.
bool ReportErrorLevel(RuleContext& context, const GpuSnapshot& gpu, const NvLinkInfo& link) {
  const uint64_t limit = context.thresholds.nvlink_errors.warning_total;
  if (limit == 0) return false;
  uint64_t total = 0;
  std::vector<std::string> evidence;
  for (const auto& [counter, name] : kNvlinkCounters) {
    if (!(link.*counter).has_value() || (link.*counter).value() == 0) continue;
    total += (link.*counter).value();
    evidence.push_back(fmt::format("{} errors: {}", name, (link.*counter).value()));
  }
  if (total < limit) return false;
  evidence.push_back(fmt::format("{} in all since the counters were last reset, warning at {}; one snapshot cannot "
                                 "tell whether they still rise",
                                 total, limit));
  context.Report("nvlink_errors", Severity::kWarning, RefFor(gpu),
                 fmt::format("{} NVLink {} has {} errors", GpuLabel(gpu), link.link, total), std::move(evidence));
  return true;
}

}  // namespace

void NvlinkErrors(RuleContext& context) {
  const double limit = context.thresholds.nvlink_errors.warning_per_minute;
  size_t links = 0, compared = 0;
  bool reported = false;
  uint64_t total_errors = 0;
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    if (!gpu->nvlinks.has_value()) continue;
    const GpuSnapshot* before = context.PreviousOf(*gpu);
    for (const NvLinkInfo& link : gpu->nvlinks.value()) {
      ++links;
      for (const auto& [counter, name] : kNvlinkCounters) total_errors += (link.*counter).value_or(0);
      const NvLinkInfo* earlier = FindLink(before, link.link);
      if (earlier == nullptr) {
        reported |= ReportErrorLevel(context, *gpu, link);
        continue;
      }
      ++compared;
      const Duration interval = Interval(context);
      uint64_t delta = 0;
      std::vector<std::string> evidence;
      for (const auto& [counter, name] : kNvlinkCounters) {
        if (!(link.*counter).has_value() || !((*earlier).*counter).has_value()) continue;
        const Rise rise = CounterRise((link.*counter).value(), ((*earlier).*counter).value(), interval);
        delta += rise.delta;
        if (rise.delta > 0) {
          evidence.push_back(fmt::format("{} errors: +{} (now {})", name, rise.delta, (link.*counter).value()));
        }
      }
      const Rise combined = CounterRise(delta, 0, interval);
      if (combined.per_minute <= limit) continue;
      evidence.push_back(
          fmt::format("{} per minute, warning above {}", FormatNumber(combined.per_minute), FormatNumber(limit)));
      context.Report(
          "nvlink_errors", Severity::kWarning, RefFor(*gpu),
          fmt::format("{} NVLink {} errors rising: +{} in {}", GpuLabel(*gpu), link.link, delta, FormatSpan(interval)),
          std::move(evidence));
      reported = true;
    }
  }
  if (reported || links == 0) return;
  if (compared > 0) {
    context.Pass("nvlink_errors", fmt::format("NVLink error counters steady ({})", Plural(compared, "link", "links")));
  } else if (total_errors == 0) {
    context.Pass("nvlink_errors", fmt::format("No NVLink errors ({})", Plural(links, "link", "links")));
  } else {
    context.Pass("nvlink_errors", "NVLink error counters not zero; a single snapshot cannot tell whether they rise",
                 {fmt::format("{} errors in all since the counters were last reset", total_errors)});
  }
}

}  // namespace gpudoctor::rules_internal
