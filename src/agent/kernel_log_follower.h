// KernelLogFollower: the agent's kernel log, followed on a thread of its own;
// the sampling loop takes the events that arrived since it last looked.
//
//   KernelLogFollower log("", [](const std::string& note) { ... });  // "": the live kernel log
//   if (Status started = log.Start(); !started) { ...not followed, and why... }
//   std::vector<LogEvent> events = log.TakeEvents();  // each cycle
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "logs/event.h"

namespace gpudoctor {

class KernelLogFollower {
 public:
  using Note = std::function<void(const std::string&)>;

  // `path` empty: the live kernel log, when this machine has a readable one.
  // `note` hears what is followed and why following stopped.
  KernelLogFollower(std::string path, Note note);
  ~KernelLogFollower();  // Stop()
  KernelLogFollower(const KernelLogFollower&) = delete;
  KernelLogFollower& operator=(const KernelLogFollower&) = delete;

  // Starts following from the end, or says why nothing can be followed. A
  // file is announced once it is open: lines appended after "following FILE"
  // are never missed.
  Status Start();
  std::vector<LogEvent> TakeEvents();
  void Stop();

 private:
  std::string path_;
  Note note_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<LogEvent> events_;
};

}  // namespace gpudoctor
