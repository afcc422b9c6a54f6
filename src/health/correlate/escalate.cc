#include "health/correlate/escalate.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/text.h"
#include "health/correlate/gpu_token.h"
#include "health/rule_context.h"

namespace gpudoctor {
namespace {

using rules_internal::FormatSpan;
using rules_internal::Plural;
using rules_internal::RefFor;
using rules_internal::RefForPci;

constexpr size_t kMaxListed = 12;  // evidence lines listed per escalation

// Xid lines of one GPU and code that came together (less than
// occurrence_gap apart): one event that the driver reported in several lines.
struct Occurrence {
  WallTime first;
  WallTime last;
  size_t lines = 0;
  std::string first_line;
};

struct XidHistory {
  GpuRef gpu;
  uint32_t code = 0;
  std::vector<Occurrence> occurrences;  // oldest first
};

// An evidence line with its time, for lists merged in time order.
struct TimedLine {
  WallTime time;
  std::string text;
};

std::vector<XidHistory> GroupXids(const std::vector<XidRecord>& records, WallTime oldest, Duration gap) {
  std::map<std::pair<std::string, uint32_t>, std::vector<const XidRecord*>> grouped;
  for (const XidRecord& record : records)
    if (record.time >= oldest) grouped[{GpuToken(record.gpu), record.code}].push_back(&record);
  std::vector<XidHistory> histories;
  for (auto& [key, group] : grouped) {
    std::stable_sort(group.begin(), group.end(), [](const XidRecord* a, const XidRecord* b) { return a->time < b->time; });
    XidHistory& history = histories.emplace_back(XidHistory{group.front()->gpu, key.second, {}});
    for (const XidRecord* record : group) {
      if (!history.occurrences.empty() && record->time - history.occurrences.back().last < gap) {
        history.occurrences.back().last = record->time;
        ++history.occurrences.back().lines;
        continue;
      }
      history.occurrences.push_back({record->time, record->time, 1, record->line});
    }
  }
  return histories;
}

std::string Describe(const Occurrence& occurrence, uint32_t code) {
  std::string line = fmt::format("{}: Xid {}: {}", FormatIsoUtc(occurrence.first), code, occurrence.first_line);
  if (occurrence.lines > 1) line += fmt::format(" (+{} more)", occurrence.lines - 1);
  return line;
}

// At most kMaxListed lines, oldest first: the first and the last ones when there are more.
std::vector<std::string> Listed(std::vector<TimedLine> lines) {
  std::stable_sort(lines.begin(), lines.end(), [](const TimedLine& a, const TimedLine& b) { return a.time < b.time; });
  std::vector<std::string> listed;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines.size() > kMaxListed && i == kMaxListed / 2) {
      listed.push_back(fmt::format("... {} more ...", lines.size() - kMaxListed));
      i = lines.size() - kMaxListed / 2;
    }
    listed.push_back(std::move(lines[i].text));
  }
  return listed;
}

size_t CountSince(const std::vector<Occurrence>& occurrences, WallTime since) {
  return static_cast<size_t>(std::count_if(occurrences.begin(), occurrences.end(),
                                           [&](const Occurrence& o) { return o.last >= since; }));
}

std::vector<TimedLine> OccurrenceLines(const XidHistory& history, WallTime since) {
  std::vector<TimedLine> lines;
  for (const Occurrence& occurrence : history.occurrences)
    if (occurrence.last >= since) lines.push_back({occurrence.first, Describe(occurrence, history.code)});
  return lines;
}

class Escalation {
 public:
  Escalation(const EscalationInput& input, const EscalationConfig& config) : input_(input), config_(config) {}

  std::vector<Finding> Run() {
    const WallTime oldest = Since(config_.lookback);
    for (const XidHistory& history : GroupXids(input_.xids, oldest, config_.occurrence_gap)) {
      const bool fatal = IsFatal(history.code);
      Recurring(history, config_.AfterRestarts(history.code, fatal));
      Repeated(history, "xid_fatal_repeated", Severity::kCritical, config_.FatalCount(history.code, fatal),
               config_.fatal_window, "contact support");
      Repeated(history, "xid_diagnostics_due", Severity::kWarning, config_.DiagnoseCount(history.code),
               config_.diagnose_window, "run the GPU diagnostics");
    }
    Remediations();
    return std::move(findings_);
  }

