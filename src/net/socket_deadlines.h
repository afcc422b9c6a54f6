// SocketDeadlines: shuts down connected sockets that miss their deadline.
//
// An event loop that only closes connections after a spell of silence lets a
// client that sends one byte now and then hold a connection for ever. This
// gives each socket one total deadline, moved by its owner as the exchange
// goes on, and a thread that calls shutdown() on a socket once it passes. It
// never calls close(): the owner's event loop sees the end of the stream and
// closes the socket itself, so a descriptor number is never hit after the
// owner has released it, provided the owner calls Forget before close().
//
//   SocketDeadlines deadlines;
//   SocketDeadlines::Watch* watch = deadlines.Add(fd, Now() + 10s);  // connection accepted
//   deadlines.Move(watch, Now() + 30s);                               // request head complete
//   deadlines.Forget(watch);                                          // then close(fd)
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_set>

namespace gpudoctor {

class SocketDeadlines {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  struct Watch;  // one socket and its deadline

  SocketDeadlines();   // starts the thread
  ~SocketDeadlines();  // stops it; sockets still watched are left alone
  SocketDeadlines(const SocketDeadlines&) = delete;
  SocketDeadlines& operator=(const SocketDeadlines&) = delete;

  Watch* Add(int fd, TimePoint deadline);
  void Move(Watch* watch, TimePoint deadline);
  // After this returns the socket is never touched again, so the caller may close it.
  void Forget(Watch* watch);

  // Sockets shut down so far, for tests and statistics.
  size_t expired_total() const;

 private:
  void Run();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::unordered_set<Watch*> watches_;
  TimePoint next_check_ = TimePoint::max();  // when Run wakes next
  size_t expired_total_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace gpudoctor
