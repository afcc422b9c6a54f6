#include "store/event_records.h"
#include "common/json_text.h"

#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

namespace gpudoctor {
namespace {

using nlohmann::json;

std::string Dump(const json& record) { return ToJsonText(record); }

std::optional<json> Parse(std::string_view body) {
  json record = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!record.is_object()) return std::nullopt;
  return record;
}

// The value at `key` when it has type T; nullopt when absent or of another type.
template <typename T>
std::optional<T> Get(const json& record, const char* key) {
  auto it = record.find(key);
  if (it == record.end() || it->is_null()) return std::nullopt;
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return std::nullopt;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return std::nullopt;
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!it->is_number()) return std::nullopt;
  } else {
    // Integers out of T's range are refused rather than wrapped.
    if (it->is_number_unsigned()) {
      const uint64_t value = it->get<uint64_t>();
      if (value > static_cast<uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
      return static_cast<T>(value);
    }
    if (!it->is_number_integer()) return std::nullopt;
    const int64_t value = it->get<int64_t>();
    if (!std::in_range<T>(value)) return std::nullopt;
    return static_cast<T>(value);
  }
  return it->get<T>();
}

// Times beyond what a nanosecond clock holds are treated as absent.
std::optional<WallTime> GetTime(const json& record, const char* key) {
  auto ms = Get<int64_t>(record, key);
  constexpr int64_t kLimitMs = INT64_MAX / 1'000'000;
  if (!ms || *ms > kLimitMs || *ms < -kLimitMs) return std::nullopt;
  return FromUnixMillis(*ms);
}

}  // namespace

std::string NvmlXidToRecord(const XidEvent& xid) {
  return Dump(json{{"gpu", xid.gpu_index}, {"xid", xid.xid}, {"time_ms", ToUnixMillis(xid.time)}});
}

std::optional<XidEvent> NvmlXidFromRecord(std::string_view body) {
  auto record = Parse(body);
  if (!record) return std::nullopt;
  auto gpu = Get<uint32_t>(*record, "gpu");
  auto xid = Get<uint64_t>(*record, "xid");
  auto time = GetTime(*record, "time_ms");
  if (!gpu || !xid || !time) return std::nullopt;
  return XidEvent{.gpu_index = *gpu, .xid = *xid, .time = *time};
}

std::string LogEventToRecord(const LogEvent& event) {
  json fields = json::array();
  for (const EventField& field : event.fields) fields.push_back(json::array({field.name, field.value}));
  json record{{"kind", event.kind},
              {"severity", EventSeverityName(event.severity)},
              {"time_is_utc", event.time_is_utc},
              {"time_estimated", event.time_estimated},
              {"host", event.host},
              {"pci", event.pci_bus_id},
              {"process", event.process},
              {"gpu_uuid", event.gpu_uuid},
              {"gpu_serial", event.gpu_serial},
              {"message", event.message},
              {"detail", event.detail},
              {"fields", fields},
              {"raw", event.raw},
              {"source", event.source},
              {"line", event.line_number}};
  if (event.time) record["time_ms"] = ToUnixMillis(*event.time);
  if (event.uptime_seconds) record["uptime"] = *event.uptime_seconds;
  if (event.xid) record["xid"] = *event.xid;
  if (event.pid) record["pid"] = *event.pid;
  return Dump(record);
}

std::optional<LogEvent> LogEventFromRecord(std::string_view body) {
  auto record = Parse(body);
  if (!record) return std::nullopt;
  LogEvent event;
  auto kind = Get<std::string>(*record, "kind");
  auto severity = EventSeverityFromName(Get<std::string>(*record, "severity").value_or(""));
  if (!kind || !severity) return std::nullopt;
  event.kind = std::move(*kind);
  event.severity = *severity;
  event.time = GetTime(*record, "time_ms");
  event.time_is_utc = Get<bool>(*record, "time_is_utc").value_or(false);
  event.time_estimated = Get<bool>(*record, "time_estimated").value_or(false);
  event.uptime_seconds = Get<double>(*record, "uptime");
  event.host = Get<std::string>(*record, "host").value_or("");
  event.pci_bus_id = Get<std::string>(*record, "pci").value_or("");
  event.xid = Get<uint32_t>(*record, "xid");
  event.pid = Get<uint32_t>(*record, "pid");
  event.process = Get<std::string>(*record, "process").value_or("");
  event.gpu_uuid = Get<std::string>(*record, "gpu_uuid").value_or("");
  event.gpu_serial = Get<std::string>(*record, "gpu_serial").value_or("");
  event.message = Get<std::string>(*record, "message").value_or("");
  event.detail = Get<std::string>(*record, "detail").value_or("");
  if (auto fields = record->find("fields"); fields != record->end() && fields->is_array()) {
    for (const json& pair : *fields) {
      if (pair.is_array() && pair.size() == 2 && pair[0].is_string() && pair[1].is_string())
        event.fields.push_back({pair[0].get<std::string>(), pair[1].get<std::string>()});
    }
  }
  event.raw = Get<std::string>(*record, "raw").value_or("");
  event.source = Get<std::string>(*record, "source").value_or("");
  event.line_number = Get<uint64_t>(*record, "line").value_or(0);
  return event;
}

}  // namespace gpudoctor
