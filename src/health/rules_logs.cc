// Rules about the kernel and system log: Xids and other hardware errors.
#include <algorithm>
#include <map>
#include <set>

#include "common/text.h"
#include "health/rule_context.h"

namespace gpudoctor::rules_internal {
namespace {

constexpr size_t kMaxLogLines = 6;  // evidence lines quoted per finding

// Which device a log event is about, as precisely as it says.
struct Device {
  std::string key;  // groups events of the same device
  std::optional<GpuRef> ref;
  std::string label;  // "GPU 0", "GPU at 0000:3b:00.0", or empty for the host
};

Device DeviceOf(const RuleContext& context, const LogEvent& event) {
  if (const GpuSnapshot* gpu = context.GpuAtPci(event.pci_bus_id)) {
    GpuRef ref = RefFor(*gpu);
    return {ref.pci_bus_id.empty() ? fmt::format("index:{}", gpu->index) : ref.pci_bus_id, ref, GpuLabel(*gpu)};
  }
  if (!event.gpu_uuid.empty() && context.input.snapshot != nullptr) {
    for (const GpuSnapshot& gpu : context.input.snapshot->gpus) {
      if (gpu.uuid.value_or("") == event.gpu_uuid)
        return {fmt::format("index:{}", gpu.index), RefFor(gpu), GpuLabel(gpu)};
    }
  }
  if (!event.pci_bus_id.empty()) {
    GpuRef ref = RefForPci(event.pci_bus_id);
    if (!event.gpu_uuid.empty()) ref.uuid = event.gpu_uuid;
    return {ref.pci_bus_id, ref, "GPU at " + ref.pci_bus_id};
  }
  return {"", std::nullopt, ""};
}

Device DeviceOf(const RuleContext& context, const XidEvent& event) {
  const GpuSnapshot* gpu = context.input.snapshot->FindGpu(event.gpu_index);
  if (gpu == nullptr) {
    GpuRef ref;
    ref.index = event.gpu_index;
    return {fmt::format("index:{}", event.gpu_index), ref, fmt::format("GPU {}", event.gpu_index)};
  }
  GpuRef ref = RefFor(*gpu);
  return {ref.pci_bus_id.empty() ? fmt::format("index:{}", gpu->index) : ref.pci_bus_id, ref, GpuLabel(*gpu)};
}

// The log lines (or reports) that `events` stand for, folded storms counted whole.
uint64_t OccurrencesOf(const std::vector<const LogEvent*>& events) {
  uint64_t count = 0;
  for (const LogEvent* event : events) count += Occurrences(*event);
  return count;
}

// An event's time, and a folded storm's first time too.
void AddTimes(std::vector<std::optional<WallTime>>& times, const LogEvent& event) {
  times.push_back(event.time);
  if (event.repeats > 0) times.push_back(event.repeats_from);
}

// Log lines of a group, quoted as evidence: the first and the last ones when
// there are many.
std::vector<std::string> QuoteLines(const std::vector<const LogEvent*>& events) {
  std::vector<std::string> lines;
  auto quote = [&](const LogEvent& event) {
    // A folded storm: its line is the last of them.
    if (event.repeats > 0 && event.repeats_differ)
      lines.push_back(fmt::format("... {} more of this kind on this device ...", event.repeats));
    else if (event.repeats > 0)
      lines.push_back(fmt::format("... {} more of the same ...", event.repeats));
    std::string line = event.raw.empty() ? event.message : event.raw;
    if (!event.source.empty()) line = fmt::format("{}:{}: {}", event.source, event.line_number, line);
    lines.push_back(std::move(line));
  };
  if (events.size() <= kMaxLogLines) {
    for (const LogEvent* event : events) quote(*event);
    return lines;
  }
  const size_t tail = events.size() - kMaxLogLines / 2;
  for (size_t i = 0; i < kMaxLogLines / 2; ++i) quote(*events[i]);
  uint64_t skipped = 0;
  for (size_t i = kMaxLogLines / 2; i < tail; ++i) skipped += Occurrences(*events[i]);
  lines.push_back(fmt::format("... {} more ...", skipped));
  for (size_t i = tail; i < events.size(); ++i) quote(*events[i]);
  return lines;
}

std::string TimeSpan(const std::vector<std::optional<WallTime>>& times) {
  std::optional<WallTime> first, last;
  for (const auto& time : times) {
    if (!time) continue;
    if (!first || *time < *first) first = time;
    if (!last || *time > *last) last = time;
  }
  if (!first) return "";
  if (*first == *last) return "at " + FormatIsoUtc(*first);
  return fmt::format("first at {}, last at {}", FormatIsoUtc(*first), FormatIsoUtc(*last));
}

std::optional<WallTime> Newest(const std::vector<std::optional<WallTime>>& times) {
  std::optional<WallTime> newest;
  for (const auto& time : times)
    if (time && (!newest || *time > *newest)) newest = time;
  return newest;
}

std::string Times(size_t count) { return count == 1 ? "" : fmt::format(" ({} times)", count); }

// Fills a finding's cause and actions from the catalog's grade, keeping the
// rule's own actions after the catalog's.
void ApplyGrade(Finding& finding, const std::optional<EventGrade>& grade) {
  if (!grade) return;
  if (!grade->cause.empty()) {
    finding.cause = grade->cause;
  } else if (!grade->cause_tags.empty()) {
    finding.cause += " Likely causes: " + JoinWithAnd(grade->cause_tags) + ".";
  }
  if (!grade->action.empty()) finding.actions.insert(finding.actions.begin(), grade->action);
}

// What the lines themselves say (logs/event_details.h): each distinct decoded
// meaning as evidence, each distinct decoded action ahead of the catalog's.
void ApplyDecodedDetails(Finding& finding, const std::vector<const LogEvent*>& events) {
  auto add_once = [](std::vector<std::string>& list, std::string item) {
    if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(std::move(item));
  };
  std::vector<std::string> actions;
  for (const LogEvent* event : events) {
    for (std::string_view name : {"meaning", "resolution"}) {
      if (!event->Field(name).empty()) add_once(finding.evidence, fmt::format("{}: {}", name, event->Field(name)));
    }
    if (!event->Field("action").empty()) add_once(actions, std::string(event->Field("action")));
  }
  finding.actions.insert(finding.actions.begin(), actions.begin(), actions.end());
}

Severity WorstEventSeverity(const std::vector<const LogEvent*>& events) {
  Severity worst = Severity::kOk;
  for (const LogEvent* event : events) {
    Severity severity = SeverityForEvent(event->severity);
    if (SeverityRank(severity) > SeverityRank(worst)) worst = severity;
  }
  return worst;
}

struct XidGroup {
  Device device;
  uint32_t code = 0;
  std::vector<const LogEvent*> log_events;
  std::vector<const XidEvent*> nvml_events;
};

// A line that says more than its code (an NVLink5 error the driver calls
// non-fatal, Xid 74's registers, Xid 154's recovery action: the fields
// logs/event_details.h decodes) is graded by what it says; any other line, and
// an NVML event, which gives only the code, by the catalog's grade of the code.
bool SaysMoreThanItsCode(const LogEvent& event) {
  for (std::string_view field : {"nvlink_unit", "meaning", "recovery"}) {
    if (!event.Field(field).empty()) return true;
  }
  return false;
}

Severity GroupSeverity(const XidGroup& group, const std::optional<EventGrade>& grade) {
  const Severity by_code = grade ? grade->severity : Severity::kWarning;
  Severity worst = Severity::kOk;
  auto take = [&worst](Severity severity) {
    if (SeverityRank(severity) > SeverityRank(worst)) worst = severity;
  };
  if (!group.nvml_events.empty()) take(by_code);
  for (const LogEvent* event : group.log_events) {
    take(SaysMoreThanItsCode(*event) || !grade ? SeverityForEvent(event->severity) : by_code);
  }
  return worst;
}

}  // namespace

void XidRecent(RuleContext& context) {
  const Duration window = context.thresholds.xid_recent.window;
  std::map<std::pair<std::string, uint32_t>, XidGroup> groups;
  if (context.input.log_events != nullptr) {
    for (const LogEvent& event : *context.input.log_events) {
      if (event.kind != "xid" || !event.xid || !context.WithinWindow(event.time, window)) continue;
      Device device = DeviceOf(context, event);
      XidGroup& group = groups[{device.key, *event.xid}];
      group.device = std::move(device);
      group.code = *event.xid;
      group.log_events.push_back(&event);
    }
  }
  const std::vector<XidEvent>* nvml_events = context.input.nvml_xid_events;
  if (nvml_events == nullptr && context.input.snapshot != nullptr) nvml_events = &context.input.snapshot->xid_events;
  if (nvml_events != nullptr) {
    for (const XidEvent& event : *nvml_events) {
      if (!context.WithinWindow(event.time, window) || event.xid > UINT32_MAX) continue;
      Device device = DeviceOf(context, event);
      XidGroup& group = groups[{device.key, static_cast<uint32_t>(event.xid)}];
      group.device = std::move(device);
      group.code = static_cast<uint32_t>(event.xid);
      group.nvml_events.push_back(&event);
    }
  }

  for (const auto& [key, group] : groups) {
    std::optional<EventGrade> grade;
    if (context.input.event_grader != nullptr) grade = context.input.event_grader->GradeXid(group.code);
    Severity severity = GroupSeverity(group, grade);
    const size_t count = OccurrencesOf(group.log_events) + group.nvml_events.size();
    std::string title = grade && !grade->title.empty() ? grade->title : "";
    std::string summary = fmt::format("Xid {}{}{}{}{}", group.code, group.device.label.empty() ? "" : " on ",
                                      group.device.label, title.empty() ? "" : ": " + title, Times(count));

    std::vector<std::string> evidence = QuoteLines(group.log_events);
    std::vector<std::optional<WallTime>> times;
    for (const LogEvent* event : group.log_events) AddTimes(times, *event);
    for (const XidEvent* event : group.nvml_events) {
      evidence.push_back(
          fmt::format("NVML event: Xid {} on GPU {} at {}", event->xid, event->gpu_index, FormatIsoUtc(event->time)));
      times.push_back(event->time);
    }
    if (std::string span = TimeSpan(times); !span.empty()) evidence.push_back(span);
    Finding& finding =
        context.Report("xid_recent", severity, group.device.ref, std::move(summary), std::move(evidence));
    // Each Xid of a GPU is its own incident: a Xid 45 can then be told as part of the Xid that caused it.
    finding.subject = std::to_string(group.code);
    finding.newest_event_at = Newest(times);
    ApplyGrade(finding, grade);
    ApplyDecodedDetails(finding, group.log_events);
  }
  if (groups.empty() && context.input.log_events != nullptr) {
    context.Pass("xid_recent", "No Xid errors in the last " + FormatSpan(window));
  }
}

void LogErrors(RuleContext& context) {
  const std::vector<LogEvent>* events = context.input.log_events;
  if (events == nullptr) return;
  const Duration window = context.thresholds.log_errors.window;
  // An Xid line can also yield events of other kinds (gpu_off_bus for Xid
  // 79); xid_recent already reports that line.
  std::set<std::pair<std::string, uint64_t>> xid_lines;
  for (const LogEvent& event : *events)
    if (event.kind == "xid") xid_lines.insert({event.source, event.line_number});

  struct Group {
    Device device;
    std::string kind;
    std::vector<const LogEvent*> events;
  };
  std::map<std::pair<std::string, std::string>, Group> groups;
  for (const LogEvent& event : *events) {
    if (event.kind == "xid" || event.kind == "hung_task") continue;  // rules of their own
    if (event.severity == EventSeverity::kInfo || !context.WithinWindow(event.time, window)) continue;
    if (event.line_number > 0 && xid_lines.count({event.source, event.line_number})) continue;
    Device device = DeviceOf(context, event);
    Group& group = groups[{event.kind, device.key}];
    group.device = std::move(device);
    group.kind = event.kind;
    group.events.push_back(&event);
  }

  for (const auto& [key, group] : groups) {
    std::optional<EventGrade> grade;
    if (context.input.event_grader != nullptr) grade = context.input.event_grader->GradeKind(group.kind);
    const std::string title = grade && !grade->title.empty() ? grade->title : group.kind;
    std::string summary = fmt::format("{}{}{}{}", title, group.device.label.empty() ? "" : " on ", group.device.label,
                                      Times(OccurrencesOf(group.events)));
    std::vector<std::string> evidence = QuoteLines(group.events);
    std::vector<std::optional<WallTime>> times;
    for (const LogEvent* event : group.events) AddTimes(times, *event);
    if (std::string span = TimeSpan(times); !span.empty()) evidence.push_back(span);
    Finding& finding = context.Report("log_errors", WorstEventSeverity(group.events), group.device.ref,
                                      std::move(summary), std::move(evidence));
    finding.newest_event_at = Newest(times);
    ApplyGrade(finding, grade);
  }
  if (groups.empty()) {
    context.Pass("log_errors", "No GPU or hardware errors in the system log in the last " + FormatSpan(window));
  }
}

}  // namespace gpudoctor::rules_internal
