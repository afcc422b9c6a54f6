#include "model/snapshot_json.h"

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "model/gpu_fields.h"

namespace gpudoctor {
namespace {

using nlohmann::json;

// Writes fields into an object and records the missing ones beside them.
class FieldWriter {
 public:
  explicit FieldWriter(json& object) : object_(object) {}
  ~FieldWriter() {
    if (!not_supported_.empty()) object_["not_supported"] = std::move(not_supported_);
    if (!errors_.empty()) object_["errors"] = std::move(errors_);
  }
  FieldWriter(const FieldWriter&) = delete;
  FieldWriter& operator=(const FieldWriter&) = delete;

  template <typename T, typename Encode>
  void Put(const char* key, const Field<T>& field, Encode encode) {
    switch (field.state()) {
      case FieldState::kValue: object_[key] = encode(field.value()); break;
      case FieldState::kNotSupported:
        object_[key] = nullptr;
        not_supported_.push_back(key);
        break;
      case FieldState::kError:
        object_[key] = nullptr;
        errors_[key] = field.error();
        break;
    }
  }
  template <typename T>
  void Put(const char* key, const Field<T>& field) {
    Put(key, field, [](const T& v) { return json(v); });
  }

 private:
  json& object_;
  json not_supported_ = json::array();
  json errors_ = json::object();
};

// Reads fields back, restoring not-supported and error states.
class FieldReader {
 public:
  explicit FieldReader(const json& object) : object_(object) {}

  template <typename T, typename Decode>
  void Get(const char* key, Field<T>& field, Decode decode) {
    if (object_.contains("errors") && object_["errors"].contains(key)) {
      field = Field<T>::Failed(object_["errors"][key].template get<std::string>());
      return;
    }
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) {
      field = Field<T>::NotSupported();
      return;
    }
    field = Field<T>::Value(decode(*it));
  }
  template <typename T>
  void Get(const char* key, Field<T>& field) {
    Get(key, field, [](const json& j) { return j.template get<T>(); });
  }

 private:
  const json& object_;
};

json ProcessToJson(const ProcessInfo& p) {
  json j;
  j["pid"] = p.pid;
  j["name"] = p.name;
  FieldWriter w(j);
  w.Put("used_memory_bytes", p.used_memory_bytes);
  return j;
}

json NvLinkToJson(const NvLinkInfo& link) {
  json j;
  j["link"] = link.link;
  {
    FieldWriter w(j);
    auto put = [&](const char* key, const auto& field) { w.Put(key, field); };
    VisitNvLinkFields(put, link);
  }
  return j;
}

}  // namespace

std::vector<std::string> GpuNotes(const GpuSnapshot& gpu) {
  std::vector<std::string> notes;
  if (gpu.gpm_supported.has_value() && !gpu.gpm_supported.value()) {
    notes.emplace_back("no GPU Performance Monitoring (GPM: Hopper and newer, not in MIG mode): SM, tensor and DRAM "
                       "activity and PCIe and NVLink throughput are not read");
  } else if (gpu.gpm_supported.has_value() && gpu.gpm_sm_active.not_supported() &&
             gpu.gpm_graphics_active.not_supported()) {
    notes.emplace_back("GPM gives rates between two samples at least 100 ms apart and this was the GPU's first: "
                       "the agent reports them from its second sample on");
  }
  return notes;
}

json GpuToJson(const GpuSnapshot& gpu) {
  json j;
  j["index"] = gpu.index;
  if (gpu.access_error != AccessError::kNone) {
    j["access_error"] = AccessErrorName(gpu.access_error);
    j["access_message"] = gpu.access_message;
  }
  if (gpu.last_known) {
    const KnownGpuIdentity& known = *gpu.last_known;
    auto text = [](const std::string& value) { return value.empty() ? json(nullptr) : json(value); };
    j["last_known"] = {{"uuid", text(known.uuid)},
                       {"serial", text(known.serial)},
                       {"pci_bus_id", text(known.pci_bus_id)},
                       {"name", text(known.name)},
                       {"source", known.source},
                       {"seen_at", known.seen_at ? json(FormatIsoUtc(*known.seen_at)) : json(nullptr)},
                       {"seen_at_ms", known.seen_at ? json(ToUnixMillis(*known.seen_at)) : json(nullptr)}};
  }
  {
    FieldWriter w(j);
    auto put = [&](const char* key, const auto& field) { w.Put(key, field); };
    VisitScalarGpuFields(put, gpu);
    if (gpu.clock_event_reasons.has_value())
      j["clock_event_reason_names"] = DecodeClockEventReasons(gpu.clock_event_reasons.value());
    w.Put("processes", gpu.processes, [](const std::vector<ProcessInfo>& list) {
      json array = json::array();
      for (const auto& p : list) array.push_back(ProcessToJson(p));
      return array;
    });
    w.Put("nvlinks", gpu.nvlinks, [](const std::vector<NvLinkInfo>& list) {
      json array = json::array();
      for (const auto& link : list) array.push_back(NvLinkToJson(link));
      return array;
    });
  }
  std::vector<std::string> notes = GpuNotes(gpu);
  if (!notes.empty()) j["notes"] = std::move(notes);
  return j;
}

