#include "logs/follow.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "common/text.h"

extern char** environ;

namespace gpudoctor {

namespace {

constexpr size_t kReadSize = 256 * 1024;

std::string ErrnoText() { return std::strerror(errno); }

// Closes events once the input has been quiet for a while.
class QuietTimer {
 public:
  explicit QuietTimer(std::chrono::milliseconds quiet) : quiet_(quiet) {}
  void Data() {
    last_data_ = std::chrono::steady_clock::now();
    pending_ = true;
  }
  void Idle(LogScanner& scanner, const EventSink& sink) {
    if (pending_ && std::chrono::steady_clock::now() - last_data_ >= quiet_) {
      scanner.FlushOpenEvents(sink);
      pending_ = false;
    }
  }

 private:
  std::chrono::milliseconds quiet_;
  std::chrono::steady_clock::time_point last_data_{};
  bool pending_ = false;
};

std::optional<WallTime> BootTime() {
  std::ifstream stat("/proc/stat");
  std::string line;
  while (std::getline(stat, line)) {
    if (StartsWith(line, "btime ")) {
      if (auto seconds = ParseInt<int64_t>(line.substr(6))) return WallTime{std::chrono::seconds{*seconds}};
    }
  }
  return std::nullopt;
}

bool FindInPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  for (std::string_view dir : Split(path ? path : "/usr/bin:/bin", ':')) {
    if (dir.empty()) continue;
    std::string candidate = std::string(dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return true;
  }
  return false;
}

// A child process whose standard output we read; killed and reaped on exit.
class Subprocess {
 public:
  static Result<Subprocess> Start(const std::vector<std::string>& argv) {
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Error{"pipe: " + ErrnoText()};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    pid_t pid = 0;
    int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(pipe_fds[1]);
    if (rc != 0) {
      ::close(pipe_fds[0]);
      return Error{argv[0] + ": " + std::strerror(rc)};
    }
    Subprocess process;
    process.pid_ = pid;
    process.fd_ = pipe_fds[0];
    return process;
  }
  Subprocess() = default;
  Subprocess(Subprocess&& other) noexcept : pid_(other.pid_), fd_(other.fd_) {
    other.pid_ = -1;
    other.fd_ = -1;
  }
  Subprocess& operator=(Subprocess&&) = delete;
  ~Subprocess() {
    if (fd_ >= 0) ::close(fd_);
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      Wait();
    }
  }
  int fd() const { return fd_; }
  // Exit status once it has ended (closes our end of the pipe first).
  int Wait() {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
    int status = 0;
    if (pid_ > 0) {
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      pid_ = -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
};

// Reads `fd` into the scanner. /dev/kmsg returns one record per read, with
// "KEY=value" dictionary lines after the message; `kmsg` keeps only the
// message line of each record.
Status Pump(int fd, bool kmsg, bool follow, const FollowOptions& options, LogScanner& scanner,
            const EventSink& sink, const StopRequested& should_stop) {
  std::vector<char> buffer(kReadSize);
  QuietTimer quiet(options.quiet_flush);
  while (!should_stop()) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n > 0) {
      std::string_view data(buffer.data(), static_cast<size_t>(n));
      if (kmsg) {
        size_t newline = data.find('\n');
        data = data.substr(0, newline == std::string_view::npos ? data.size() : newline + 1);
        scanner.Consume(data, sink);
        if (data.back() != '\n') scanner.Consume("\n", sink);
      } else {
        scanner.Consume(data, sink);
      }
      quiet.Data();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EPIPE) continue;  // kmsg: records overwritten before we read them
    bool at_end = n == 0 || errno == EAGAIN;
    if (!at_end) return Error{std::string("read failed: ") + ErrnoText()};
    if (!follow || (n == 0 && !kmsg)) break;  // a pipe closed: journalctl ended
    quiet.Idle(scanner, sink);
    pollfd waiting{fd, POLLIN, 0};
    ::poll(&waiting, 1, static_cast<int>(options.poll_interval.count()));
  }
  return Status::Ok();
}

}  // namespace

