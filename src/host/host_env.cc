#include "host/host_env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace gpudoctor {
namespace {

Error ErrnoError(const std::string& what, const std::string& path) {
  return Error{what + " " + path + ": " + std::strerror(errno)};
}

FileType FromMode(mode_t mode) {
  if (S_ISREG(mode)) return FileType::kRegular;
  if (S_ISDIR(mode)) return FileType::kDirectory;
  if (S_ISLNK(mode)) return FileType::kSymlink;
  return FileType::kOther;
}

FileType FromDirentType(unsigned char type) {
  switch (type) {
    case DT_REG: return FileType::kRegular;
    case DT_DIR: return FileType::kDirectory;
    case DT_LNK: return FileType::kSymlink;
    default: return FileType::kOther;
  }
}

}  // namespace

LinuxHostEnv::LinuxHostEnv(std::string root, CommandRunner& runner) : root_(std::move(root)), runner_(runner) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
}

std::string LinuxHostEnv::Resolve(std::string_view path) const {
  if (root_ == "/" || root_.empty()) return std::string(path);
  std::string resolved = root_;
  if (path.empty() || path.front() != '/') resolved += '/';
  resolved += path;
  return resolved;
}

bool LinuxHostEnv::Exists(std::string_view path) const {
  struct stat st;
  return ::stat(Resolve(path).c_str(), &st) == 0;
}

Result<std::string> LinuxHostEnv::ReadFile(std::string_view path, size_t max_bytes) const {
  const std::string full = Resolve(path);
  int fd = ::open(full.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", std::string(path));
  std::string content;
  std::array<char, 16384> buffer;
  while (content.size() < max_bytes) {
    ssize_t n = ::read(fd, buffer.data(), std::min(buffer.size(), max_bytes - content.size()));
    if (n < 0) {
      if (errno == EINTR) continue;
      Error error = ErrnoError("cannot read", std::string(path));
      ::close(fd);
      return error;
    }
    if (n == 0) break;
    content.append(buffer.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return content;
}

Result<std::vector<DirEntry>> LinuxHostEnv::ListDir(std::string_view path) const {
  const std::string full = Resolve(path);
  DIR* dir = ::opendir(full.c_str());
  if (dir == nullptr) return ErrnoError("cannot list", std::string(path));
  std::vector<DirEntry> entries;
  while (const dirent* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    FileType type = FromDirentType(entry->d_type);
    if (entry->d_type == DT_UNKNOWN) {
      struct stat st;
      if (::fstatat(::dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) type = FromMode(st.st_mode);
    }
    entries.push_back({std::string(name), type});
  }
  ::closedir(dir);
  return entries;
}

Result<std::string> LinuxHostEnv::ReadLink(std::string_view path) const {
  const std::string full = Resolve(path);
  std::array<char, 4096> buffer;
  ssize_t n = ::readlink(full.c_str(), buffer.data(), buffer.size());
  if (n < 0) return ErrnoError("cannot read link", std::string(path));
  return std::string(buffer.data(), static_cast<size_t>(n));
}

Result<FileStatus> LinuxHostEnv::Stat(std::string_view path) const {
  struct stat st;
  if (::stat(Resolve(path).c_str(), &st) != 0) return ErrnoError("cannot stat", std::string(path));
  FileStatus status;
  status.type = FromMode(st.st_mode);
  status.size_bytes = static_cast<uint64_t>(st.st_size);
  status.modified = WallTime{std::chrono::duration_cast<WallTime::duration>(
      std::chrono::seconds{st.st_mtim.tv_sec} + std::chrono::nanoseconds{st.st_mtim.tv_nsec})};
  return status;
}

Result<FileSystemSpace> LinuxHostEnv::SpaceOf(std::string_view path) const {
  struct statvfs vfs;
  if (::statvfs(Resolve(path).c_str(), &vfs) != 0) return ErrnoError("cannot statvfs", std::string(path));
  FileSystemSpace space;
  space.total_bytes = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
  space.available_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  space.total_inodes = vfs.f_files;
  space.available_inodes = vfs.f_favail;
  return space;
}

CommandResult LinuxHostEnv::RunCommand(const std::vector<std::string>& argv, Duration timeout) {
  return runner_.Run(argv, timeout);
}

}  // namespace gpudoctor
