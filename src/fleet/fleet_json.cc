#include "fleet/fleet_json.h"

#include "common/text.h"

namespace gpudoctor {
namespace {

using nlohmann::json;

json SlotJson(const SlotKey& slot) {
  return {{"hostname", slot.hostname}, {"pci_bus_id", slot.pci_bus_id}, {"slot", slot.slot_name}};
}

json ErrorsJson(const ErrorCounts& e) {
  return {{"xid", e.xid},
          {"uncorrectable_ecc", e.uncorrectable_ecc},
          {"row_remap", e.row_remap},
          {"pcie_replays", e.pcie_replays},
          {"fell_off_bus_steps", e.fell_off_bus}};
}

json FindingJson(const FleetFinding& f) {
  return {{"id", f.id}, {"severity", f.severity}, {"gpu", f.gpu}, {"subject", f.subject}, {"part_of", f.part_of}};
}

}  // namespace

json FleetChecklistJson(const FleetChecklist& checklist) {
  json rows = json::array();
  for (const FleetChecklistRow& row : checklist.rows) {
    json items = json::array();
    for (size_t i = 0; i < row.items.size(); ++i) {
      const FleetChecklistCell& cell = row.items[i];
      json findings = json::array();
      for (const FleetFinding& f : cell.findings) findings.push_back(FindingJson(f));
      items.push_back({{"title", checklist.titles[i]},
                       {"checked", cell.checked ? json(*cell.checked) : json(nullptr)},  // null: not known
                       {"severity", cell.severity},
                       {"summary", cell.summary},
                       {"findings", std::move(findings)}});
    }
    json other = json::array();
    for (const FleetFinding& f : row.other) other.push_back(FindingJson(f));
    rows.push_back({{"hostname", row.hostname},
                    {"instance", row.instance},
                    {"answering", row.answering},
                    {"trouble", row.trouble},
                    {"worst", row.worst},
                    {"items", std::move(items)},
                    {"other_findings", std::move(other)}});
  }
  return {{"titles", checklist.titles},
          {"hosts", std::move(rows)},
          {"summary",
           {{"hosts", checklist.rows.size()},
            {"not_answering", checklist.hosts_not_answering},
            {"critical", checklist.hosts_critical},
            {"warning", checklist.hosts_warning}}},
          {"exit_status", FleetExitStatus(checklist)}};
}

json VerdictJson(const Verdict& v) {
  json out{{"blame", BlameName(v.blame)},
           {"serial", v.serial},
           {"slot", SlotJson(v.slot)},
           {"confidence", v.confidence},
           {"summary", v.summary},
           {"evidence", v.evidence},
           {"swap_pending", v.swap_pending}};
  if (v.proposal) {
    out["proposal"] = {{"move", v.proposal->serial},
                       {"from", SlotJson(v.proposal->from)},
                       {"partner", v.proposal->partner},
                       {"to", SlotJson(v.proposal->to)}};
  }
  return out;
}

json OffendersJson(const Offenders& offenders) {
  json gpus = json::array();
  for (const GpuOffender& g : offenders.gpus) {
    json item{{"hostname", g.hostname},       {"pci_bus_id", g.pci_bus_id},
              {"gpu", g.gpu},                 {"serial", g.serial},
              {"open_critical", g.open_critical}, {"open_warning", g.open_warning},
              {"open_findings", g.open_findings}, {"errors", ErrorsJson(g.errors)}};
    if (g.verdict) item["verdict"] = VerdictJson(*g.verdict);
    gpus.push_back(std::move(item));
  }
  json hosts = json::array();
  for (const HostOffender& h : offenders.hosts) {
    hosts.push_back({{"hostname", h.hostname},
                     {"answering", h.answering},
                     {"open_critical", h.open_critical},
                     {"open_warning", h.open_warning},
                     {"gpus_with_errors", h.gpus_with_errors},
                     {"errors", ErrorsJson(h.errors)}});
  }
  return {{"with_history", offenders.with_history}, {"gpus", std::move(gpus)}, {"hosts", std::move(hosts)}};
}

json CardHistoryJson(const CardHistory& card) {
  json stays = json::array();
  for (const CardStay& stay : card.stays) {
    stays.push_back({{"slot", SlotJson(stay.placement.slot)},
                     {"model", stay.placement.model},
                     {"from", FormatIsoUtc(stay.placement.from)},
                     {"to", FormatIsoUtc(stay.placement.to)},
                     {"errors", ErrorsJson(stay.errors)}});
  }
  json verdicts = json::array();
  for (const Verdict& v : card.verdicts) verdicts.push_back(VerdictJson(v));
  return {{"serial", card.serial}, {"stays", std::move(stays)}, {"verdicts", std::move(verdicts)}};
}

}  // namespace gpudoctor
