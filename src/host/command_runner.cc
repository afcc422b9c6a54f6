#include "host/command_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

namespace gpudoctor {
namespace {

constexpr size_t kMaxCapturedBytes = 4 << 20;

// A pipe whose ends close when it goes out of scope.
struct Pipe {
  int read_end = -1;
  int write_end = -1;
  Pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) == 0) {
      read_end = fds[0];
      write_end = fds[1];
    }
  }
  ~Pipe() {
    CloseRead();
    CloseWrite();
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  bool ok() const { return read_end >= 0; }
  void CloseRead() {
    if (read_end >= 0) ::close(read_end);
    read_end = -1;
  }
  void CloseWrite() {
    if (write_end >= 0) ::close(write_end);
    write_end = -1;
  }
};

// Appends what is readable now to `sink`; returns false at end of file.
bool Drain(int fd, std::string& sink) {
  std::array<char, 8192> buffer;
  ssize_t n = ::read(fd, buffer.data(), buffer.size());
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) return false;
  size_t room = kMaxCapturedBytes - std::min(sink.size(), kMaxCapturedBytes);
  sink.append(buffer.data(), std::min(static_cast<size_t>(n), room));
  return true;
}

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

CommandResult FailedToStart(std::string message) {
  CommandResult result;
  result.status = CommandStatus::kFailedToStart;
  result.message = std::move(message);
  return result;
}

}  // namespace

CommandResult SubprocessRunner::Run(const std::vector<std::string>& argv, Duration timeout) {
  if (argv.empty()) return FailedToStart("empty command line");
  Pipe out, err;
  if (!out.ok() || !err.ok()) return FailedToStart(std::string("pipe: ") + std::strerror(errno));

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out.write_end, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err.write_end, STDERR_FILENO);

  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);

  // In a process group of its own, so a deadline ends everything it started
  // (a wrapper script's children too), not the command alone.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  pid_t pid = -1;
  int spawn_error = ::posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_error == ENOENT) {
    CommandResult result;
    result.status = CommandStatus::kNotInstalled;
    result.message = argv[0] + ": not installed";
    return result;
  }
  if (spawn_error != 0) return FailedToStart(argv[0] + ": " + std::strerror(spawn_error));
  out.CloseWrite();
  err.CloseWrite();

  CommandResult result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool out_open = true, err_open = true, timed_out = false;
  while (out_open || err_open) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    std::array<pollfd, 2> fds{{{out_open ? out.read_end : -1, POLLIN, 0}, {err_open ? err.read_end : -1, POLLIN, 0}}};
    int ready = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (fds[0].revents) out_open = Drain(out.read_end, result.output);
    if (fds[1].revents) err_open = Drain(err.read_end, result.errors);
  }
  if (timed_out) ::kill(-pid, SIGKILL);

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.status = timed_out ? CommandStatus::kTimedOut : CommandStatus::kExited;
  result.exit_code = DecodeWaitStatus(status);
  return result;
}

}  // namespace gpudoctor
