#include "agent/finding_json.h"

#include <nlohmann/json.hpp>

#include "common/text.h"

namespace gpudoctor {

using nlohmann::json;

namespace {

json GpuRefToJson(const GpuRef& gpu) {
  json out = json::object();
  out["index"] = gpu.index ? json(*gpu.index) : json(nullptr);
  out["uuid"] = gpu.uuid;
  out["pci_bus_id"] = gpu.pci_bus_id;
  out["serial"] = gpu.serial;
  return out;
}

void PutTime(json& out, const char* key, WallTime time) {
  out[key] = FormatIsoUtc(time);
  out[std::string(key) + "_ms"] = ToUnixMillis(time);
}

}  // namespace

json FindingToJson(const Finding& finding) {
  json out = json::object();
  out["id"] = finding.id;
  out["severity"] = SeverityName(finding.severity);
  out["gpu"] = finding.gpu ? GpuRefToJson(*finding.gpu) : json(nullptr);
  out["summary"] = finding.summary;
  out["evidence"] = finding.evidence;
  out["cause"] = finding.cause;
  out["actions"] = finding.actions;
  return out;
}

json OpenFindingToJson(const OpenFinding& open) {
  json out = FindingToJson(open.finding);
  PutTime(out, "opened_at", open.opened_at);
  return out;
}

json TransitionToJson(const FindingTransition& transition, std::string_view hostname,
                      uint64_t suppressed) {
  json out = json::object();
  out["event"] = TransitionKindName(transition.kind);
  out["hostname"] = hostname;
  PutTime(out, "time", transition.time);
  out["key"] = transition.key;
  out["suppressed"] = suppressed;
  out["finding"] = OpenFindingToJson({transition.finding, transition.opened_at});
  return out;
}

}  // namespace gpudoctor
