// HostEnv: the only way the host signals touch the operating system.
//
// Every file read, directory listing and program run goes through this
// interface, so tests point it at a fake /proc and /sys tree and replace the
// programs it runs. Paths are written as on a live system ("/proc/loadavg");
// LinuxHostEnv resolves them under its root directory.
//
//   SubprocessRunner runner;
//   LinuxHostEnv env("/", runner);          // the live system
//   LinuxHostEnv fake("testdata/host/healthy", fake_runner);
//   Result<std::string> loadavg = fake.ReadFile("/proc/loadavg");
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "host/command_runner.h"

namespace gpudoctor {

enum class FileType { kRegular, kDirectory, kSymlink, kOther };

struct DirEntry {
  std::string name;
  FileType type = FileType::kOther;  // as the directory reports it (a symlink is kSymlink)
};

struct FileStatus {
  FileType type = FileType::kOther;  // after following symlinks
  uint64_t size_bytes = 0;
  WallTime modified;
};

struct FileSystemSpace {
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;  // available to unprivileged users
  uint64_t total_inodes = 0;     // 0 when the file system has no inode limit
  uint64_t available_inodes = 0;
  bool operator==(const FileSystemSpace&) const = default;
};

class HostEnv {
 public:
  virtual ~HostEnv() = default;

  // True when `path` exists (after following symlinks).
  virtual bool Exists(std::string_view path) const = 0;
  // The whole file, up to `max_bytes`. Works for /proc files whose size is 0.
  virtual Result<std::string> ReadFile(std::string_view path, size_t max_bytes = 1 << 20) const = 0;
  // Entries of a directory, without "." and "..", in no particular order.
  virtual Result<std::vector<DirEntry>> ListDir(std::string_view path) const = 0;
  // The target of a symbolic link, as stored in the link.
  virtual Result<std::string> ReadLink(std::string_view path) const = 0;
  virtual Result<FileStatus> Stat(std::string_view path) const = 0;
  virtual Result<FileSystemSpace> SpaceOf(std::string_view path) const = 0;
  virtual CommandResult RunCommand(const std::vector<std::string>& argv, Duration timeout) = 0;
};

// Reads the real file system under `root` ("/" on a live system) and runs
// programs through `runner`, which must outlive this object.
class LinuxHostEnv final : public HostEnv {
 public:
  LinuxHostEnv(std::string root, CommandRunner& runner);

  bool Exists(std::string_view path) const override;
  Result<std::string> ReadFile(std::string_view path, size_t max_bytes = 1 << 20) const override;
  Result<std::vector<DirEntry>> ListDir(std::string_view path) const override;
  Result<std::string> ReadLink(std::string_view path) const override;
  Result<FileStatus> Stat(std::string_view path) const override;
  Result<FileSystemSpace> SpaceOf(std::string_view path) const override;
  CommandResult RunCommand(const std::vector<std::string>& argv, Duration timeout) override;

 private:
  std::string Resolve(std::string_view path) const;

  std::string root_;
  CommandRunner& runner_;
};

}  // namespace gpudoctor
