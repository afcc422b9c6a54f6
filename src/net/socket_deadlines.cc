#include "net/socket_deadlines.h"

#include <sys/socket.h>

#include <algorithm>

namespace gpudoctor {

struct SocketDeadlines::Watch {
  int fd;
  TimePoint deadline;  // max once shut down
};

SocketDeadlines::SocketDeadlines() : thread_([this] { Run(); }) {}

SocketDeadlines::~SocketDeadlines() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
  for (Watch* watch : watches_) delete watch;
}

SocketDeadlines::Watch* SocketDeadlines::Add(int fd, TimePoint deadline) {
  auto* watch = new Watch{fd, TimePoint::max()};
  {
    std::lock_guard lock(mutex_);
    watches_.insert(watch);
  }
  Move(watch, deadline);
  return watch;
}

void SocketDeadlines::Move(Watch* watch, TimePoint deadline) {
  std::lock_guard lock(mutex_);
  watch->deadline = deadline;
  if (deadline < next_check_) wake_.notify_one();
}

void SocketDeadlines::Forget(Watch* watch) {
  {
    std::lock_guard lock(mutex_);
    watches_.erase(watch);
  }
  delete watch;
}

size_t SocketDeadlines::expired_total() const {
  std::lock_guard lock(mutex_);
  return expired_total_;
}

// Holding the mutex while it calls shutdown() is what makes Forget safe: a
// socket is either still watched, and so still open, or never touched again.
void SocketDeadlines::Run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    const TimePoint now = std::chrono::steady_clock::now();
    next_check_ = TimePoint::max();
    for (Watch* watch : watches_) {
      if (watch->deadline <= now) {
        ::shutdown(watch->fd, SHUT_RDWR);
        watch->deadline = TimePoint::max();
        ++expired_total_;
      } else {
        next_check_ = std::min(next_check_, watch->deadline);
      }
    }
    if (next_check_ == TimePoint::max()) {
      wake_.wait(lock);
    } else {
      wake_.wait_until(lock, next_check_);
    }
  }
}

}  // namespace gpudoctor