 private:
  WallTime Since(Duration window) const {
    return input_.now - std::chrono::duration_cast<WallTime::duration>(window);
  }

  bool IsFatal(uint32_t code) const {
    if (input_.event_grader == nullptr) return false;
    auto grade = input_.event_grader->GradeXid(code);
    return grade && grade->severity == Severity::kCritical;
  }

  void Add(std::string_view id, Severity severity, std::optional<GpuRef> gpu, std::string subject, std::string summary,
           std::vector<std::string> evidence, WallTime newest) {
    Finding& finding = findings_.emplace_back();
    finding.id = std::string(id);
    finding.severity = severity;
    finding.gpu = std::move(gpu);
    finding.subject = std::move(subject);
    finding.summary = std::move(summary);
    finding.evidence = std::move(evidence);
    finding.newest_event_at = newest;
    const Remedy& remedy = config_.RemedyFor(id);
    finding.cause = remedy.cause;
    finding.actions = FillGpuPlaceholder(remedy.actions, finding.gpu);
  }

  // The restarts of `gpu` in time order.
  std::vector<const RestartRecord*> RestartsOf(const GpuRef& gpu) const {
    std::vector<const RestartRecord*> restarts;
    for (const RestartRecord& restart : input_.restarts)
      if (!restart.gpu || SameGpu(*restart.gpu, gpu)) restarts.push_back(&restart);
    std::stable_sort(restarts.begin(), restarts.end(),
                     [](const RestartRecord* a, const RestartRecord* b) { return a->time < b->time; });
    return restarts;
  }

  // The Xid showed up in more than `after_restarts` of the periods that
  // restarts cut the lookback into: it outlived that many restarts.
  void Recurring(const XidHistory& history, uint32_t after_restarts) {
    if (after_restarts == 0 || history.occurrences.size() < 2) return;
    const std::vector<const RestartRecord*> restarts = RestartsOf(history.gpu);
    std::set<size_t> periods;
    for (const Occurrence& occurrence : history.occurrences) {
      periods.insert(static_cast<size_t>(std::count_if(restarts.begin(), restarts.end(),
                                                       [&](const RestartRecord* r) { return r->time < occurrence.first; })));
    }
    const size_t outlived = periods.size() - 1;
    if (outlived < after_restarts) return;
    const WallTime first = history.occurrences.front().first, last = history.occurrences.back().last;
    std::vector<TimedLine> lines = OccurrenceLines(history, first);
    for (const RestartRecord* restart : restarts)
      if (restart->time > first && restart->time < last)
        lines.push_back({restart->time, fmt::format("{}: restart: {}", FormatIsoUtc(restart->time), restart->what)});
    std::vector<std::string> evidence = Listed(std::move(lines));
    evidence.insert(evidence.begin(), fmt::format("Xid {} in {} periods between restarts; escalates after {}",
                                                  history.code, periods.size(), Plural(after_restarts, "restart",
                                                                                       "restarts")));
    Add("xid_recurring", Severity::kCritical, history.gpu, std::to_string(history.code),
        fmt::format("Xid {} on {} came back after {}: inspect the hardware", history.code, GpuName(history.gpu),
                    Plural(outlived, "restart", "restarts")),
        std::move(evidence), last);
  }

  void Repeated(const XidHistory& history, std::string_view id, Severity severity, uint32_t count, Duration window,
                std::string_view advice) {
    if (count == 0) return;
    const WallTime since = Since(window);
    const size_t seen = CountSince(history.occurrences, since);
    if (seen < count) return;
    std::vector<std::string> evidence = Listed(OccurrenceLines(history, since));
    evidence.insert(evidence.begin(), fmt::format("{} of Xid {} in the last {}; escalates at {}",
                                                  Plural(seen, "occurrence", "occurrences"), history.code,
                                                  FormatSpan(window), count));
    Add(id, severity, history.gpu, std::to_string(history.code),
        fmt::format("Xid {} on {} {} times in the last {}: {}", history.code, GpuName(history.gpu), seen,
                    FormatSpan(window), advice),
        std::move(evidence), history.occurrences.back().last);
  }

