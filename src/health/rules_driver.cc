// Rules about the driver, NVML and which GPUs can be seen at all.
#include <algorithm>
#include <map>
#include <set>

#include "common/text.h"
#include "health/cuda_compat.h"
#include "health/rule_context.h"

namespace gpudoctor::rules_internal {
namespace {

std::string DescribeHang(const ProbeHang& hang) {
  std::string text = fmt::format("{} did not return within {}", hang.call.empty() ? "an NVML call" : hang.call,
                                 FormatSpan(hang.deadline));
  if (hang.still_stuck_from_earlier)
    text += " (a probe from an earlier check is still stuck, so it was not probed again)";
  return text;
}

std::string PciEvidence(const PciGpuDevice& device) {
  std::string text = fmt::format("PCI {}: NVIDIA device {:04x}, class {:06x}, driver {}", device.pci_bus_id,
                                 device.device_id, device.class_code, device.driver.empty() ? "none" : device.driver);
  const PcieLink& link = device.link;
  if (link.current_width.has_value() && link.max_width.has_value()) {
    text += fmt::format(", link x{} of x{}", link.current_width.value(), link.max_width.value());
  } else if (link.current_width.failed()) {
    text += ", link width unreadable (" + link.current_width.error() + ")";
  }
  return text;
}

// How many GPUs NVML reports, or nullopt when it did not start.
std::optional<uint32_t> NvmlGpuCount(const RuleContext& context) {
  if (!context.DriverUp()) return std::nullopt;
  const Snapshot& snapshot = *context.input.snapshot;
  return snapshot.device_count.has_value() ? snapshot.device_count.value()
                                           : static_cast<uint32_t>(snapshot.gpus.size());
}

std::optional<size_t> PciGpuCount(const RuleContext& context) {
  const HostSignals* host = context.GpuHost();
  if (host == nullptr || !host->pci_gpus.has_value()) return std::nullopt;
  return host->pci_gpus.value().size();
}

// "All 8 GPUs readable", or "7 of 8 GPUs readable (GPU 3 lost)" when
// gpu_lost or nvml_hang report the others: never "all" while one is not.
std::string ReadableSummary(const RuleContext& context) {
  const std::vector<GpuSnapshot>& gpus = context.input.snapshot->gpus;
  const size_t readable = context.ReadableGpus().size();
  if (readable == gpus.size()) return AllOf(gpus.size(), "GPU", "GPUs") + " readable";
  std::vector<std::string> others;
  for (const GpuSnapshot& gpu : gpus) {
    if (gpu.access_error == AccessError::kGpuLost) others.push_back(GpuLabel(gpu) + " lost");
    if (gpu.access_error == AccessError::kHang) others.push_back(GpuLabel(gpu) + " hung");
  }
  return fmt::format("{} of {} GPUs readable ({})", readable, gpus.size(), JoinWithAnd(others));
}

bool SameDriverVersion(const std::string& a, const std::string& b) {
  std::optional<DriverVersion> left = ParseDriverVersion(a), right = ParseDriverVersion(b);
  if (left && right) return *left == *right;
  return Trim(a) == Trim(b);
}

}  // namespace

void NvmlHang(RuleContext& context) {
  const Snapshot* snapshot = context.input.snapshot;
  if (snapshot == nullptr) return;
  // One finding per GPU (or one for the driver as a whole), with every hung call as evidence.
  std::map<std::optional<uint32_t>, std::vector<const ProbeHang*>> by_gpu;
  for (const ProbeHang& hang : snapshot->hangs) by_gpu[hang.gpu_index].push_back(&hang);
  bool reported = false;
  for (const auto& [index, hangs] : by_gpu) {
    std::vector<std::string> evidence;
    for (const ProbeHang* hang : hangs) evidence.push_back(DescribeHang(*hang));
    const GpuSnapshot* gpu = index ? snapshot->FindGpu(*index) : nullptr;
    std::optional<GpuRef> ref;
    if (gpu != nullptr)
      ref = RefFor(*gpu);
    else if (!hangs.front()->pci_bus_id.empty())
      ref = RefForPci(hangs.front()->pci_bus_id);
    if (ref && index) ref->index = *index;
    std::string summary =
        index ? fmt::format("NVML hung reading GPU {}", *index)
              : fmt::format("NVML hung in {}", hangs.front()->call.empty() ? "start-up" : hangs.front()->call);
    context.Report("nvml_hang", Severity::kCritical, ref, std::move(summary), std::move(evidence));
    reported = true;
  }
  for (const GpuSnapshot& gpu : snapshot->gpus) {
    if (gpu.access_error != AccessError::kHang || by_gpu.count(gpu.index)) continue;
    context.Report("nvml_hang", Severity::kCritical, RefFor(gpu), fmt::format("NVML hung reading {}", GpuLabel(gpu)),
                   {gpu.access_message.empty() ? "probe missed its deadline" : gpu.access_message});
    reported = true;
  }
  if (snapshot->driver_error == AccessError::kHang && !by_gpu.count(std::nullopt)) {
    context.Report("nvml_hang", Severity::kCritical, std::nullopt, "NVML hung while starting",
                   {snapshot->driver_message.empty() ? "nvmlInit did not return" : snapshot->driver_message});
    reported = true;
  }
  if (reported || !context.DriverUp()) return;
  if (context.SnapshotCaptured())
    context.Pass("nvml_hang", "nvidia-smi answered when the capture was taken; nothing was called here");
  else
    context.Pass("nvml_hang", context.SnapshotSimulated() ? "The simulated NVML answered every call in time"
                                                          : "NVML answered every call in time");
}

void DriverUnavailable(RuleContext& context) {
  const Snapshot* snapshot = context.input.snapshot;
  if (snapshot == nullptr) return;
  std::vector<std::string> evidence;
  if (!snapshot->driver_message.empty()) evidence.push_back("NVML: " + snapshot->driver_message);
  if (!snapshot->source.empty()) evidence.push_back("source: " + snapshot->source);
  if (context.GpuHost() != nullptr && context.GpuHost()->nvidia_module_version.not_supported()) {
    evidence.push_back("no nvidia kernel module loaded (/sys/module/nvidia absent)");
  }
  switch (snapshot->driver_error) {
    case AccessError::kNone:
      context.Pass("driver_unavailable",
                   snapshot->driver_version.has_value()
                       ? fmt::format("NVIDIA driver {} loaded and answering", snapshot->driver_version.value())
                       : std::string("NVIDIA driver loaded and answering"));
      return;
    case AccessError::kVersionMismatch:  // driver_mismatch reports it
    case AccessError::kHang:             // nvml_hang reports it
      return;
    case AccessError::kLibraryNotFound:
      context.Report("driver_unavailable", Severity::kCritical, std::nullopt,
                     "NVML library not found: the NVIDIA driver is not installed", std::move(evidence),
                     "library_not_found");
      return;
    case AccessError::kDriverNotLoaded:
      context.Report("driver_unavailable", Severity::kCritical, std::nullopt,
                     "NVIDIA driver not loaded or not answering", std::move(evidence), "driver_not_loaded");
      return;
    case AccessError::kNoPermission:
      context.Report("driver_unavailable", Severity::kCritical, std::nullopt, "No permission to use the NVIDIA driver",
                     std::move(evidence), "no_permission");
      return;
    default:
      context.Report("driver_unavailable", Severity::kCritical, std::nullopt,
                     fmt::format("NVML failed to start ({})", AccessErrorName(snapshot->driver_error)),
                     std::move(evidence));
      return;
  }
}

void DriverMismatch(RuleContext& context) {
  const Snapshot* snapshot = context.input.snapshot;
  const HostSignals* host = context.GpuHost();
  const bool module_known = host != nullptr && host->nvidia_module_version.has_value();
  const std::string module = module_known ? host->nvidia_module_version.value() : "";
  std::vector<std::string> evidence;
  if (module_known) evidence.push_back("kernel module: " + module);
  if (snapshot != nullptr && snapshot->driver_version.has_value()) {
    evidence.push_back("NVML driver version: " + snapshot->driver_version.value());
  }
  if (snapshot != nullptr && snapshot->nvml_version.has_value()) {
    evidence.push_back("NVML library version: " + snapshot->nvml_version.value());
  }

  if (snapshot != nullptr && snapshot->driver_error == AccessError::kVersionMismatch) {
    if (!snapshot->driver_message.empty()) evidence.insert(evidence.begin(), "NVML: " + snapshot->driver_message);
    context.Report("driver_mismatch", Severity::kCritical, std::nullopt,
                   "NVIDIA kernel module and NVML library versions differ", std::move(evidence));
    return;
  }
  if (!module_known || snapshot == nullptr || !snapshot->driver_version.has_value()) return;
  const std::string& library = snapshot->driver_version.value();
  if (!SameDriverVersion(module, library)) {
    context.Report("driver_mismatch", Severity::kCritical, std::nullopt,
                   fmt::format("Kernel module {} but NVML library {}", module, library), std::move(evidence));
  } else {
    context.Pass("driver_mismatch", fmt::format("Kernel module and NVML library are both {}", library));
  }
}

void NouveauLoaded(RuleContext& context) {
  const HostSignals* host = context.input.host;
  if (host == nullptr || !host->nouveau_loaded.has_value()) return;
  if (host->nouveau_loaded.value()) {
    context.Report("nouveau_loaded", Severity::kCritical, std::nullopt, "The nouveau driver is loaded",
                   {"/sys/module/nouveau exists"});
  } else {
    context.Pass("nouveau_loaded", "nouveau is not loaded");
  }
}

void CudaIncompatible(RuleContext& context) {
  const std::string& required_text = context.thresholds.cuda_incompatible.required;
  const Snapshot* snapshot = context.input.snapshot;
  if (required_text.empty() || snapshot == nullptr) return;
  std::optional<CudaVersion> required = ParseCudaVersion(required_text);
  if (!required) {
    context.Report("cuda_incompatible", Severity::kUnknown, std::nullopt,
                   "Required CUDA version '" + required_text + "' is not a version", {});
    return;
  }
  const CudaDriverRequirement* row = CudaDriverTable::Builtin().Find(*required);
  std::optional<DriverVersion> driver =
      snapshot->driver_version.has_value() ? ParseDriverVersion(snapshot->driver_version.value()) : std::nullopt;
  std::optional<CudaVersion> supported = snapshot->cuda_driver_version.has_value()
                                             ? std::optional(CudaVersionFromInt(snapshot->cuda_driver_version.value()))
                                             : std::nullopt;

  std::vector<std::string> evidence{"required CUDA: " + required->ToString()};
  if (driver) evidence.push_back("driver: " + driver->text);
  if (supported) evidence.push_back("highest CUDA the driver supports: " + supported->ToString());
  if (row) {
    evidence.push_back(fmt::format("CUDA {} needs driver >= {} (>= {} through minor version compatibility)",
                                   row->cuda.ToString(), row->min_driver.text, row->minor_compat.text));
  }

  Severity severity = Severity::kUnknown;
  if (driver && row) {
    if (*driver >= row->min_driver)
      severity = Severity::kOk;
    else if (*driver >= row->minor_compat && supported.value_or(*required).major == required->major)
      severity = Severity::kWarning;
    else
      severity = Severity::kCritical;
  } else if (supported) {
    if (*supported >= *required)
      severity = Severity::kOk;
    else if (supported->major == required->major)
      severity = Severity::kWarning;
    else
      severity = Severity::kCritical;
  }

  switch (severity) {
    case Severity::kOk:
      context.Pass("cuda_incompatible", fmt::format("Driver supports CUDA {}", required->ToString()),
                   std::move(evidence));
      return;
    case Severity::kWarning:
      context.Report("cuda_incompatible", Severity::kWarning, std::nullopt,
                     fmt::format("Driver older than CUDA {} needs; it runs only through minor version compatibility",
                                 required->ToString()),
                     std::move(evidence));
      return;
    case Severity::kCritical:
      context.Report("cuda_incompatible", Severity::kCritical, std::nullopt,
                     fmt::format("Driver too old for CUDA {}", required->ToString()), std::move(evidence));
      return;
    case Severity::kUnknown:
      context.Report(
          "cuda_incompatible", Severity::kUnknown, std::nullopt,
          fmt::format("Cannot tell whether the driver supports CUDA {}: driver version unknown", required->ToString()),
          std::move(evidence));
      return;
  }
}

void NoDevices(RuleContext& context) {
  std::optional<uint32_t> count = NvmlGpuCount(context);
  if (!count) return;
  if (*count > 0) {
    context.Pass("no_devices", fmt::format("NVML reports {}", Plural(*count, "GPU", "GPUs")));
    return;
  }
  std::vector<std::string> evidence{"NVML device count: 0"};
  if (std::optional<size_t> on_bus = PciGpuCount(context)) {
    evidence.push_back(fmt::format("NVIDIA GPUs on the PCI bus: {}", *on_bus));
  }
  context.Report("no_devices", Severity::kCritical, std::nullopt, "NVML reports no GPUs", std::move(evidence));
}

void GpuCountMismatch(RuleContext& context) {
  // Configured, else learned by the agent from its first healthy sample.
  uint64_t expected = context.thresholds.gpu_count_mismatch.expected;
  std::string expected_from = "configured ([rules.gpu_count_mismatch] expected)";
  const HostHistory* history = context.input.host_history;
  if (expected == 0 && history != nullptr && history->learned_gpu_count) {
    expected = *history->learned_gpu_count;
    expected_from = "learned by the agent from its first healthy sample, " +
                    FormatIsoUtc(history->gpu_count_learned_at).substr(0, 10);
  }
  if (expected == 0) {
    context.Unchecked("gpu_count_mismatch",
                      "no expected GPU count: none configured and no agent history that learned one");
    return;
  }
  std::optional<uint32_t> nvml = NvmlGpuCount(context);
  std::optional<size_t> on_bus = PciGpuCount(context);
  if (!nvml && !on_bus) return;
  std::vector<std::string> evidence{fmt::format("expected: {} ({})", expected, expected_from)};
  if (nvml) evidence.push_back(fmt::format("NVML: {}", *nvml));
  if (on_bus) evidence.push_back(fmt::format("PCI bus: {}", *on_bus));
  if (nvml && *nvml != expected) {
    context.Report("gpu_count_mismatch", Severity::kCritical, std::nullopt,
                   fmt::format("NVML sees {}, {} expected", Plural(*nvml, "GPU", "GPUs"), expected),
                   std::move(evidence));
  } else if (on_bus && *on_bus != expected) {
    context.Report("gpu_count_mismatch", Severity::kCritical, std::nullopt,
                   fmt::format("{} on the PCI bus, {} expected", Plural(*on_bus, "GPU", "GPUs"), expected),
                   std::move(evidence));
  } else {
    context.Pass("gpu_count_mismatch", AllOf(expected, "expected GPU", "expected GPUs") + " present",
                 std::move(evidence));
  }
}

void GpuMissing(RuleContext& context) {
  const HostSignals* host = context.GpuHost();
  if (host == nullptr || !host->pci_gpus.has_value() || !context.DriverUp()) return;
  const std::vector<PciGpuDevice>& on_bus = host->pci_gpus.value();
  if (on_bus.empty()) return;  // nothing on the bus to hold against NVML (sysfs hidden, as in some containers)
  const Snapshot& snapshot = *context.input.snapshot;

  std::set<std::string> seen_by_nvml;
  bool every_gpu_has_pci = true;
  for (const GpuSnapshot& gpu : snapshot.gpus) {
    std::optional<std::string> pci =
        gpu.pci_bus_id.has_value() ? NormalizePciBusId(gpu.pci_bus_id.value()) : std::nullopt;
    if (pci)
      seen_by_nvml.insert(*pci);
    else
      every_gpu_has_pci = false;
  }
  const size_t nvml_count = NvmlGpuCount(context).value_or(0);

  bool reported = false;
  if (every_gpu_has_pci && seen_by_nvml.size() == snapshot.gpus.size()) {
    for (const PciGpuDevice& device : on_bus) {
      if (seen_by_nvml.count(device.pci_bus_id)) continue;
      context.Report("gpu_missing", Severity::kCritical, RefForPci(device.pci_bus_id),
                     fmt::format("GPU at {} is on the PCI bus but NVML does not see it", device.pci_bus_id),
                     {PciEvidence(device), fmt::format("NVML sees {}", Plural(nvml_count, "GPU", "GPUs"))});
      reported = true;
    }
  } else if (on_bus.size() > nvml_count) {
    std::vector<std::string> evidence;
    for (const PciGpuDevice& device : on_bus) evidence.push_back(PciEvidence(device));
    evidence.push_back(fmt::format("NVML sees {}", Plural(nvml_count, "GPU", "GPUs")));
    context.Report("gpu_missing", Severity::kCritical, std::nullopt,
                   fmt::format("{} NVIDIA GPUs on the PCI bus but NVML sees {}", on_bus.size(), nvml_count),
                   std::move(evidence));
    reported = true;
  }
  if (!reported) {
    context.Pass("gpu_missing", fmt::format("{} on the PCI bus visible to NVML",
                                            AllOf(on_bus.size(), "NVIDIA GPU", "NVIDIA GPUs")));
  }
}

void GpuLost(RuleContext& context) {
  const Snapshot* snapshot = context.input.snapshot;
  if (snapshot == nullptr || snapshot->gpus.empty()) return;
  bool reported = false;
  for (const GpuSnapshot& gpu : snapshot->gpus) {
    if (gpu.access_error != AccessError::kGpuLost) continue;
    std::vector<std::string> evidence{gpu.access_message.empty() ? "NVML: GPU is lost" : "NVML: " + gpu.access_message};
    context.Report("gpu_lost", Severity::kCritical, RefFor(gpu),
                   fmt::format("{} has fallen off the bus", GpuLabel(gpu)), std::move(evidence));
    reported = true;
  }
  if (!reported) context.Pass("gpu_lost", "No GPU has fallen off the bus");
}

void GpuUnreachable(RuleContext& context) {
  const Snapshot* snapshot = context.input.snapshot;
  if (snapshot == nullptr || snapshot->gpus.empty()) return;
  bool reported = false;
  for (const GpuSnapshot& gpu : snapshot->gpus) {
    const AccessError error = gpu.access_error;
    if (error == AccessError::kNone || error == AccessError::kGpuLost || error == AccessError::kHang) continue;
    std::string_view case_name = error == AccessError::kResetRequired  ? "reset_required"
                                 : error == AccessError::kNoPermission ? "no_permission"
                                                                       : "";
    std::vector<std::string> evidence{fmt::format("NVML: {}{}", AccessErrorName(error),
                                                  gpu.access_message.empty() ? "" : " (" + gpu.access_message + ")")};
    std::string summary = error == AccessError::kResetRequired ? fmt::format("{} needs a reset", GpuLabel(gpu))
                                                               : fmt::format("{} cannot be read", GpuLabel(gpu));
    context.Report("gpu_unreachable", Severity::kCritical, RefFor(gpu), std::move(summary), std::move(evidence),
                   case_name);
    reported = true;
  }
  if (!reported) context.Pass("gpu_unreachable", ReadableSummary(context));
}

void FieldErrors(RuleContext& context) {
  const Snapshot* snapshot = context.input.snapshot;
  if (!context.DriverUp()) return;
  bool reported = false;
  std::vector<std::string> driver_evidence;
  if (snapshot->driver_version.failed())
    driver_evidence.push_back("driver_version: " + snapshot->driver_version.error());
  if (snapshot->nvml_version.failed()) driver_evidence.push_back("nvml_version: " + snapshot->nvml_version.error());
  if (snapshot->cuda_driver_version.failed()) {
    driver_evidence.push_back("cuda_driver_version: " + snapshot->cuda_driver_version.error());
  }
  if (snapshot->device_count.failed()) driver_evidence.push_back("device_count: " + snapshot->device_count.error());
  if (!driver_evidence.empty()) {
    context.Report("field_error", Severity::kWarning, std::nullopt,
                   fmt::format("{} of the driver failed", Plural(driver_evidence.size(), "reading", "readings")),
                   std::move(driver_evidence));
    reported = true;
  }
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    std::vector<FailedField> failed = FailedFields(*gpu);
    if (failed.empty()) continue;
    std::vector<std::string> names, evidence;
    for (const FailedField& field : failed) {
      names.push_back(field.name);
      evidence.push_back(field.name + ": " + field.error);
    }
    // A GPU that answers none of its temperature, power and utilization cannot be watched at all (nvidia-smi
    // shows its whole row as ERR!, as for a GPU whose GSP stopped answering): as bad as one that cannot be
    // reached.
    auto failed_named = [&](std::string_view name) { return std::find(names.begin(), names.end(), name) != names.end(); };
    const bool blind =
        failed_named("temperature_c") && failed_named("power_draw_w") && failed_named("utilization_gpu_percent");
    std::string summary = fmt::format("{}: {} failed", GpuLabel(*gpu), Plural(failed.size(), "reading", "readings"));
    if (failed.size() <= 3) summary += " (" + JoinWithAnd(names) + ")";
    if (blind) summary += ": it reports neither its temperature, its power nor its utilization";
    context.Report("field_error", blind ? Severity::kCritical : Severity::kWarning, RefFor(*gpu), std::move(summary),
                   std::move(evidence));
    reported = true;
  }
  if (!reported && !context.ReadableGpus().empty()) {
    context.Pass("field_error",
                 fmt::format("Every reading of {} succeeded", Plural(context.ReadableGpus().size(), "GPU", "GPUs")));
  }
}

// A source that holds less than it names (a capture cut short) was judged
// only in part: what it left out can be neither ok nor a problem.
void CaptureIncomplete(RuleContext& context) {
  const Snapshot* snapshot = context.input.snapshot;
  if (snapshot == nullptr) return;
  if (snapshot->incomplete_reasons.empty()) {
    if (!snapshot->gpus.empty())
      context.Pass("capture_incomplete", AllOf(snapshot->gpus.size(), "GPU", "GPUs") + " described in full");
    return;
  }
  std::vector<std::string> evidence{"source: " + snapshot->source};
  evidence.insert(evidence.end(), snapshot->incomplete_reasons.begin(), snapshot->incomplete_reasons.end());
  context.ReportUnknown("capture_incomplete",
                        fmt::format("The capture is incomplete: the findings cover only the {} it describes",
                                    Plural(snapshot->gpus.size(), "GPU", "GPUs")),
                        std::move(evidence));
}

}  // namespace gpudoctor::rules_internal