Status FollowFile(const std::string& path, ReadOptions options, const FollowOptions& follow,
                  const EventSink& sink, const StopRequested& should_stop) {
  if (options.parse.source.empty()) options.parse.source = path;
  LogScanner scanner(std::move(options));
  std::vector<char> buffer(kReadSize);
  QuietTimer quiet(follow.quiet_flush);
  int fd = -1;
  struct stat opened {};
  off_t offset = 0;
  bool first_open = true;
  while (!should_stop()) {
    if (fd < 0) {
      InputFailure failure{};
      auto file = InputFile::Open(path, &failure);
      if (file) {
        opened = file->status();
        fd = file->Release();
        offset = 0;
        if (first_open && follow.start_at_end) offset = ::lseek(fd, 0, SEEK_END);
        first_open = false;
        if (follow.on_open) follow.on_open();
      } else if (failure == InputFailure::kMissing) {  // not yet created, or between rotations
        quiet.Idle(scanner, sink);
        std::this_thread::sleep_for(follow.poll_interval);
        continue;
      } else {
        scanner.Finish(sink);
        return file.error();
      }
    }
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n > 0) {
      scanner.Consume(std::string_view(buffer.data(), static_cast<size_t>(n)), sink);
      offset += n;
      quiet.Data();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // At the end of what is there now: has the file been rotated or truncated?
    struct stat by_name {};
    struct stat current {};
    if (::stat(path.c_str(), &by_name) == 0 && (by_name.st_ino != opened.st_ino || by_name.st_dev != opened.st_dev)) {
      scanner.Finish(sink);  // the old file is read to its end
      scanner.Restart();
      ::close(fd);
      fd = -1;
      continue;
    }
    if (::fstat(fd, &current) == 0 && current.st_size < offset) {
      ::lseek(fd, 0, SEEK_SET);
      offset = 0;
      scanner.Restart();
      continue;
    }
    quiet.Idle(scanner, sink);
    std::this_thread::sleep_for(follow.poll_interval);
  }
  scanner.Finish(sink);
  if (fd >= 0) ::close(fd);
  return Status::Ok();
}

Result<LiveLog> FindLiveLog(std::vector<std::string>* notes) {
  auto note = [&](std::string text) {
    if (notes) notes->push_back(std::move(text));
  };
  int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) {
    char record[8192];
    ssize_t n = ::read(fd, record, sizeof record);
    int error = errno;
    ::close(fd);
    if (n > 0 || (n < 0 && (error == EAGAIN || error == EPIPE))) {
      return LiveLog{LiveLogKind::kKmsg, "/dev/kmsg", "kernel ring buffer (/dev/kmsg)"};
    }
    note(std::string("/dev/kmsg: ") + (n < 0 ? std::strerror(error) : "empty"));
  } else {
    note(std::string("/dev/kmsg: ") + ErrnoText());
  }
  if (FindInPath("journalctl")) {
    auto probe = Subprocess::Start({"journalctl", "-k", "-n", "1", "-q", "--no-pager"});
    if (probe) {
      char byte;
      ssize_t n = ::read(probe->fd(), &byte, 1);
      int status = probe->Wait();
      if (n == 1 && status == 0) {
        return LiveLog{LiveLogKind::kJournal, "journalctl", "systemd journal (journalctl -k)"};
      }
      note("journalctl -k: no kernel messages available");
    } else {
      note(probe.error().message);
    }
  } else {
    note("journalctl: not installed");
  }
  for (const char* path : {"/var/log/kern.log", "/var/log/messages", "/var/log/syslog"}) {
    if (::access(path, R_OK) == 0) return LiveLog{LiveLogKind::kFile, path, path};
    note(std::string(path) + ": " + ErrnoText());
  }
  return Error{"no readable kernel log: /dev/kmsg, the journal and /var/log/{kern.log,messages,syslog} all failed"};
}

Status ReadLiveLog(const LiveLog& log, ReadOptions options, bool follow, const FollowOptions& follow_options,
                   const EventSink& sink, const StopRequested& should_stop, ReadStats* stats) {
  if (!options.parse.boot_time) options.parse.boot_time = BootTime();
  if (options.parse.source.empty()) options.parse.source = log.path;
  switch (log.kind) {
    case LiveLogKind::kFile: {
      if (follow) return FollowFile(log.path, std::move(options), follow_options, sink, should_stop);
      auto source = OpenLogFile(log.path);
      if (!source) return source.error();
      LogScanner scanner(std::move(options));
      ReadAll(**source, scanner, sink);
      if (stats) *stats = scanner.stats();
      if (!scanner.stats().error.empty()) return Error{scanner.stats().error};
      return Status::Ok();
    }
    case LiveLogKind::kKmsg: {
      int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) return Error{"/dev/kmsg: " + ErrnoText()};
      LogScanner scanner(std::move(options));
      Status status = Pump(fd, /*kmsg=*/true, follow, follow_options, scanner, sink, should_stop);
      ::close(fd);
      scanner.Finish(sink);
      if (stats) *stats = scanner.stats();
      return status;
    }
    case LiveLogKind::kJournal: {
      std::vector<std::string> argv = {"journalctl", "-k", "-b", "--no-pager", "-o", "short-iso-precise"};
      if (follow) argv.push_back("-f");
      auto process = Subprocess::Start(argv);
      if (!process) return process.error();
      if (follow) ::fcntl(process->fd(), F_SETFL, O_NONBLOCK);
      // The journal states every line's zone: no assumption is needed.
      LogScanner scanner(std::move(options));
      Status status = Pump(process->fd(), /*kmsg=*/false, follow, follow_options, scanner, sink, should_stop);
      scanner.Finish(sink);
      if (stats) *stats = scanner.stats();
      return status;
    }
  }
  return Status::Ok();
}

}  // namespace gpudoctor