Result<GpuSnapshot> GpuFromJson(const json& j) {
  try {
    GpuSnapshot gpu;
    gpu.index = j.at("index").get<uint32_t>();
    if (j.contains("access_error")) {
      gpu.access_error = AccessErrorFromName(j["access_error"].get<std::string>()).value_or(AccessError::kOther);
      gpu.access_message = j.value("access_message", "");
    }
    if (auto known = j.find("last_known"); known != j.end() && known->is_object()) {
      auto text = [&](const char* key) {
        auto value = known->find(key);
        return value != known->end() && value->is_string() ? value->get<std::string>() : std::string();
      };
      gpu.last_known = KnownGpuIdentity{.uuid = text("uuid"),
                                        .serial = text("serial"),
                                        .pci_bus_id = text("pci_bus_id"),
                                        .name = text("name"),
                                        .source = text("source")};
      if (auto ms = known->find("seen_at_ms"); ms != known->end() && ms->is_number_integer())
        gpu.last_known->seen_at = FromUnixMillis(ms->get<int64_t>());
    }
    FieldReader r(j);
    auto get = [&](const char* key, auto& field) { r.Get(key, field); };
    VisitScalarGpuFields(get, gpu);
    r.Get("processes", gpu.processes, [](const json& array) {
      std::vector<ProcessInfo> list;
      for (const auto& item : array) {
        ProcessInfo p;
        p.pid = item.at("pid").get<uint32_t>();
        p.name = item.value("name", "");
        FieldReader(item).Get("used_memory_bytes", p.used_memory_bytes);
        list.push_back(std::move(p));
      }
      return list;
    });
    r.Get("nvlinks", gpu.nvlinks, [](const json& array) {
      std::vector<NvLinkInfo> list;
      for (const auto& item : array) {
        NvLinkInfo link;
        link.link = item.at("link").get<uint32_t>();
        FieldReader lr(item);
        auto lget = [&](const char* key, auto& field) { lr.Get(key, field); };
        VisitNvLinkFields(lget, link);
        list.push_back(std::move(link));
      }
      return list;
    });
    return gpu;
  } catch (const json::exception& e) {
    return Error{std::string("malformed GPU record: ") + e.what()};
  }
}

