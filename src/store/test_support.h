// Helpers shared by the store's tests: scratch directories and sample rows.
#pragma once

#include <string>

#include "common/scratch_dir.h"
#include "store/history_store.h"

namespace gpudoctor::testing {

inline WallTime T0() { return WallTime{std::chrono::seconds{1'700'000'000}}; }  // 2023-11-14T22:13:20Z

inline GpuSample Sample(WallTime time, uint32_t index, double temperature, double utilization) {
  GpuSample sample;
  sample.time = time;
  sample.gpu_index = index;
  sample.uuid = "GPU-" + std::to_string(index) + "0000000-0000-0000-0000-000000000000";
  sample[Metric::kTemperatureC] = temperature;
  sample[Metric::kUtilizationGpuPercent] = utilization;
  sample[Metric::kPowerW] = 250.5;
  sample[Metric::kMemoryUsedBytes] = 40e9;
  sample[Metric::kMemoryTotalBytes] = 80e9;
  return sample;
}

inline Finding MakeFinding(std::string id, std::optional<uint32_t> gpu, Severity severity = Severity::kWarning) {
  Finding finding;
  finding.id = std::move(id);
  finding.severity = severity;
  if (gpu) finding.gpu = GpuRef{.index = *gpu, .uuid = "GPU-" + std::to_string(*gpu) + "0000000-0000-0000-0000-000000000000"};
  finding.summary = finding.id + " on " + (gpu ? "GPU " + std::to_string(*gpu) : std::string("the host"));
  finding.evidence = {"value=1", "quote \" and newline\n and ünïcode"};
  finding.cause = "a cause";
  finding.actions = {"look", "fix"};
  return finding;
}

}  // namespace gpudoctor::testing
