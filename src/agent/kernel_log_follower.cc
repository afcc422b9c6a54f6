#include "agent/kernel_log_follower.h"

#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>

#include "logs/follow.h"

namespace gpudoctor {

KernelLogFollower::KernelLogFollower(std::string path, Note note) : path_(std::move(path)), note_(std::move(note)) {}

KernelLogFollower::~KernelLogFollower() { Stop(); }

Status KernelLogFollower::Start() {
  std::optional<LiveLog> live;
  if (path_.empty()) {
    std::vector<std::string> notes;
    auto found = FindLiveLog(&notes);
    if (!found) return found.error();
    live = *found;
    note_("following " + live->description);
  } else if (std::error_code error; !std::filesystem::exists(path_, error)) {
    note_("waiting for " + path_ + " to appear");
  }
  thread_ = std::thread([this, live] {
    const EventSink sink = [this](LogEvent&& event) {
      std::lock_guard lock(mutex_);
      events_.push_back(std::move(event));
    };
    const StopRequested stop = [this] { return stop_.load(); };
    FollowOptions follow;
    follow.start_at_end = true;
    Status status;
    if (live) {
      status = ReadLiveLog(*live, ReadOptions{}, true, follow, sink, stop);
    } else {
      follow.on_open = [this, announced = false]() mutable {
        if (!std::exchange(announced, true)) note_("following " + path_);
      };
      status = FollowFile(path_, ReadOptions{}, follow, sink, stop);
    }
    if (!status) note_("kernel log: " + status.error().message);
  });
  return {};
}

std::vector<LogEvent> KernelLogFollower::TakeEvents() {
  std::lock_guard lock(mutex_);
  return std::exchange(events_, {});
}

void KernelLogFollower::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

}  // namespace gpudoctor
