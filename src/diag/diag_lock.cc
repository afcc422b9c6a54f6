#include "diag/diag_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/text.h"

namespace gpudoctor {
namespace {

bool UsableDirectory(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) == 0) {
    chmod(path.c_str(), mode);  // past the umask
    return true;
  }
  struct stat status;
  return errno == EEXIST && stat(path.c_str(), &status) == 0 && S_ISDIR(status.st_mode) &&
         access(path.c_str(), R_OK | X_OK) == 0;
}

std::optional<pid_t> ReadHolder(int fd) {
  char text[32] = {};
  const ssize_t n = pread(fd, text, sizeof text - 1, 0);
  if (n <= 0) return std::nullopt;
  return ParseInt<pid_t>(Trim(std::string_view(text, static_cast<size_t>(n))));
}

}  // namespace

DiagLock::~DiagLock() {
  if (fd_ >= 0) close(fd_);  // the kernel drops the flock with the last descriptor
}

DiagLockAttempt AcquireDiagLock(const std::string& directory, const std::string& gpu_key) {
  DiagLockAttempt attempt;
  std::string name = gpu_key;
  for (char& c : name) {
    if (c == '/' || c == ':') c = '-';
  }
  const std::string path = directory + "/diag-" + name + ".lock";
  // Read-write to record our PID; read-only is enough to lock a file another user made.
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  const bool writable = fd >= 0;
  if (fd < 0) fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    attempt.error = path + ": " + std::strerror(errno);
    return attempt;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error == EWOULDBLOCK) {
      attempt.held_by = ReadHolder(fd).value_or(0);
    } else {
      attempt.error = path + ": " + std::strerror(error);
    }
    close(fd);
    return attempt;
  }
  if (writable) {
    const std::string pid = std::to_string(getpid()) + "\n";
    if (ftruncate(fd, 0) == 0) (void)!pwrite(fd, pid.data(), pid.size(), 0);
  }
  attempt.lock.emplace(DiagLock(fd));
  return attempt;
}

Result<std::string> DiagLockDirectory() {
  if (const char* chosen = std::getenv("GPUDOCTOR_RUN_DIR"); chosen != nullptr && *chosen != '\0') {
    if (!UsableDirectory(chosen, 0755)) return Error{std::string("GPUDOCTOR_RUN_DIR ") + chosen + ": " +
                                                     std::strerror(errno)};
    return std::string(chosen);
  }
  if (UsableDirectory("/run/gpudoctor", 0755) && access("/run/gpudoctor", W_OK) == 0)
    return std::string("/run/gpudoctor");
  if (UsableDirectory("/tmp/gpudoctor-diag", 01777)) return std::string("/tmp/gpudoctor-diag");
  return Error{std::string("neither /run/gpudoctor nor /tmp/gpudoctor-diag can hold the GPUs' locks: ") +
               std::strerror(errno)};
}

}  // namespace gpudoctor
