// JobWatch: follows one training job's log or heartbeat file and reports
// job_stall (no progress for stall_after), job_loss_nan and job_loss_flat.
//
//   JobWatch watch(config.jobs[0]);
//   watch.Poll(now);                                  // reads what the job appended
//   auto findings = watch.Evaluate(now, gpu_state);   // gpu_state: see GpuStateAtMoment
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "health/detectors/file_tail.h"
#include "health/detectors/trend_config.h"
#include "health/finding.h"

namespace re2 {
class RE2;
}

namespace gpudoctor {

// The GPUs as they were at the moment a job finding fires, for its evidence.
struct GpuStateAtMoment {
  std::vector<std::string> lines;  // "GPU 0: util 0%, processes python[4242] 30.0 GiB", "Xid 79 on GPU 3 at ..."
  bool any_compute_process = false;
};

class JobWatch {
 public:
  // The regexes must have been validated (ParseTrendConfig does).
  explicit JobWatch(JobWatchConfig config);
  ~JobWatch();

  void Poll(WallTime now);
  std::vector<Finding> Evaluate(WallTime now, const GpuStateAtMoment& gpus) const;

  // Takes new thresholds (stall_after, the flat-loss settings,
  // require_gpu_processes) and keeps what was read so far, which holds only
  // for the same job read from the same file the same way: when the name,
  // the file or a regex differs, returns false and changes nothing.
  bool Retune(const JobWatchConfig& config);

 private:
  void TakeLine(const std::string& line, WallTime now);

  JobWatchConfig config_;
  FileTail tail_;
  std::unique_ptr<re2::RE2> progress_;
  std::unique_ptr<re2::RE2> loss_;
  std::optional<WallTime> watching_since_;  // first poll that found the file
  std::optional<WallTime> last_progress_;
  std::string last_progress_line_;
  std::deque<std::pair<WallTime, double>> losses_;  // finite values within flat_loss_window
  std::optional<WallTime> nan_since_;                // the loss is NaN/inf since then
  std::string nan_line_;
};

}  // namespace gpudoctor
