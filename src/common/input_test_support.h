// Test support for the input rule (common/input_file.h), for the unit tests
// and the end-to-end tests of every option that names a file: one path of
// each kind a named input may not be, read-only media, and a way to check
// permissions when the tests run as root.
//
//   input_testing::RefusedInputs refused;
//   for (const input_testing::RefusedInput& input : refused.All())
//     EXPECT_THAT(Gpudoctor("--config " + input.path).output, HasSubstr(input.message));
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/scratch_dir.h"

namespace gpudoctor::input_testing {

// Whether file permissions bind this process (root reads any file).
inline bool PermissionsApply() { return geteuid() != 0; }

// The unprivileged user that tests running as root drop to.
inline constexpr uid_t kNobody = 65534;

// Runs `check` in a child process as the user nobody and returns its exit
// status (-1 when the child could not become nobody): for tests of
// permissions when running as root, where they do not bind.
inline int ExitStatusAsNobody(const std::function<int()>& check) {
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(255);
    ::_exit(check());
  }
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status) == 255 ? -1 : WEXITSTATUS(status);
}

// Read-only media for tests: a tmpfs mounted on a fresh directory, filled,
// then remounted read-only. Mounting needs root (CAP_SYS_ADMIN); a test
// skips when Mount() fails. Unmounted on destruction.
class ReadOnlyMedia {
 public:
  ReadOnlyMedia() = default;
  ~ReadOnlyMedia() {
    if (mounted_) ::umount2(dir_.path().c_str(), MNT_DETACH);
  }
  ReadOnlyMedia(const ReadOnlyMedia&) = delete;
  ReadOnlyMedia& operator=(const ReadOnlyMedia&) = delete;

  bool Mount() {
    mounted_ = ::mount("gpudoctor-test", dir_.path().c_str(), "tmpfs", 0, "size=64m,mode=0755") == 0;
    return mounted_;
  }
  // Copies `file` in under its own name, while the media is still writable.
  void CopyIn(const std::string& file) const {
    std::filesystem::copy_file(file, dir_.path() / std::filesystem::path(file).filename());
  }
  bool MakeReadOnly() const {
    return ::mount(nullptr, dir_.path().c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) == 0;
  }
  std::string File(const std::string& name) const { return dir_.File(name); }

 private:
  testing::ScratchDir dir_;
  bool mounted_ = false;
};

struct RefusedInput {
  std::string kind;     // "missing", "directory", "FIFO", ...
  std::string path;
  std::string message;  // what the refusal must say, after the path
};

// One path of each refused kind. The FIFO's write end is held open here, so
// a reader that wrongly opens it blocking is not stuck in open() (tests of
// the binary also run it under a time limit, as its read would wait).
class RefusedInputs {
 public:
  RefusedInputs() {
    ::chmod(dir_.path().c_str(), 0755);  // an unprivileged reader reaches each path, and is refused by it
    std::filesystem::create_directory(dir_.File("directory"));
    ::mkfifo(dir_.File("fifo").c_str(), 0600);
    fifo_writer_ = ::open(dir_.File("fifo").c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    socket_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::string socket_path = dir_.File("socket");
    if (socket_path.size() < sizeof address.sun_path) {
      std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
      (void)::bind(socket_, reinterpret_cast<const sockaddr*>(&address), sizeof address);
    }
    dir_.Write("unreadable", "secret\n");
    ::chmod(dir_.File("unreadable").c_str(), 0);
  }
  ~RefusedInputs() {
    if (fifo_writer_ >= 0) ::close(fifo_writer_);
    if (socket_ >= 0) ::close(socket_);
  }
  RefusedInputs(const RefusedInputs&) = delete;
  RefusedInputs& operator=(const RefusedInputs&) = delete;

  RefusedInput Missing() const { return {"missing", dir_.File("missing.toml"), "no such file"}; }
  RefusedInput Directory() const { return {"directory", dir_.File("directory"), "is a directory"}; }
  RefusedInput Fifo() const { return {"FIFO", dir_.File("fifo"), "is a FIFO, not a regular file"}; }
  RefusedInput Socket() const { return {"socket", dir_.File("socket"), "is a socket, not a regular file"}; }
  RefusedInput CharacterDevice() const {
    return {"character device", "/dev/zero", "is a character device, not a regular file"};
  }
  RefusedInput Unreadable() const { return {"unreadable", dir_.File("unreadable"), "permission denied"}; }

  // Every kind; the unreadable file only where permissions bind (not as root).
  std::vector<RefusedInput> All() const {
    std::vector<RefusedInput> all = {Missing(), Directory(), Fifo(), Socket(), CharacterDevice()};
    if (PermissionsApply()) all.push_back(Unreadable());
    return all;
  }

  const testing::ScratchDir& dir() const { return dir_; }

 private:
  testing::ScratchDir dir_;
  int fifo_writer_ = -1;
  int socket_ = -1;
};

}  // namespace gpudoctor::input_testing
