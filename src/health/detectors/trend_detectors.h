// TrendDetectors: the rules that need history. Feed every snapshot to
// Observe, ask Evaluate for the findings that hold now. Time is always
// passed in, so tests cover hours of behaviour in milliseconds.
//
//   TrendDetectors detectors(config);          // TrendConfig: trend_config.h
//   detectors.Observe(snapshot, clock.Now());
//   for (const Finding& f : detectors.Evaluate(clock.Now())) ...
//
// Rule ids: utilization_stuck, utilization_flapping, tensor_cores_idle, gpu_straggler,
// memory_leak, ecc_rate, pcie_replay_rate, nvlink_error_rate,
// cooling_failure, job_stall, job_loss_nan, job_loss_flat (docs/detectors.md).
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "health/detectors/gpu_track.h"
#include "health/detectors/job_watch.h"
#include "health/detectors/memory_leak.h"
#include "health/detectors/trend_config.h"
#include "health/finding.h"
#include "model/snapshot.h"

namespace gpudoctor {

class TrendDetectors {
 public:
  explicit TrendDetectors(TrendConfig config);
  ~TrendDetectors();

  // Applies new thresholds (a configuration reload) without forgetting what
  // was observed: the GPU readings hold under any thresholds, so a condition
  // that has already lasted the new `after` fires at the next Evaluate; the
  // straggler marks, judged across GPUs per sample, are judged again; a job
  // keeps its progress and losses when JobWatch::Retune accepts its new
  // config and starts over otherwise. History beyond the new longest window
  // is dropped at the next Observe.
  void Reconfigure(TrendConfig config);

  // Records one snapshot taken at `now` and reads the jobs' files.
  void Observe(const Snapshot& snapshot, WallTime now);
  // Findings that hold at `now`. GPUs without a sample for longer than
  // max_sample_gap are not judged: stale data proves nothing.
  std::vector<Finding> Evaluate(WallTime now) const;

  const GpuTrack* Track(uint32_t gpu_index) const;  // for tests and the API

  // How memory_leak reads a leaking process's command line, to name the
  // `gpudoctor trace-alloc` command that finds its allocation; none: not read.
  void set_command_lines(ProcessCommandLines command_lines) { command_lines_ = std::move(command_lines); }

 private:
  TrendConfig config_;
  std::map<std::string, GpuTrack> tracks_;  // by UUID, else "index:N"
  std::vector<std::unique_ptr<JobWatch>> jobs_;
  std::deque<XidEvent> recent_xids_;
  GpuStateAtMoment gpu_state_;  // as of the latest snapshot
  ProcessCommandLines command_lines_;
};

}  // namespace gpudoctor
