// DiagLock: one `gpudoctor diag` per GPU at a time, across processes and
// users. Two runs on one GPU would each see the other's load as a fault (a
// slow burn, memory the memtest cannot have), so the second is refused and
// told who holds the GPU. The lock is an advisory flock(2) on a file per GPU,
// named by its PCI bus id, that holds the holder's PID; the kernel drops it
// when the holder exits, however it exits.
//
//   Result<std::string> directory = DiagLockDirectory();
//   DiagLockAttempt attempt = DiagLock::Acquire(*directory, "0000:3b:00.0");
//   if (attempt.held_by) ... "being tested by gpudoctor diag (pid N)";
//   // attempt.lock holds the GPU until it is destroyed
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "common/result.h"

namespace gpudoctor {

class DiagLock {
 public:
  DiagLock(DiagLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  DiagLock& operator=(DiagLock&&) = delete;
  DiagLock(const DiagLock&) = delete;
  ~DiagLock();

 private:
  friend struct DiagLockAttempt AcquireDiagLock(const std::string&, const std::string&);
  explicit DiagLock(int fd) : fd_(fd) {}
  int fd_;
};

struct DiagLockAttempt {
  std::optional<DiagLock> lock;   // the GPU is ours while this lives
  std::optional<pid_t> held_by;   // another run holds it (its PID, 0 when it could not be read)
  std::string error;              // neither: the lock could not be taken (the run goes on unlocked)
};

// Takes the lock of the GPU `gpu_key` (a PCI bus id, or any name without '/')
// in `directory`, without waiting.
DiagLockAttempt AcquireDiagLock(const std::string& directory, const std::string& gpu_key);

// Where the locks live: $GPUDOCTOR_RUN_DIR when set, else /run/gpudoctor
// (made 0755 when missing and we may), else /tmp/gpudoctor-diag (made 1777,
// so every user's runs meet there). An error when none can be used.
Result<std::string> DiagLockDirectory();

}  // namespace gpudoctor
