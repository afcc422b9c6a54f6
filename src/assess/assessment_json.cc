#include "assess/assessment_json.h"

#include "model/diagnostic_json.h"

namespace gpudoctor {
namespace {

nlohmann::json TextOrNull(const std::string& text) { return text.empty() ? nlohmann::json(nullptr) : nlohmann::json(text); }

}  // namespace

nlohmann::json GpuVerdictsToJson(const Assessment& assessment, const std::vector<DiagnosticRecord>* diagnostics) {
  nlohmann::json json = nlohmann::json::array();
  for (const GpuVerdict& gpu : assessment.gpus) {
    nlohmann::json ids = nlohmann::json::array();
    for (size_t index : gpu.findings) {
      const Finding& finding = assessment.findings[index];
      if (finding.severity != Severity::kOk) ids.push_back(finding.id);
    }
    nlohmann::json entry = {{"index", gpu.index},
                            {"uuid", TextOrNull(gpu.identity.uuid)},
                            {"serial", TextOrNull(gpu.identity.serial)},
                            {"pci_bus_id", TextOrNull(gpu.identity.pci_bus_id)},
                            {"name", TextOrNull(gpu.name)},
                            {"identity", IdentityKnowledgeName(gpu.Knowledge())},
                            {"identity_source", TextOrNull(gpu.identity_source)},
                            {"health", SeverityName(gpu.health)},
                            {"findings", std::move(ids)}};
    if (diagnostics) entry["diagnostics"] = GpuDiagnosticsToJson(*diagnostics, gpu.index, gpu.identity.uuid);
    json.push_back(std::move(entry));
  }
  return json;
}

nlohmann::json SourcesToJson(const std::vector<SourceNote>& sources) {
  nlohmann::json json = nlohmann::json::array();
  for (const SourceNote& s : sources) json.push_back({{"source", s.source}, {"status", s.status}, {"detail", s.detail}});
  return json;
}

nlohmann::json NotCheckedToJson(const std::vector<UncheckedRule>& unchecked) {
  nlohmann::json json = nlohmann::json::array();
  for (const UncheckedRule& rule : unchecked) json.push_back({{"rule", rule.rule_id}, {"reason", rule.reason}});
  return json;
}

}  // namespace gpudoctor
