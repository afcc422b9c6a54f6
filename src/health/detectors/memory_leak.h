// memory_leak: a process whose GPU memory keeps growing, judged over a window
// by three measures a leak hunt needs: the least-squares growth rate, the
// peak, and the memory not released between phases (the troughs rising).
// A single rise, a warm-up that levels off or a steady saw-tooth is no leak.
//
//   auto growth = AnalyzeGrowth(track.process_memory[key], config, now);
//   if (growth && IsLeak(*growth, config)) ...
#pragma once

#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "health/detectors/gpu_track.h"
#include "health/detectors/trend_config.h"
#include "host/process_command_line.h"

namespace gpudoctor {

struct GrowthAnalysis {
  Duration span{};
  double rate_bytes_per_min = 0;  // least-squares slope
  double peak_bytes = 0;
  double latest_bytes = 0;
  std::vector<double> troughs;    // the lowest value in each phase of the window, oldest first
  double unreleased_bytes = 0;    // last trough minus first trough
  bool troughs_rising = false;    // every trough above the one before, keeping pace (see MemoryLeakConfig)
};

// nullopt when the window holds too little data (under min_span, or a phase without samples).
std::optional<GrowthAnalysis> AnalyzeGrowth(const std::deque<MemoryPoint>& series, const MemoryLeakConfig& config,
                                            WallTime now);
bool IsLeak(const GrowthAnalysis& growth, const MemoryLeakConfig& config);
// The measures in the words every leak verdict uses (this finding's evidence
// and `gpudoctor trace-alloc`): "rate 12.0 MiB/min over 30m, peak 10.5 GiB,
// now 10.4 GiB, unreleased between phases 270.0 MiB".
std::string DescribeGrowth(const GrowthAnalysis& growth);

// One finding per GPU naming its leaking processes, the fastest first. With
// `command_lines`, the evidence carries each one's command line and the first
// action is the `gpudoctor trace-alloc -- COMMAND` that finds the allocation
// of the fastest (docs/trace-alloc.md).
std::optional<Finding> DetectMemoryLeak(const GpuTrack& track, const MemoryLeakConfig& config, WallTime now,
                                        const ProcessCommandLines& command_lines = {});

}  // namespace gpudoctor