json SnapshotToJson(const Snapshot& s) {
  json j;
  j["source"] = s.source;
  j["hostname"] = s.hostname;
  j["taken_at"] = FormatIsoUtc(s.taken_at);
  j["taken_at_ms"] = ToUnixMillis(s.taken_at);
  j["collection_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(s.collection_time).count();
  j["driver_error"] = AccessErrorName(s.driver_error);
  j["driver_message"] = s.driver_message;
  {
    FieldWriter w(j);
    w.Put("driver_version", s.driver_version);
    w.Put("nvml_version", s.nvml_version);
    w.Put("cuda_driver_version", s.cuda_driver_version,
          [](int32_t v) { return json(FormatCudaVersion(v)); });
    w.Put("device_count", s.device_count);
  }
  json gpus = json::array();
  for (const auto& gpu : s.gpus) gpus.push_back(GpuToJson(gpu));
  j["gpus"] = std::move(gpus);
  json xids = json::array();
  for (const auto& x : s.xid_events)
    xids.push_back({{"gpu_index", x.gpu_index}, {"xid", x.xid}, {"time", FormatIsoUtc(x.time)},
                    {"time_ms", ToUnixMillis(x.time)}});
  j["xid_events"] = std::move(xids);
  json hangs = json::array();
  for (const auto& h : s.hangs) {
    json hang = {{"call", h.call},
                 {"deadline_ms", std::chrono::duration_cast<std::chrono::milliseconds>(h.deadline).count()},
                 {"still_stuck_from_earlier", h.still_stuck_from_earlier},
                 {"pci_bus_id", h.pci_bus_id}};
    hang["gpu_index"] = h.gpu_index ? json(*h.gpu_index) : json(nullptr);
    hangs.push_back(std::move(hang));
  }
  j["hangs"] = std::move(hangs);
  j["incomplete_reasons"] = s.incomplete_reasons;
  if (!s.reported_conditions.empty()) {
    json conditions = json::array();
    for (const ReportedCondition& c : s.reported_conditions) {
      conditions.push_back({{"tool", c.tool}, {"rule_id", c.rule_id}, {"failure", c.failure}, {"system", c.system},
                            {"text", c.text}, {"gpu_index", c.gpu_index ? json(*c.gpu_index) : json(nullptr)}});
    }
    j["reported_conditions"] = std::move(conditions);
  }
  return j;
}

Result<Snapshot> SnapshotFromJson(const json& j) {
  try {
    Snapshot s;
    s.source = j.value("source", "");
    s.hostname = j.value("hostname", "");
    s.taken_at = FromUnixMillis(j.value("taken_at_ms", int64_t{0}));
    s.collection_time = std::chrono::milliseconds(j.value("collection_ms", int64_t{0}));
    s.driver_error = AccessErrorFromName(j.value("driver_error", "none")).value_or(AccessError::kOther);
    s.driver_message = j.value("driver_message", "");
    s.incomplete_reasons = j.value("incomplete_reasons", std::vector<std::string>{});
    for (const json& c : j.value("reported_conditions", json::array())) {
      ReportedCondition condition{.tool = c.value("tool", ""), .rule_id = c.value("rule_id", ""),
                                  .failure = c.value("failure", false), .system = c.value("system", ""),
                                  .text = c.value("text", "")};
      if (c.contains("gpu_index") && c["gpu_index"].is_number()) condition.gpu_index = c["gpu_index"].get<uint32_t>();
      s.reported_conditions.push_back(std::move(condition));
    }
    FieldReader r(j);
    r.Get("driver_version", s.driver_version);
    r.Get("nvml_version", s.nvml_version);
    r.Get("cuda_driver_version", s.cuda_driver_version, [](const json& v) {
      // Accept both the "12.4" display form and the raw 12040 integer.
      if (v.is_number()) return v.get<int32_t>();
      const std::string text = v.get<std::string>();  // Split returns views into it
      auto parts = Split(text, '.');
      if (parts.empty()) return int32_t{0};
      int32_t major = ParseInt<int32_t>(parts[0]).value_or(0);
      int32_t minor = parts.size() > 1 ? ParseInt<int32_t>(parts[1]).value_or(0) : 0;
      return major * 1000 + minor * 10;
    });
    r.Get("device_count", s.device_count);
    for (const auto& g : j.value("gpus", json::array())) {
      auto gpu = GpuFromJson(g);
      if (!gpu) return gpu.error();
      s.gpus.push_back(std::move(*gpu));
    }
    for (const auto& x : j.value("xid_events", json::array()))
      s.xid_events.push_back({x.at("gpu_index").get<uint32_t>(), x.at("xid").get<uint64_t>(),
                              FromUnixMillis(x.value("time_ms", int64_t{0}))});
    for (const auto& h : j.value("hangs", json::array())) {
      ProbeHang hang;
      if (h.contains("gpu_index") && !h["gpu_index"].is_null()) hang.gpu_index = h["gpu_index"].get<uint32_t>();
      hang.pci_bus_id = h.value("pci_bus_id", "");
      hang.call = h.value("call", "");
      hang.deadline = std::chrono::milliseconds(h.value("deadline_ms", int64_t{0}));
      hang.still_stuck_from_earlier = h.value("still_stuck_from_earlier", false);
      s.hangs.push_back(std::move(hang));
    }
    return s;
  } catch (const json::exception& e) {
    return Error{std::string("malformed snapshot: ") + e.what()};
  }
}

}  // namespace gpudoctor
