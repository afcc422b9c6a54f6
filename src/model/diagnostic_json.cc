#include "model/diagnostic_json.h"

#include <nlohmann/json.hpp>

#include "common/text.h"

namespace gpudoctor {

nlohmann::json DiagnosticToJson(const DiagnosticRecord& record) {
  return {{"test", record.test},
          {"state", record.state},
          {"finished_at", FormatIsoUtc(record.finished_at)},
          {"summary", record.summary},
          {"command", record.command}};
}

nlohmann::json GpuDiagnosticsToJson(std::span<const DiagnosticRecord> latest, uint32_t index, std::string_view uuid) {
  nlohmann::json records = nlohmann::json::array();
  for (const DiagnosticRecord& record : latest)
    if (IsRecordOf(record, index, uuid)) records.push_back(DiagnosticToJson(record));
  return records;
}

}  // namespace gpudoctor
