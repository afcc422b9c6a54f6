#include "fleet/fleet_views.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "health/checklist.h"

namespace gpudoctor {
namespace {

int Rank(const std::string& severity) {
  if (severity == "critical") return 3;
  if (severity == "warning") return 2;
  if (severity == "unknown") return 1;
  return 0;
}

const std::string& Worse(const std::string& a, const std::string& b) { return Rank(b) > Rank(a) ? b : a; }

std::string Describe(const FleetFinding& finding) {
  std::string out = finding.id;
  if (!finding.gpu.empty()) out += " gpu " + finding.gpu;
  if (!finding.subject.empty()) out += " (" + finding.subject + ")";
  return out;
}

void Count(ErrorCounts& counts, const ErrorEpisode& episode) {
  switch (episode.kind) {
    case ErrorKind::kXid: counts.xid += episode.count; break;
    case ErrorKind::kUncorrectableEcc: counts.uncorrectable_ecc += episode.count; break;
    case ErrorKind::kRowRemap: counts.row_remap += episode.count; break;
    case ErrorKind::kPcieReplays: counts.pcie_replays += episode.count; break;
    case ErrorKind::kFellOffBus: counts.fell_off_bus += 1; break;
  }
}

// The open findings as BuildChecklist takes them, described as the views show them.
std::vector<Finding> AsFindings(const std::vector<FleetFinding>& open) {
  std::vector<Finding> findings;
  for (const FleetFinding& f : open) {
    findings.push_back({.id = f.id,
                        .severity = SeverityFromName(f.severity).value_or(Severity::kUnknown),
                        .summary = Describe(f)});
  }
  return findings;
}

// `item`, of BuildChecklist over the host's open findings (AsFindings), with
// what the host's agent says of it: checked or not, and why not.
FleetChecklistCell CellOf(const FleetHost& host, const ChecklistItem& item) {
  FleetChecklistCell cell;
  for (size_t index : item.findings) {
    cell.findings.push_back(host.findings[index]);
    cell.summary += (cell.summary.empty() ? "" : "; ") + Describe(host.findings[index]);
  }
  if (!cell.findings.empty()) {
    cell.severity = SeverityName(item.severity);
    cell.checked = true;  // a finding is a judgement, whatever else is known
  }
  if (!host.answering) {
    cell.severity = Worse("unknown", cell.severity);
    cell.checked.reset();
    return cell;
  }
  static const std::vector<FleetChecklistState> kNone;
  bool said = false;
  std::string reasons;
  for (const FleetChecklistState& state : host.checklist ? *host.checklist : kNone) {
    if (state.title != item.title) continue;  // a site's config may repeat a title: all count
    said = true;
    if (state.state == kUncheckedState) {
      if (!state.reason.empty()) reasons += (reasons.empty() ? "" : "; ") + state.reason;
      continue;
    }
    cell.checked = true;
    cell.severity = Worse(cell.severity, SeverityName(SeverityFromName(state.state).value_or(Severity::kUnknown)));
  }
  if (cell.checked) {
    if (cell.findings.empty() && cell.severity != "ok") cell.summary = "its agent's checklist says " + cell.severity;
  } else if (said) {
    cell.checked = false;
    cell.summary = NotCheckedSummary(reasons);
  } else {
    cell.severity = "unknown";
    cell.summary = host.checklist ? "not known: its agent's checklist has no such item"
                                  : "not known: its agent exports no checklist (older than gpudoctor_checklist_item)";
  }
  return cell;
}

auto Badness(size_t critical, size_t warning, const ErrorCounts& e) {
  return std::make_tuple(critical, e.fell_off_bus + e.uncorrectable_ecc + e.row_remap, e.xid, warning,
                         e.pcie_replays);
}

}  // namespace

FleetChecklist BuildFleetChecklist(const FleetState& state, const std::vector<ChecklistEntry>& checklist) {
  FleetChecklist out;
  for (const ChecklistEntry& entry : checklist) out.titles.push_back(entry.title);
  for (const FleetHost& host : state.hosts) {
    FleetChecklistRow row{.hostname = host.hostname, .instance = host.instance, .answering = host.answering,
                          .trouble = host.trouble};
    const std::vector<Finding> findings = AsFindings(host.findings);
    const Checklist mapped = BuildChecklist(findings, checklist);
    for (const ChecklistItem& item : mapped.items) row.items.push_back(CellOf(host, item));
    // A finding that is part of another is told by that one, as on the host.
    for (size_t index : mapped.other_findings) {
      if (host.findings[index].part_of.empty()) row.other.push_back(host.findings[index]);
    }
    // Triage step 1: a host that cannot be judged comes first.
    row.worst = host.answering ? SeverityName(WorstSeverity(findings)) : "critical";
    if (!host.answering) ++out.hosts_not_answering;
    else if (row.worst == "critical") ++out.hosts_critical;
    else if (row.worst == "warning") ++out.hosts_warning;
    out.rows.push_back(std::move(row));
  }
  auto criticals = [](const FleetChecklistRow& row) {
    return std::count_if(row.items.begin(), row.items.end(), [](const auto& c) { return c.severity == "critical"; });
  };
  std::stable_sort(out.rows.begin(), out.rows.end(), [&](const FleetChecklistRow& a, const FleetChecklistRow& b) {
    return std::make_tuple(!a.answering, Rank(a.worst), criticals(a)) >
           std::make_tuple(!b.answering, Rank(b.worst), criticals(b));
  });
  return out;
}

int FleetExitStatus(const FleetChecklist& checklist) {
  if (checklist.hosts_not_answering > 0 || checklist.hosts_critical > 0) return 2;
  return checklist.hosts_warning > 0 ? 1 : 0;
}

Offenders RankOffenders(const FleetState& state, const FleetHistory* history, const std::vector<Verdict>& verdicts,
                        size_t top) {
  Offenders out{.with_history = history != nullptr};
  std::map<SlotKey, GpuOffender> gpus;
  std::map<std::string, HostOffender> hosts;
  for (const FleetHost& host : state.hosts) {
    HostOffender& h = hosts[host.hostname];
    h.hostname = host.hostname;
    h.answering = host.answering;
    for (const FleetGpu& gpu : host.gpus) {
      GpuOffender& g = gpus[SlotKey{.hostname = host.hostname, .pci_bus_id = gpu.pci_bus_id}];
      g.hostname = host.hostname;
      g.pci_bus_id = gpu.pci_bus_id;
      g.gpu = gpu.index;
      g.serial = gpu.serial;
    }
    for (const FleetFinding& finding : host.findings) {
      if (!finding.part_of.empty()) continue;
      const bool critical = finding.severity == "critical";
      (critical ? h.open_critical : h.open_warning) += 1;
      if (finding.gpu.empty()) continue;
      for (auto& [slot, g] : gpus) {
        if (g.hostname != host.hostname || g.gpu != finding.gpu) continue;
        (critical ? g.open_critical : g.open_warning) += 1;
        g.open_findings.push_back(finding.id);
      }
    }
  }
  if (history) {
    for (const ErrorEpisode& episode : history->episodes) {
      GpuOffender& g = gpus[episode.slot];
      g.hostname = episode.slot.hostname;
      g.pci_bus_id = episode.slot.pci_bus_id;
      Count(g.errors, episode);
      HostOffender& h = hosts[episode.slot.hostname];
      h.hostname = episode.slot.hostname;
      Count(h.errors, episode);
    }
    for (const Placement& p : history->placements) {  // the serial of a slot no longer reporting
      GpuOffender& g = gpus[p.slot];
      if (g.serial.empty() && g.gpu.empty()) g.serial = p.serial;
    }
  }
  for (auto& [slot, g] : gpus) {
    if (g.errors.Total() > 0) hosts[g.hostname].gpus_with_errors += 1;
    for (const Verdict& verdict : verdicts) {
      if ((verdict.blame == Blame::kSlot && verdict.slot == slot) ||
          (!g.serial.empty() && verdict.serial == g.serial)) {
        g.verdict = verdict;
        break;
      }
    }
    if (g.open_critical + g.open_warning > 0 || g.errors.Total() > 0) out.gpus.push_back(std::move(g));
  }
  for (auto& [name, h] : hosts) {
    if (!h.answering || h.open_critical + h.open_warning > 0 || h.errors.Total() > 0) out.hosts.push_back(h);
  }
  std::stable_sort(out.gpus.begin(), out.gpus.end(), [](const GpuOffender& a, const GpuOffender& b) {
    return Badness(a.open_critical, a.open_warning, a.errors) > Badness(b.open_critical, b.open_warning, b.errors);
  });
  std::stable_sort(out.hosts.begin(), out.hosts.end(), [](const HostOffender& a, const HostOffender& b) {
    return std::make_tuple(!a.answering, Badness(a.open_critical, a.open_warning, a.errors)) >
           std::make_tuple(!b.answering, Badness(b.open_critical, b.open_warning, b.errors));
  });
  if (out.gpus.size() > top) out.gpus.resize(top);
  if (out.hosts.size() > top) out.hosts.resize(top);
  return out;
}

CardHistory HistoryOfCard(const std::string& serial, const FleetHistory& history,
                          const std::vector<Verdict>& verdicts) {
  CardHistory card{.serial = serial};
  for (const Placement& p : history.placements) {
    if (p.serial != serial) continue;
    CardStay stay{.placement = p};
    for (const ErrorEpisode& e : history.episodes) {
      if (e.slot == p.slot && e.time >= p.from - history.step && e.time <= p.to + history.step) Count(stay.errors, e);
    }
    card.stays.push_back(stay);
  }
  std::sort(card.stays.begin(), card.stays.end(),
            [](const CardStay& a, const CardStay& b) { return a.placement.from < b.placement.from; });
  for (const Verdict& verdict : verdicts) {
    bool names = verdict.serial == serial || (verdict.proposal && verdict.proposal->partner == serial);
    for (const CardStay& stay : card.stays) names = names || (verdict.blame == Blame::kSlot && verdict.slot == stay.placement.slot);
    if (names) card.verdicts.push_back(verdict);
  }
  return card;
}

}  // namespace gpudoctor
