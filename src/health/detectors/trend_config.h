// Thresholds of the trend detectors, with the documented defaults
// (docs/detectors.md), loadable from the `[detectors]` table of the TOML config.
//
//   auto config = ParseTrendConfig(R"(
//     [detectors.utilization_stuck]
//     after = "20m"
//     [[detectors.job]]
//     name = "llama"
//     log = "/scratch/llama/train.log"
//     loss_regex = 'loss[=: ]+(\S+)'
//   )");
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace gpudoctor {


// utilization_stuck: pinned at 100% with nothing doing real work, or at 0%
// while compute processes hold the GPU.
struct UtilizationStuckConfig {
  Duration after = std::chrono::minutes(15);
  double high_percent = 100;
  double low_percent = 0;
  // At the high end, only a GPU drawing under this share of its power limit
  // (a spinning or hung kernel) or one without processes counts as stuck.
  double busy_wait_power_fraction = 0.5;
  // Where the GPU has GPM, the SMs say it directly instead of the power: at
  // the high end a GPU whose SMs are busy under this share counts as stuck
  // (a kernel spinning in a collective holds a few SMs), and one above it as
  // working, whatever it draws.
  double busy_wait_sm_active = 0.05;
};

// tensor_cores_idle (GPM, Hopper and newer): a GPU whose SMs work hard for
// `after` while its tensor pipes stay under `max_tensor_active`: a job doing its
// math without the tensor cores runs at a fraction of what the GPU can.
struct TensorCoresIdleConfig {
  Duration after = std::chrono::minutes(30);
  double min_utilization_percent = 90;
  double min_sm_active = 0.5;
  double max_tensor_active = 0.05;
};

// utilization_flapping: swings between high and low, counted with hysteresis.
struct UtilizationFlappingConfig {
  Duration window = std::chrono::minutes(10);
  double high_percent = 80;
  double low_percent = 20;
  int min_transitions = 6;
};

// gpu_straggler: one GPU idle while its peers are busy.
struct StragglerConfig {
  Duration after = std::chrono::minutes(5);
  double idle_percent = 5;
  double busy_percent = 50;
  int min_busy_peers = 2;
};

// memory_leak: per-process growth that persists across phases.
struct MemoryLeakConfig {
  Duration window = std::chrono::minutes(30);
  Duration min_span = std::chrono::minutes(20);
  double min_rate_mib_per_min = 2;
  int phases = 4;                   // the window is cut in this many parts; each trough must rise
  double min_trough_rise_mib = 1;   // by at least this much
  double min_trough_rise_share = 0.25;  // and by this share of the average rise: growth that levels off is no leak
  Duration critical_time_to_full = std::chrono::minutes(15);
};

// ecc_rate, pcie_replay_rate, nvlink_error_rate: per-minute counter rates.
struct CounterRateConfig {
  Duration window = std::chrono::minutes(5);
  Duration min_span = std::chrono::minutes(1);
  double ecc_corrected_per_min = 10;   // any uncorrected error is critical
  double pcie_replays_per_min = 8;
  double nvlink_errors_per_min = 5;
};

// cooling_failure: still climbing under a steady load with fans at maximum or absent.
struct CoolingConfig {
  Duration window = std::chrono::minutes(10);
  double min_rise_c = 4;
  double min_late_rise_c = 2;          // rise over the second half of the window
  double min_late_to_early_ratio = 0.5;  // warm-up levels off; a failing cooler does not
  double util_band_percent = 10;
  double power_band_fraction = 0.1;
  double fan_max_percent = 95;
  double critical_temperature_c = 85;
};

// job_stall, job_loss_nan, job_loss_flat: one training job's log or heartbeat file.
struct JobWatchConfig {
  std::string name;
  std::string path;
  bool heartbeat = false;      // any change of the file is progress; no lines are read
  std::string progress_regex;  // empty: any new line is progress
  std::string loss_regex;      // first capture group is the loss; a match is progress too
  Duration stall_after = std::chrono::minutes(3);  // under PyTorch's 8-10 minute NCCL watchdog
  Duration flat_loss_window = std::chrono::minutes(10);
  int flat_loss_min_values = 10;
  double flat_loss_tolerance = 1e-4;  // relative spread below which the loss is flat
  bool require_gpu_processes = true;  // a finished job (no GPU processes left) is not stalled
};

struct TrendConfig {
  UtilizationStuckConfig utilization_stuck;
  UtilizationFlappingConfig utilization_flapping;
  TensorCoresIdleConfig tensor_cores_idle;
  StragglerConfig gpu_straggler;
  MemoryLeakConfig memory_leak;
  CounterRateConfig counter_rates;
  CoolingConfig cooling_failure;
  std::vector<JobWatchConfig> jobs;
  // A gap between samples longer than this breaks "for N minutes" conditions,
  // and data older than this is too stale to judge.
  Duration max_sample_gap = std::chrono::minutes(2);

  // The longest history any detector looks at.
  Duration LongestWindow() const;
};

// Reads the `detectors` table of a TOML document (absent: all defaults).
// Unknown keys, bad durations and bad regexes are errors that name the key.
// A caller that already parsed the document uses trend_config_toml.h.
Result<TrendConfig> ParseTrendConfig(std::string_view toml_text);

}  // namespace gpudoctor
