#include "health/detectors/file_tail.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

namespace gpudoctor {

FileTail::FileTail(std::string path, bool from_start) : path_(std::move(path)), from_start_(from_start) {}

FileTail::~FileTail() {
  if (fd_ >= 0) close(fd_);
}

void FileTail::Reopen() {
  if (fd_ >= 0) close(fd_);
  fd_ = open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  partial_.clear();
  offset_ = 0;
  if (fd_ < 0) return;
  struct stat info{};
  if (fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd_);
    fd_ = -1;
    return;
  }
  device_ = info.st_dev;
  inode_ = info.st_ino;
  // A file there at the first look may hold old history; one that appears later is all new.
  if (!looked_ && !from_start_) offset_ = info.st_size;
}

void FileTail::ReadAvailable(std::vector<std::string>& lines, size_t& budget) {
  struct stat info{};
  if (fstat(fd_, &info) == 0 && info.st_size < offset_) {  // truncated in place
    offset_ = 0;
    partial_.clear();
  }
  char buffer[64 * 1024];
  while (budget > 0) {
    const ssize_t got = pread(fd_, buffer, std::min(sizeof buffer, budget), offset_);
    if (got <= 0) return;
    offset_ += got;
    budget -= static_cast<size_t>(got);
    std::string_view chunk(buffer, static_cast<size_t>(got));
    for (size_t newline; (newline = chunk.find('\n')) != std::string_view::npos;) {
      partial_.append(chunk.substr(0, std::min(newline, kMaxLineBytes - std::min(partial_.size(), kMaxLineBytes))));
      if (!partial_.empty() && partial_.back() == '\r') partial_.pop_back();
      lines.push_back(std::move(partial_));
      partial_.clear();
      chunk.remove_prefix(newline + 1);
    }
    partial_.append(chunk.substr(0, kMaxLineBytes - std::min(partial_.size(), kMaxLineBytes)));
  }
}

std::vector<std::string> FileTail::ReadNewLines() {
  std::vector<std::string> lines;
  size_t budget = kMaxReadBytes;
  if (fd_ < 0) Reopen();
  looked_ = true;
  if (fd_ < 0) return lines;
  ReadAvailable(lines, budget);
  // Rotated: the path names another file now. Finish the old one, then switch.
  struct stat current{};
  if (stat(path_.c_str(), &current) == 0 && (current.st_dev != device_ || current.st_ino != inode_)) {
    Reopen();
    if (fd_ >= 0) ReadAvailable(lines, budget);
  }
  return lines;
}

bool FileTail::Changed() {
  struct stat info{};
  std::optional<Stamp> stamp;
  if (stat(path_.c_str(), &info) == 0)
    stamp = Stamp{info.st_dev, info.st_ino, info.st_size,
                  static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec};
  const bool changed = stamp && last_stamp_ && *stamp != *last_stamp_;
  const bool appeared = stamp && !last_stamp_ && looked_;
  looked_ = true;
  last_stamp_ = stamp;
  return changed || appeared;
}

}  // namespace gpudoctor
