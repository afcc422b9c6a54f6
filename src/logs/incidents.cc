#include "logs/incidents.h"

#include <algorithm>

namespace gpudoctor {

namespace {

constexpr size_t kLeadingExamples = 3;

bool IsPcieKind(const std::string& kind) {
  return kind == "pcie_aer" || kind == "pcie_link_down" || kind == "pcie_bandwidth_limited";
}

// Events that mean a GPU was lost, the effect a PCIe error can cause.
bool IsGpuLoss(const std::string& label) {
  return label == "gpu_off_bus" || label == "xid 79" || label == "rm_init_failed" || label == "pcie_link_down";
}

double SecondsBetween(WallTime from, WallTime to) { return std::chrono::duration<double>(to - from).count(); }

void AddEvent(Incident& incident, const LogEvent& event) {
  std::string label = ChainLabel(event);
  const bool first = incident.event_count == 0;
  if (incident.counts[label] == 0) incident.chain.push_back(label);
  incident.counts[label] += Occurrences(event);  // a folded storm counts whole
  incident.event_count += Occurrences(event);
  if (first || event.severity > incident.severity) {
    incident.severity = event.severity;
    incident.headline = event;
  }
  if (!incident.first_time) incident.first_time = event.repeats > 0 ? event.repeats_from : event.time;
  if (event.time) incident.last_time = event.time;
  if (!incident.first_uptime) incident.first_uptime = event.uptime_seconds;
  if (event.uptime_seconds) incident.last_uptime = event.uptime_seconds;
  if (incident.first_line == 0) incident.first_line = event.line_number;
  incident.last_line = event.line_number;
  if (incident.source.empty()) incident.source = event.source;
  if (incident.pci_bus_id.empty()) incident.pci_bus_id = event.pci_bus_id;
  if (incident.gpu_uuid.empty()) incident.gpu_uuid = event.gpu_uuid;
  if (incident.gpu_serial.empty()) incident.gpu_serial = event.gpu_serial;
  if (incident.host.empty()) incident.host = event.host;
  // Keep the first few events and the latest one: memory stays bounded in a storm.
  if (incident.examples.size() <= kLeadingExamples) {
    incident.examples.push_back(event);
  } else {
    incident.examples.back() = event;
  }
}

// Adds the events of `later` (summarised) to `into`.
void Absorb(Incident& into, const Incident& later) {
  for (const std::string& label : later.chain) {
    if (into.counts[label] == 0) into.chain.push_back(label);
    into.counts[label] += later.counts.at(label);
  }
  into.event_count += later.event_count;
  if (later.severity > into.severity) {
    into.severity = later.severity;
    into.headline = later.headline;
  }
  if (!into.first_time) into.first_time = later.first_time;
  if (later.last_time) into.last_time = later.last_time;
  if (!into.first_uptime) into.first_uptime = later.first_uptime;
  if (later.last_uptime) into.last_uptime = later.last_uptime;
  into.last_line = std::max(into.last_line, later.last_line);
  into.examples.insert(into.examples.end(), later.examples.begin(), later.examples.end());
}

}  // namespace

std::string ChainLabel(const LogEvent& event) {
  if (event.kind == "xid" && event.xid) return "xid " + std::to_string(*event.xid);
  return event.kind;
}

IncidentGrouper::IncidentGrouper(Duration window, const LogCatalog& catalog) : window_(window), catalog_(catalog) {}

std::string IncidentGrouper::SubjectOf(const LogEvent& event) const {
  if (!event.pci_bus_id.empty()) return event.pci_bus_id;
  if (!event.gpu_uuid.empty()) return event.gpu_uuid;
  if (auto instance = event.Field("gpu_instance"); !instance.empty()) return std::string(instance);
  if (auto display = event.Field("display_gpu"); !display.empty()) return std::string(display);
  const KindInfo* kind = catalog_.FindKind(event.kind);
  if (kind && kind->scope == EventScope::kHost) return "host";
  return "nvidia driver";
}

bool IncidentGrouper::Continues(const Incident& incident, const LogEvent& event) const {
  const double window_seconds = std::chrono::duration<double>(window_).count();
  if (incident.last_time && event.time) {
    double gap = SecondsBetween(*incident.last_time, *event.time);
    return gap >= -window_seconds && gap <= window_seconds;
  }
  if (incident.last_uptime && event.uptime_seconds) {
    // Uptime going backwards means a reboot: a new incident.
    double gap = *event.uptime_seconds - *incident.last_uptime;
    return gap >= 0 && gap <= window_seconds;
  }
  return true;  // no times to compare: consecutive events of one subject belong together
}

void IncidentGrouper::Add(const LogEvent& event) {
  std::string subject = SubjectOf(event);
  auto open = open_by_subject_.find(subject);
  if (open != open_by_subject_.end() && Continues(incidents_[open->second], event)) {
    AddEvent(incidents_[open->second], event);
    return;
  }
  Incident incident;
  incident.subject = subject;
  AddEvent(incident, event);
  incidents_.push_back(std::move(incident));
  open_by_subject_[subject] = incidents_.size() - 1;
}

void IncidentGrouper::AttachPcieCauses(std::vector<Incident>& incidents) const {
  const double window_seconds = std::chrono::duration<double>(window_).count();
  std::vector<bool> absorbed(incidents.size(), false);
  for (size_t i = 0; i < incidents.size(); ++i) {
    Incident& cause = incidents[i];
    bool only_pcie = std::all_of(cause.chain.begin(), cause.chain.end(), [](const std::string& label) {
      return IsPcieKind(label);
    });
    if (!only_pcie || cause.pci_bus_id.empty()) continue;
    // The GPU incidents that start with a loss soon after this PCIe error.
    std::vector<size_t> effects;
    for (size_t j = i + 1; j < incidents.size(); ++j) {
      const Incident& effect = incidents[j];
      if (effect.pci_bus_id.empty() || effect.pci_bus_id == cause.pci_bus_id || absorbed[j]) continue;
      if (std::none_of(effect.chain.begin(), effect.chain.end(), IsGpuLoss)) continue;
      bool soon = true;
      if (cause.last_time && effect.first_time) {
        double gap = SecondsBetween(*cause.last_time, *effect.first_time);
        soon = gap >= 0 && gap <= window_seconds;
      } else if (cause.last_uptime && effect.first_uptime) {
        double gap = *effect.first_uptime - *cause.last_uptime;
        soon = gap >= 0 && gap <= window_seconds;
      }
      if (soon) effects.push_back(j);
    }
    // With one candidate the link is clear; with several the log cannot tell.
    if (effects.size() != 1) continue;
    Incident& effect = incidents[effects[0]];
    Incident merged = cause;
    Absorb(merged, effect);
    merged.subject = effect.subject;
    merged.pci_bus_id = effect.pci_bus_id;
    merged.gpu_uuid = effect.gpu_uuid;
    merged.gpu_serial = effect.gpu_serial;
    effect = std::move(merged);
    absorbed[i] = true;
  }
  size_t kept = 0;
  for (size_t i = 0; i < incidents.size(); ++i) {
    if (absorbed[i]) continue;
    if (kept != i) incidents[kept] = std::move(incidents[i]);
    ++kept;
  }
  incidents.resize(kept);
}

std::vector<Incident> IncidentGrouper::Finish() {
  std::vector<Incident> incidents = std::move(incidents_);
  incidents_.clear();
  open_by_subject_.clear();
  AttachPcieCauses(incidents);
  std::stable_sort(incidents.begin(), incidents.end(),
                   [](const Incident& a, const Incident& b) { return a.first_line < b.first_line; });
  return incidents;
}

std::vector<Incident> GroupIncidents(const std::vector<LogEvent>& events, Duration window,
                                     const LogCatalog& catalog) {
  IncidentGrouper grouper(window, catalog);
  for (const LogEvent& event : events) grouper.Add(event);
  return grouper.Finish();
}

}  // namespace gpudoctor
