// FileTail: follows a growing text file like `tail -F`, returning only what
// was appended since the last call. Survives rotation (the path now names a
// new file: the rest of the old one is read, then the new one from its
// start) and truncation (reading restarts at the top). Linux/POSIX.
//
//   FileTail tail("/scratch/job/train.log");
//   for (const std::string& line : tail.ReadNewLines()) ...   // complete lines only
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpudoctor {

class FileTail {
 public:
  // `from_start`: read what the file already holds; otherwise start at its end.
  explicit FileTail(std::string path, bool from_start = false);
  ~FileTail();
  FileTail(const FileTail&) = delete;
  FileTail& operator=(const FileTail&) = delete;

  // Complete lines appended since the last call, without their newlines. A
  // line longer than kMaxLineBytes is cut; at most kMaxReadBytes are read per call.
  std::vector<std::string> ReadNewLines();

  // For heartbeat files: whether the file was created, rewritten, touched or
  // replaced since the last call (its identity, size or modification time changed).
  bool Changed();

  bool exists() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

  static constexpr size_t kMaxLineBytes = 64 * 1024;
  static constexpr size_t kMaxReadBytes = 4 * 1024 * 1024;

 private:
  void Reopen();
  void ReadAvailable(std::vector<std::string>& lines, size_t& budget);

  std::string path_;
  bool from_start_;
  bool looked_ = false;  // the first call has happened
  int fd_ = -1;
  dev_t device_ = 0;
  ino_t inode_ = 0;
  off_t offset_ = 0;
  std::string partial_;  // an unfinished last line
  struct Stamp {
    dev_t device;
    ino_t inode;
    off_t size;
    int64_t mtime_ns;
    bool operator==(const Stamp&) const = default;
  };
  std::optional<Stamp> last_stamp_;
};

}  // namespace gpudoctor
