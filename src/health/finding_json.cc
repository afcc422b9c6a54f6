#include "health/finding_json.h"

namespace gpudoctor {

nlohmann::json FindingToJson(const Finding& finding) {
  nlohmann::json j;
  j["id"] = finding.id;
  j["severity"] = SeverityName(finding.severity);
  if (finding.gpu) {
    // index, uuid and pci_bus_id are always present (null when unknown) so
    // scripts can rely on the keys; serial only when known.
    const GpuRef& ref = *finding.gpu;
    nlohmann::json gpu = nlohmann::json::object();
    gpu["index"] = ref.index ? nlohmann::json(*ref.index) : nlohmann::json(nullptr);
    gpu["uuid"] = ref.uuid.empty() ? nlohmann::json(nullptr) : nlohmann::json(ref.uuid);
    gpu["pci_bus_id"] = ref.pci_bus_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(ref.pci_bus_id);
    if (!ref.serial.empty()) gpu["serial"] = ref.serial;
    j["gpu"] = std::move(gpu);
  } else {
    j["gpu"] = nullptr;
  }
  j["summary"] = finding.summary;
  j["evidence"] = finding.evidence;
  j["cause"] = finding.cause;
  j["actions"] = finding.actions;
  j["key"] = FindingKey(finding);
  j["part_of"] = finding.part_of.empty() ? nlohmann::json(nullptr) : nlohmann::json(finding.part_of);
  return j;
}

nlohmann::json FindingsToJson(const std::vector<Finding>& findings) {
  nlohmann::json array = nlohmann::json::array();
  for (const Finding& finding : findings) array.push_back(FindingToJson(finding));
  return array;
}

nlohmann::json ChecklistToJson(const Checklist& checklist, const std::vector<Finding>& findings) {
  nlohmann::json items = nlohmann::json::array();
  for (const ChecklistItem& item : checklist.items) {
    nlohmann::json ids = nlohmann::json::array();
    for (size_t index : item.findings) ids.push_back(findings.at(index).id);
    items.push_back({{"title", item.title},
                     {"checked", item.checked},
                     {"severity", SeverityName(item.severity)},
                     {"summary", item.summary},
                     {"finding_ids", std::move(ids)}});
  }
  return items;
}

}  // namespace gpudoctor
