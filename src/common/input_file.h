// Input files: the one rule for every file a person names to gpudoctor (a
// config, a scenario, a captured nvidia-smi output, a kernel log, an event
// catalog, a token, a history database).
//
// A named input must be a regular file, or /dev/null, which reads as an empty
// file (as grep reads it). Its type is checked before it is
// opened (opening a device can have effects) and again on the open
// descriptor, which is opened with O_NONBLOCK so that a FIFO without a writer
// can never hang a command. Its size is capped by the caller. Standard input
// is read only when a person asks for it with "-", never through a path.
//
//   auto text = ReadInputFile("/etc/gpudoctor.toml", kMaxConfigFileBytes);
//   if (!text) return Fail(exit_code::kNoInput, text.error().message);
//   // "/etc/gpudoctor.toml: is a FIFO, not a regular file"
//
// Every message starts with the path: "no such file", "permission denied",
// "is a directory", "is a FIFO, not a regular file", "is a character
// device, not a regular file", "209715200 bytes, over the 1 MiB limit".
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>

#include "common/result.h"

namespace gpudoctor {

// Which part of the rule an input failed.
enum class InputFailure {
  kMissing,         // no such file
  kUnreadable,      // permission denied, I/O error, ...
  kNotRegularFile,  // a directory, FIFO, socket or device
};

// An open regular file, closed when the object goes.
class InputFile {
 public:
  // Opens `path` for reading under the rule above. When `failure` is given,
  // it is set to the reason of an error (the follower waits for a missing
  // file, triage goes on without one).
  static Result<InputFile> Open(const std::string& path, InputFailure* failure = nullptr);

  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  // fstat of the open descriptor: size, inode, modification time.
  const struct stat& status() const { return status_; }

  // Reads from the current offset to the end; a file over `max_bytes`
  // (when opened, or grown since) is an error that names the limit.
  Result<std::string> ReadAll(uint64_t max_bytes);

  // Hands the descriptor to a new owner, which must close it.
  int Release();

 private:
  InputFile(std::string path, int fd, const struct stat& status);

  std::string path_;
  int fd_ = -1;
  struct stat status_ {};
};

// InputFile::Open(path) and ReadAll(max_bytes) in one call.
Result<std::string> ReadInputFile(const std::string& path, uint64_t max_bytes);

// "1 MiB", "64 KiB", "100 bytes": how a size limit is written in messages.
std::string FormatSizeLimit(uint64_t bytes);

// strerror in lower case, as a reason reads after "PATH: ": "permission denied".
std::string ErrnoMessage(int error);

}  // namespace gpudoctor