  void Remediations() {
    if (config_.remediation_count == 0) return;
    const WallTime since = Since(config_.remediation_window);
    std::map<std::string, std::vector<const RemediationRecord*>> by_target;  // "" for the host
    for (const RemediationRecord& remediation : input_.remediations)
      if (remediation.time >= since) by_target[remediation.gpu ? GpuToken(*remediation.gpu) : ""].push_back(&remediation);
    for (const auto& [target, remediations] : by_target) {
      if (remediations.size() < config_.remediation_count) continue;
      std::vector<TimedLine> lines;
      WallTime newest = remediations.front()->time;
      for (const RemediationRecord* remediation : remediations) {
        lines.push_back({remediation->time, FormatIsoUtc(remediation->time) + ": " + remediation->what});
        newest = std::max(newest, remediation->time);
      }
      const std::optional<GpuRef> gpu = remediations.front()->gpu;
      std::vector<std::string> evidence = Listed(std::move(lines));
      evidence.insert(evidence.begin(), fmt::format("{} in the last {}; escalates at {}",
                                                    Plural(remediations.size(), "remediation", "remediations"),
                                                    FormatSpan(config_.remediation_window), config_.remediation_count));
      Add("remediation_repeated", Severity::kCritical, gpu, "",
          fmt::format("{} needed {} remediations in the last {}: contact support", gpu ? GpuName(*gpu) : "The host",
                      remediations.size(), FormatSpan(config_.remediation_window)),
          std::move(evidence), newest);
    }
  }

  const EscalationInput& input_;
  const EscalationConfig& config_;
  std::vector<Finding> findings_;
};

// The snapshot's GPU a log line names, else a reference by its bus id.
GpuRef GpuOfLine(const Snapshot& snapshot, const LogEvent& event) {
  auto bus = NormalizePciBusId(event.pci_bus_id);
  for (const GpuSnapshot& gpu : snapshot.gpus) {
    if (bus && gpu.pci_bus_id.has_value() && NormalizePciBusId(gpu.pci_bus_id.value()) == bus) return RefFor(gpu);
    if (!event.gpu_uuid.empty() && gpu.uuid.value_or("") == event.gpu_uuid) return RefFor(gpu);
  }
  GpuRef ref = RefForPci(event.pci_bus_id);
  ref.uuid = event.gpu_uuid;
  return ref;
}

}  // namespace

std::vector<Finding> Escalate(const EscalationInput& input, const EscalationConfig& config) {
  if (!config.enabled) return {};
  return Escalation(input, config).Run();
}

std::vector<XidRecord> XidRecordsFrom(const Snapshot& snapshot, const std::vector<LogEvent>& log,
                                      const std::vector<XidEvent>& nvml) {
  std::vector<XidRecord> records;
  for (const LogEvent& event : log) {
    if (event.kind != "xid" || !event.xid || !event.time) continue;
    records.push_back({GpuOfLine(snapshot, event), *event.xid, *event.time, event.raw.empty() ? event.message : event.raw});
  }
  for (const XidEvent& event : nvml) {
    if (event.xid > UINT32_MAX) continue;
    const GpuSnapshot* gpu = snapshot.FindGpu(event.gpu_index);
    GpuRef ref = gpu != nullptr ? RefFor(*gpu) : GpuRef{.index = event.gpu_index};
    records.push_back({std::move(ref), static_cast<uint32_t>(event.xid), event.time,
                       fmt::format("NVML event: Xid {} on GPU {}", event.xid, event.gpu_index)});
  }
  return records;
}

std::vector<RestartRecord> DriverLoads(const std::vector<LogEvent>& log) {
  std::vector<RestartRecord> restarts;
  for (const LogEvent& event : log) {
    if (event.kind != "driver_loaded" || !event.time) continue;
    std::string_view version = event.Field("driver_version");
    restarts.push_back({*event.time, std::nullopt,
                        version.empty() ? std::string("NVIDIA driver loaded")
                                        : fmt::format("NVIDIA driver {} loaded", version)});
  }
  return restarts;
}

}  // namespace gpudoctor
