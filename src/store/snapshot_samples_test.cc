#include "store/snapshot_samples.h"

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

TEST(SamplesFromSnapshot, CopiesReadingsAndKeepsMissingOnesMissing) {
  Snapshot snapshot;
  snapshot.taken_at = WallTime{std::chrono::seconds{1'700'000'000}};
  GpuSnapshot& gpu = snapshot.gpus.emplace_back();
  gpu.index = 1;
  gpu.uuid = Field<std::string>::Value("GPU-1");
  gpu.temperature_c = Field<uint32_t>::Value(71);
  gpu.power_draw_w = Field<double>::Value(301.25);
  gpu.utilization_gpu_percent = Field<uint32_t>::Value(0);
  gpu.memory_used_bytes = Field<uint64_t>::Failed("timeout");
  gpu.fan_speeds_percent = Field<std::vector<uint32_t>>::Value({30, 80, 55});
  gpu.ecc_volatile_corrected = Field<uint64_t>::Value(12);
  NvLinkInfo link0, link1;
  link0.replay_errors = Field<uint64_t>::Value(3);
  link0.crc_flit_errors = Field<uint64_t>::Value(4);
  link1.recovery_errors = Field<uint64_t>::Value(1);
  gpu.nvlinks = Field<std::vector<NvLinkInfo>>::Value({link0, link1});
  snapshot.xid_events = {{.gpu_index = 1, .xid = 79}, {.gpu_index = 0, .xid = 13}, {.gpu_index = 1, .xid = 48}};

  SnapshotSamples rows = SamplesFromSnapshot(snapshot);
  ASSERT_EQ(rows.gpus.size(), 1u);
  const GpuSample& sample = rows.gpus[0];
  EXPECT_EQ(sample.time, snapshot.taken_at);
  EXPECT_EQ(sample.uuid, "GPU-1");
  EXPECT_EQ(sample[Metric::kTemperatureC], 71);
  EXPECT_EQ(sample[Metric::kPowerW], 301.25);
  EXPECT_EQ(sample[Metric::kUtilizationGpuPercent], 0);  // a real zero
  EXPECT_FALSE(sample[Metric::kMemoryUsedBytes]);        // failed read
  EXPECT_FALSE(sample[Metric::kMemoryClockMhz]);         // not supported
  EXPECT_EQ(sample[Metric::kFanPercent], 80);
  EXPECT_EQ(sample[Metric::kEccCorrected], 12);
  EXPECT_EQ(sample[Metric::kNvlinkErrors], 8);
  EXPECT_EQ(sample[Metric::kXidEvents], 2);
  EXPECT_TRUE(rows.processes.empty());  // process list not reported
}

TEST(SamplesFromSnapshot, UnreadableGpuHasNoReadingsAtAll) {
  Snapshot snapshot;
  GpuSnapshot& gpu = snapshot.gpus.emplace_back();
  gpu.access_error = AccessError::kGpuLost;
  gpu.fan_speeds_percent = Field<std::vector<uint32_t>>::Value({});
  gpu.nvlinks = Field<std::vector<NvLinkInfo>>::Value({NvLinkInfo{}});
  SnapshotSamples rows = SamplesFromSnapshot(snapshot);
  ASSERT_EQ(rows.gpus.size(), 1u);
  for (const auto& value : rows.gpus[0].values) EXPECT_FALSE(value.has_value());
}

}  // namespace
}  // namespace gpudoctor
