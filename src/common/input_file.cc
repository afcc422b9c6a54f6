#include "common/input_file.h"

#include <fcntl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

namespace gpudoctor {
namespace {

struct Refusal {
  InputFailure failure;
  std::string why;
};

Refusal RefusalForErrno(int error) {
  if (error == ENOENT || error == ENOTDIR) return {InputFailure::kMissing, "no such file"};
  return {InputFailure::kUnreadable, ErrnoMessage(error)};
}

// The null device: always empty, and opening it has no effect.
bool IsNullDevice(const struct stat& status) {
  return S_ISCHR(status.st_mode) && major(status.st_rdev) == 1 && minor(status.st_rdev) == 3;
}

// Why a file of this type is not read, or nothing for a regular file (and the null device).
std::optional<Refusal> RefusalForType(const struct stat& status) {
  auto not_regular = [](const char* what) {
    return Refusal{InputFailure::kNotRegularFile, std::string("is a ") + what + ", not a regular file"};
  };
  const mode_t mode = status.st_mode;
  if (S_ISREG(mode) || IsNullDevice(status)) return std::nullopt;
  if (S_ISDIR(mode)) return Refusal{InputFailure::kNotRegularFile, "is a directory"};
  if (S_ISFIFO(mode)) return not_regular("FIFO");
  if (S_ISSOCK(mode)) return not_regular("socket");
  if (S_ISCHR(mode)) return not_regular("character device");
  if (S_ISBLK(mode)) return not_regular("block device");
  return not_regular("special file");
}

Error Refuse(const std::string& path, const Refusal& refusal, InputFailure* failure) {
  if (failure) *failure = refusal.failure;
  return Error{path + ": " + refusal.why};
}

Error TooLarge(const std::string& path, uint64_t size, uint64_t max_bytes) {
  return Error{path + ": " + std::to_string(size) + " bytes, over the " + FormatSizeLimit(max_bytes) + " limit"};
}

}  // namespace

Result<InputFile> InputFile::Open(const std::string& path, InputFailure* failure) {
  // The type is checked by name first so that a device is never opened
  // (opening one can rewind a tape or arm a watchdog), then on the
  // descriptor, in case the name was replaced in between.
  struct stat by_name {};
  if (::stat(path.c_str(), &by_name) != 0) return Refuse(path, RefusalForErrno(errno), failure);
  if (auto refusal = RefusalForType(by_name)) return Refuse(path, *refusal, failure);

  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return Refuse(path, RefusalForErrno(errno), failure);
  InputFile file(path, fd, by_name);
  if (::fstat(fd, &file.status_) != 0) return Refuse(path, RefusalForErrno(errno), failure);
  if (auto refusal = RefusalForType(file.status_)) return Refuse(path, *refusal, failure);
  // Reads of a regular file never block; followers wait with poll or sleep.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return file;
}

InputFile::InputFile(std::string path, int fd, const struct stat& status)
    : path_(std::move(path)), fd_(fd), status_(status) {}

InputFile::InputFile(InputFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), status_(other.status_) {}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    status_ = other.status_;
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

int InputFile::Release() { return std::exchange(fd_, -1); }

Result<std::string> InputFile::ReadAll(uint64_t max_bytes) {
  const uint64_t size = static_cast<uint64_t>(status_.st_size);
  if (size > max_bytes) return TooLarge(path_, size, max_bytes);
  std::string text;
  text.reserve(size);
  char buffer[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd_, buffer, sizeof buffer);
    if (n == 0) return text;
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error{path_ + ": read failed: " + ErrnoMessage(errno)};
    }
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > max_bytes)
      return Error{path_ + ": grew past the " + FormatSizeLimit(max_bytes) + " limit while it was read"};
  }
}

Result<std::string> ReadInputFile(const std::string& path, uint64_t max_bytes) {
  auto file = InputFile::Open(path);
  if (!file) return file.error();
  return file->ReadAll(max_bytes);
}

std::string ErrnoMessage(int error) {
  std::string text = std::strerror(error);
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

std::string FormatSizeLimit(uint64_t bytes) {
  constexpr uint64_t kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
  if (bytes >= kGiB && bytes % kGiB == 0) return std::to_string(bytes / kGiB) + " GiB";
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  if (bytes >= kKiB && bytes % kKiB == 0) return std::to_string(bytes / kKiB) + " KiB";
  return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
}

}  // namespace gpudoctor
