#include "agent/subprocess.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/text.h"

namespace gpudoctor {
namespace {

// Owns one file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Close();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~Fd() { Close(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct Pipe {
  Fd read;
  Fd write;
};

// A close-on-exec pipe whose ends are above stderr, so the child's dup2 onto
// 0, 1 and 2 can never overwrite an end it still needs.
Result<Pipe> MakePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Error{fmt::format("pipe: {}", std::strerror(errno))};
  Pipe pipe{Fd(fds[0]), Fd(fds[1])};
  for (Fd* end : {&pipe.read, &pipe.write}) {
    if (end->get() > 2) continue;
    int moved = ::fcntl(end->get(), F_DUPFD_CLOEXEC, 3);
    if (moved < 0) return Error{fmt::format("fcntl: {}", std::strerror(errno))};
    *end = Fd(moved);
  }
  return pipe;
}

void SetNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Runs in the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void ExecChild(const char* path, char* const argv[], char* const envp[], int stdin_fd,
                            int output_fd, int error_fd) {
  ::setpgid(0, 0);  // its own group, so a timeout kills what it started too
  ::dup2(stdin_fd, STDIN_FILENO);
  ::dup2(output_fd, STDOUT_FILENO);
  ::dup2(output_fd, STDERR_FILENO);
  // Close-on-exec for everything else the agent has open (sockets, the database).
  ::syscall(SYS_close_range, 3U, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &default_action, nullptr);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(path, argv, envp);
  const int error = errno;
  [[maybe_unused]] ssize_t n = ::write(error_fd, &error, sizeof error);
  ::_exit(127);
}

// Blocks SIGPIPE in this thread while writing to a child that may have
// exited, and swallows a SIGPIPE our writes raised, so the agent never dies of
// a hook that closed its stdin.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigset_t pending;
    ::sigpending(&pending);
    was_pending_ = ::sigismember(&pending, SIGPIPE) == 1;
    sigset_t block;
    ::sigemptyset(&block);
    ::sigaddset(&block, SIGPIPE);
    ::pthread_sigmask(SIG_BLOCK, &block, &previous_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pipe_only;
      ::sigemptyset(&pipe_only);
      ::sigaddset(&pipe_only, SIGPIPE);
      const timespec zero{};
      while (::sigtimedwait(&pipe_only, nullptr, &zero) == SIGPIPE) {
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t previous_{};
  bool was_pending_ = false;
};

}  // namespace

std::string ProcessOutcome::Describe(Duration timeout) const {
  if (timed_out) return fmt::format("timed out after {}", FormatDuration(timeout));
  if (signal != 0) return fmt::format("killed by signal {}", signal);
  return fmt::format("exit status {}", exit_code);
}

Result<ProcessOutcome> RunProcess(const ProcessSpec& spec) {
  if (spec.argv.empty() || spec.argv.front().empty()) return Error{"no program to run"};
  if (spec.argv.front().front() != '/') {
    return Error{fmt::format("'{}': give the program's absolute path", spec.argv.front())};
  }
  // Everything the child needs is prepared before fork.
  std::vector<char*> argv;
  for (const std::string& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& var : spec.env) envp.push_back(const_cast<char*>(var.c_str()));
  envp.push_back(nullptr);

  Result<Pipe> input = MakePipe();
  if (!input) return input.error();
  Result<Pipe> output = MakePipe();
  if (!output) return output.error();
  Result<Pipe> exec_error = MakePipe();
  if (!exec_error) return exec_error.error();

  const pid_t pid = ::fork();
  if (pid < 0) return Error{fmt::format("fork: {}", std::strerror(errno))};
  if (pid == 0) {
    ExecChild(argv[0], argv.data(), envp.data(), input->read.get(), output->write.get(),
              exec_error->write.get());
  }
  ::setpgid(pid, pid);  // also here, so the group exists before we may signal it
  input->read.Close();
  output->write.Close();
  exec_error->write.Close();

  // The error pipe closes on a successful exec, or carries execve's errno.
  int exec_errno = 0;
  ssize_t got;
  do {
    got = ::read(exec_error->read.get(), &exec_errno, sizeof exec_errno);
  } while (got < 0 && errno == EINTR);
  if (got == sizeof exec_errno) {
    int status;
    ::waitpid(pid, &status, 0);
    return Error{fmt::format("cannot run {}: {}", spec.argv.front(), std::strerror(exec_errno))};
  }

  SigpipeGuard sigpipe_guard;
  SetNonBlocking(input->write.get());
  SetNonBlocking(output->read.get());
  if (spec.stdin_data.empty()) input->write.Close();

  ProcessOutcome outcome;
  auto keep_output = [&](const char* data, size_t size) {
    const size_t room = spec.max_output_bytes - std::min(spec.max_output_bytes, outcome.output.size());
    outcome.output.append(data, std::min(room, size));
  };
  size_t written = 0;
  int status = 0;
  bool exited = false;
  auto deadline = std::chrono::steady_clock::now() + spec.timeout;
  bool cancelled = false;
  char buffer[4096];
  while (!exited) {
    exited = ::waitpid(pid, &status, WNOHANG) == pid;
    const auto now = std::chrono::steady_clock::now();
    if (!exited && !cancelled && spec.cancel != nullptr && spec.cancel->load()) {
      cancelled = true;
      ::kill(-pid, SIGTERM);
      deadline = std::min(deadline, now + kCancelGrace);
    }
    if (!exited && now >= deadline) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      outcome.timed_out = true;
      break;
    }
    pollfd fds[2];
    nfds_t count = 0;
    if (input->write.valid()) fds[count++] = {input->write.get(), POLLOUT, 0};
    const nfds_t output_slot = count;
    if (output->read.valid()) fds[count++] = {output->read.get(), POLLIN, 0};
    // Short waits: the child may exit while a grandchild holds the pipes open.
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    const int wait_ms = exited ? 0 : static_cast<int>(std::clamp<int64_t>(left, 1, 20));
    if (count == 0) {
      if (!exited) ::poll(nullptr, 0, wait_ms);
      continue;
    }
    if (::poll(fds, count, wait_ms) < 0 && errno != EINTR) break;
    if (input->write.valid() && fds[0].revents != 0) {
      const ssize_t n =
          ::write(input->write.get(), spec.stdin_data.data() + written, spec.stdin_data.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if ((n < 0 && errno != EAGAIN && errno != EINTR) || written == spec.stdin_data.size()) {
        input->write.Close();  // done, or the child stopped reading (EPIPE)
      }
    }
    if (output->read.valid() && output_slot < count && fds[output_slot].revents != 0) {
      const ssize_t n = ::read(output->read.get(), buffer, sizeof buffer);
      if (n > 0) {
        keep_output(buffer, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        output->read.Close();
      }
    }
  }
  // Whatever the child wrote just before it exited.
  while (!outcome.timed_out && output->read.valid()) {
    const ssize_t n = ::read(output->read.get(), buffer, sizeof buffer);
    if (n <= 0) break;  // end, or a grandchild still holds the pipe open
    keep_output(buffer, static_cast<size_t>(n));
  }
  if (!outcome.timed_out) {
    if (WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) outcome.signal = WTERMSIG(status);
  }
  return outcome;
}

}  // namespace gpudoctor
