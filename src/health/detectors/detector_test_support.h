// Scenario builders for the detector tests: tracks and snapshots over
// simulated minutes.
#pragma once

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/scratch_dir.h"
#include "health/detectors/gpu_track.h"
#include "health/finding.h"
#include "model/snapshot.h"

namespace gpudoctor::testing {

using namespace std::chrono_literals;

inline WallTime Start() { return WallTime{std::chrono::seconds{1'700'000'000}}; }

// A track sampled every `step` for `length`, each point made by `at(seconds since start)`; nullopt: no sample then.
inline GpuTrack TrackOf(Duration length, Duration step,
                        const std::function<std::optional<GpuReadings>(double seconds)>& at) {
  GpuTrack track;
  track.ref = GpuRef{.index = 0, .uuid = "GPU-0"};
  for (Duration t{0}; t <= length; t += step) {
    std::optional<GpuReadings> readings = at(std::chrono::duration<double>(t).count());
    if (!readings) continue;
    readings->time = Start() + t;
    track.points.push_back(*readings);
  }
  return track;
}

inline GpuReadings Busy(double util = 100, double power = 380, double temperature = 65) {
  return GpuReadings{.utilization_percent = util,
                     .temperature_c = temperature,
                     .power_w = power,
                     .power_limit_w = 400,
                     .fan_percent = 60,
                     .process_count = 1};
}

inline GpuSnapshot GpuAt(uint32_t index, uint32_t util, std::vector<ProcessInfo> processes = {}) {
  GpuSnapshot gpu;
  gpu.index = index;
  gpu.uuid = Field<std::string>::Value("GPU-" + std::to_string(index));
  gpu.utilization_gpu_percent = Field<uint32_t>::Value(util);
  gpu.temperature_c = Field<uint32_t>::Value(60);
  gpu.power_draw_w = Field<double>::Value(util > 50 ? 350.0 : 80.0);
  gpu.power_limit_w = Field<double>::Value(400.0);
  gpu.fan_speeds_percent = Field<std::vector<uint32_t>>::Value({50});
  gpu.memory_total_bytes = Field<uint64_t>::Value(80ull << 30);
  gpu.memory_used_bytes = Field<uint64_t>::Value(30ull << 30);
  gpu.ecc_volatile_corrected = Field<uint64_t>::Value(0);
  gpu.ecc_volatile_uncorrected = Field<uint64_t>::Value(0);
  gpu.pcie_replay_count = Field<uint64_t>::Value(0);
  gpu.processes = Field<std::vector<ProcessInfo>>::Value(std::move(processes));
  return gpu;
}

inline ProcessInfo Process(uint32_t pid, const std::string& name, uint64_t bytes) {
  return ProcessInfo{.pid = pid, .name = name, .used_memory_bytes = Field<uint64_t>::Value(bytes)};
}

using TempDir = ScratchDir;

// The time of a track's last sample.
inline WallTime End(const GpuTrack& track) { return track.points.back().time(); }

// The findings' ids, in order.
inline std::vector<std::string> Ids(const std::vector<Finding>& findings) {
  std::vector<std::string> ids;
  for (const Finding& f : findings) ids.push_back(f.id);
  return ids;
}

// Appends `text` to the file at `path`, as a program writing a log would.
inline void Append(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::app) << text; }

}  // namespace gpudoctor::testing
