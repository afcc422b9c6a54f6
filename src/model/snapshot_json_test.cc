#include "model/snapshot_json.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace gpudoctor {
namespace {

Snapshot SampleSnapshot() {
  Snapshot s;
  s.source = "test";
  s.hostname = "node-1";
  s.taken_at = FromUnixMillis(1'700'000'000'000);
  s.driver_version = Field<std::string>::Value("550.54.15");
  s.cuda_driver_version = Field<int32_t>::Value(12040);
  s.nvml_version = Field<std::string>::Failed("Function Not Found");
  GpuSnapshot gpu;
  gpu.index = 3;
  gpu.name = Field<std::string>::Value("NVIDIA H100 80GB HBM3");
  gpu.temperature_c = Field<uint32_t>::Value(81);
  gpu.fan_speeds_percent = Field<std::vector<uint32_t>>::NotSupported();
  gpu.power_draw_w = Field<double>::Failed("GPU is lost");
  gpu.clock_event_reasons = Field<uint64_t>::Value(clock_event::kHwThermalSlowdown | clock_event::kSwPowerCap);
  ProcessInfo p;
  p.pid = 42;
  p.name = "python";
  p.used_memory_bytes = Field<uint64_t>::Value(1ull << 30);
  gpu.processes = Field<std::vector<ProcessInfo>>::Value({p});
  NvLinkInfo link;
  link.link = 2;
  link.active = Field<bool>::Value(false);
  link.replay_errors = Field<uint64_t>::Value(7);
  gpu.nvlinks = Field<std::vector<NvLinkInfo>>::Value({link});
  s.gpus.push_back(gpu);
  s.xid_events.push_back({3, 79, FromUnixMillis(1'700'000'000'500)});
  s.hangs.push_back({3, "0000:3b:00.0", "nvmlDeviceGetTemperature", std::chrono::seconds(10), false});
  return s;
}

TEST(SnapshotJson, RoundTripKeepsEveryFieldState) {
  Snapshot original = SampleSnapshot();
  auto json = SnapshotToJson(original);
  auto parsed = SnapshotFromJson(nlohmann::json::parse(json.dump()));
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(*parsed, original);
}

TEST(SnapshotJson, MissingFieldsAreNullAndExplained) {
  auto json = SnapshotToJson(SampleSnapshot());
  const auto& gpu = json["gpus"][0];
  EXPECT_TRUE(gpu["fan_speeds_percent"].is_null());
  EXPECT_NE(std::find(gpu["not_supported"].begin(), gpu["not_supported"].end(), "fan_speeds_percent"),
            gpu["not_supported"].end());
  EXPECT_TRUE(gpu["power_draw_w"].is_null());
  EXPECT_EQ(gpu["errors"]["power_draw_w"], "GPU is lost");
  EXPECT_EQ(json["cuda_driver_version"], "12.4");
  EXPECT_EQ(gpu["clock_event_reason_names"], nlohmann::json({"sw_power_cap", "hw_thermal_slowdown"}));
}

TEST(SnapshotJson, DefaultPowerLimitKeepsItsState) {
  Snapshot snapshot = SampleSnapshot();
  GpuSnapshot& gpu = snapshot.gpus[0];
  for (const Field<double>& limit :
       {Field<double>::Value(700), Field<double>::NotSupported(), Field<double>::Failed("Unknown Error")}) {
    gpu.power_default_limit_w = limit;
    auto json = SnapshotToJson(snapshot);
    const auto& written = json["gpus"][0];
    ASSERT_TRUE(written.contains("power_default_limit_w"));
    if (limit.has_value()) {
      EXPECT_EQ(written["power_default_limit_w"], 700.0);
    } else {
      EXPECT_TRUE(written["power_default_limit_w"].is_null());
    }
    if (limit.failed()) {
      EXPECT_EQ(written["errors"]["power_default_limit_w"], "Unknown Error");
    }
    auto parsed = SnapshotFromJson(nlohmann::json::parse(json.dump()));
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    EXPECT_EQ(parsed->gpus[0].power_default_limit_w, limit);
  }
}

TEST(SnapshotJson, SnapshotWithoutDefaultPowerLimitReadsItAsNotSupported) {
  auto parsed = SnapshotFromJson(nlohmann::json::parse(R"({"gpus":[{"index":0,"power_limit_w":300}]})"));
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->gpus[0].power_limit_w, Field<double>::Value(300));
  EXPECT_TRUE(parsed->gpus[0].power_default_limit_w.not_supported());
}

// A GPU without GPM says so once, in notes, and its gpm_ fields are null;
// one that has it says nothing, and the notes do not disturb reading it back.
TEST(SnapshotJson, AGpuWithoutGpmSaysSoOnceInItsNotes) {
  GpuSnapshot without;
  without.gpm_supported.SetValue(false);
  const nlohmann::json j = GpuToJson(without);
  ASSERT_TRUE(j.contains("notes"));
  ASSERT_EQ(j["notes"].size(), 1u);
  EXPECT_NE(j["notes"][0].get<std::string>().find("no GPU Performance Monitoring"), std::string::npos);
  EXPECT_TRUE(j["gpm_sm_active"].is_null());
  Result<GpuSnapshot> back = GpuFromJson(j);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, without);

  GpuSnapshot with;
  with.gpm_supported.SetValue(true);
  with.gpm_sm_active.SetValue(0.5);
  EXPECT_FALSE(GpuToJson(with).contains("notes"));
  EXPECT_DOUBLE_EQ(GpuToJson(with)["gpm_sm_active"].get<double>(), 0.5);
}

TEST(SnapshotJson, MalformedInputIsAnErrorNotACrash) {
  auto parsed = SnapshotFromJson(nlohmann::json::parse(R"({"gpus":[{"name":"x"}]})"));
  EXPECT_FALSE(parsed.ok());
  auto parsed2 = SnapshotFromJson(nlohmann::json::parse(R"({"gpus":[{"index":"zero"}]})"));
  EXPECT_FALSE(parsed2.ok());
}

}  // namespace
}  // namespace gpudoctor
