#include "cli/diag_watch.h"

#include <chrono>
#include <optional>

#include "logs/follow.h"

namespace gpudoctor {

DiagSampler::DiagSampler(SnapshotSource& source, std::map<int, GpuReadings>& readings)
    : source_(source), readings_(readings) {
  thread_ = std::thread([this] { Loop(); });
}

DiagSampler::~DiagSampler() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void DiagSampler::Loop() {
  std::unique_lock lock(mutex_);
  while (!done_) {
    lock.unlock();
    const Snapshot snapshot = source_.Collect();
    lock.lock();
    AddReading(snapshot, readings_);
    wake_.wait_for(lock, std::chrono::seconds(2), [this] { return done_; });
  }
}

DiagLogWatch::DiagLogWatch(const std::string& file, std::vector<std::string>& notes) {
  std::optional<LiveLog> live;
  if (file.empty()) {
    auto found = FindLiveLog();
    if (!found) {
      notes.push_back("kernel log not followed: " + found.error().message);
      return;
    }
    live = *found;
  }
  thread_ = std::thread([this, file, live] {
    FollowOptions follow{.poll_interval = std::chrono::milliseconds(200),
                         .quiet_flush = std::chrono::milliseconds(200),
                         .start_at_end = true,
                         .on_open = [this] {
                           std::lock_guard lock(mutex_);
                           opened_ = true;
                           opened_signal_.notify_all();
                         }};
    auto sink = [this](LogEvent&& event) {
      std::lock_guard lock(mutex_);
      if (event.xid || event.kind == "gpu_off_bus") events_.push_back(std::move(event));
    };
    auto stop = [this] { return stop_.load(); };
    Status status = live ? ReadLiveLog(*live, ReadOptions{}, /*follow=*/true, follow, sink, stop)
                         : FollowFile(file, ReadOptions{}, follow, sink, stop);
    std::lock_guard lock(mutex_);
    if (!status) error_ = status.error().message;
    opened_ = true;
    opened_signal_.notify_all();
  });
  std::unique_lock lock(mutex_);
  opened_signal_.wait_for(lock, std::chrono::seconds(5), [this] { return opened_; });
}

DiagLogWatch::~DiagLogWatch() { Stop(); }

std::vector<LogEvent> DiagLogWatch::Stop() {
  if (thread_.joinable()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // one more poll of what was just written
    stop_.store(true);
    thread_.join();
  }
  std::lock_guard lock(mutex_);
  return events_;
}

std::string DiagLogWatch::error() {
  std::lock_guard lock(mutex_);
  return error_;
}

}  // namespace gpudoctor
