// What `gpudoctor diag` watches while its tests run, besides the workers:
// NVML through the hang-proof probe every couple of seconds (DiagSampler),
// and the kernel log followed from its end (DiagLogWatch), for the verdicts
// of assess/diag_judge.h.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "assess/diag_judge.h"
#include "logs/event.h"
#include "nvml/collector.h"

namespace gpudoctor {

// Reads NVML into `readings` every couple of seconds from construction to destruction.
class DiagSampler {
 public:
  DiagSampler(SnapshotSource& source, std::map<int, GpuReadings>& readings);
  ~DiagSampler();
  DiagSampler(const DiagSampler&) = delete;
  DiagSampler& operator=(const DiagSampler&) = delete;

 private:
  void Loop();

  SnapshotSource& source_;
  std::map<int, GpuReadings>& readings_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};

// Follows the kernel log (or a file) from its end, keeping Xid and
// off-the-bus events. Construction returns once the log is open, so nothing
// written after it is missed; why it could not be followed goes to `notes`.
class DiagLogWatch {
 public:
  // `file` empty: this machine's live kernel log.
  DiagLogWatch(const std::string& file, std::vector<std::string>& notes);
  ~DiagLogWatch();
  DiagLogWatch(const DiagLogWatch&) = delete;
  DiagLogWatch& operator=(const DiagLogWatch&) = delete;

  // Stops following, after a last read, and returns the events seen.
  std::vector<LogEvent> Stop();
  // Why following stopped early; empty when it did not.
  std::string error();

 private:
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable opened_signal_;
  bool opened_ = false;
  std::vector<LogEvent> events_;
  std::string error_;
};

}  // namespace gpudoctor
