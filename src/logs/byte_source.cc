#include "logs/byte_source.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace gpudoctor {

namespace {

std::string ErrnoText(int error) { return std::strerror(error); }

// Serves `prefix` first, then the rest of `inner`: lets us sniff the first
// bytes of a pipe without losing them.
class PrefixedSource final : public ByteSource {
 public:
  PrefixedSource(std::string prefix, std::unique_ptr<ByteSource> inner)
      : prefix_(std::move(prefix)), inner_(std::move(inner)) {}
  Result<size_t> Read(char* buffer, size_t capacity) override {
    if (offset_ < prefix_.size()) {
      size_t n = std::min(capacity, prefix_.size() - offset_);
      std::memcpy(buffer, prefix_.data() + offset_, n);
      offset_ += n;
      return n;
    }
    return inner_->Read(buffer, capacity);
  }
  const std::string& name() const override { return inner_->name(); }

 private:
  std::string prefix_;
  size_t offset_ = 0;
  std::unique_ptr<ByteSource> inner_;
};

class GzipSource final : public ByteSource {
 public:
  explicit GzipSource(std::unique_ptr<ByteSource> compressed)
      : compressed_(std::move(compressed)), input_(kInputSize) {
    stream_.zalloc = Z_NULL;
    stream_.zfree = Z_NULL;
    stream_.opaque = Z_NULL;
    // 15 + 16: gzip framing only.
    initialized_ = inflateInit2(&stream_, 15 + 16) == Z_OK;
  }
  ~GzipSource() override {
    if (initialized_) inflateEnd(&stream_);
  }

  Result<size_t> Read(char* buffer, size_t capacity) override {
    if (!initialized_) return Error{name() + ": cannot start the gzip decoder"};
    if (finished_) return TakeEndStatus();
    if (capacity == 0) return size_t{0};
    stream_.next_out = reinterpret_cast<Bytef*>(buffer);
    stream_.avail_out = static_cast<uInt>(std::min<size_t>(capacity, 1u << 30));
    while (stream_.avail_out > 0) {
      if (stream_.avail_in == 0) {
        auto n = compressed_->Read(reinterpret_cast<char*>(input_.data()), input_.size());
        if (!n) return n.error();
        if (*n == 0) {
          finished_ = true;
          truncated_ = member_open_;
          break;
        }
        stream_.next_in = input_.data();
        stream_.avail_in = static_cast<uInt>(*n);
      }
      member_open_ = true;
      int status = inflate(&stream_, Z_NO_FLUSH);
      if (status == Z_STREAM_END) {
        member_open_ = false;
        inflateReset(&stream_);  // another member may follow
        continue;
      }
      if (status == Z_BUF_ERROR) continue;  // needs more input
      if (status != Z_OK) {
        finished_ = true;
        error_ = name() + ": corrupt gzip data (" + (stream_.msg ? stream_.msg : "inflate failed") + ") after " +
                 std::to_string(decoded_ + (capacity - stream_.avail_out)) + " decoded bytes";
        break;
      }
    }
    size_t produced = capacity - stream_.avail_out;
    decoded_ += produced;
    if (produced > 0) return produced;
    return TakeEndStatus();
  }

  const std::string& name() const override { return compressed_->name(); }

 private:
  // After the last decoded byte: the end, or why the data stopped early
  // (reported once).
  Result<size_t> TakeEndStatus() {
    if (truncated_) {
      truncated_ = false;
      return Error{name() + ": truncated gzip data: the compressed stream ends early (" + std::to_string(decoded_) +
                   " bytes decoded)"};
    }
    if (!error_.empty()) {
      std::string error = std::move(error_);
      error_.clear();
      return Error{error};
    }
    return size_t{0};
  }

  static constexpr size_t kInputSize = 256 * 1024;
  std::unique_ptr<ByteSource> compressed_;
  std::vector<Bytef> input_;
  z_stream stream_{};
  bool initialized_ = false;
  bool member_open_ = false;
  bool finished_ = false;
  bool truncated_ = false;
  std::string error_;
  uint64_t decoded_ = 0;
};

}  // namespace

FdByteSource::FdByteSource(int fd, std::string name, bool owns_fd)
    : fd_(fd), name_(std::move(name)), owns_fd_(owns_fd) {}

FdByteSource::~FdByteSource() {
  if (owns_fd_ && fd_ >= 0) ::close(fd_);
}

Result<size_t> FdByteSource::Read(char* buffer, size_t capacity) {
  while (true) {
    ssize_t n = ::read(fd_, buffer, capacity);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    return Error{name_ + ": read failed: " + ErrnoText(errno)};
  }
}

MemoryByteSource::MemoryByteSource(std::string data, std::string name, size_t max_read)
    : data_(std::move(data)), name_(std::move(name)), max_read_(std::max<size_t>(max_read, 1)) {}

Result<size_t> MemoryByteSource::Read(char* buffer, size_t capacity) {
  size_t n = std::min({capacity, data_.size() - offset_, max_read_});
  std::memcpy(buffer, data_.data() + offset_, n);
  offset_ += n;
  return n;
}

std::unique_ptr<ByteSource> MakeGzipSource(std::unique_ptr<ByteSource> compressed) {
  return std::make_unique<GzipSource>(std::move(compressed));
}

Result<std::unique_ptr<ByteSource>> DecompressIfGzip(std::unique_ptr<ByteSource> source) {
  // Read until two bytes are in hand (a pipe may deliver one at a time).
  std::string head;
  char buffer[2];
  while (head.size() < 2) {
    auto n = source->Read(buffer, 2 - head.size());
    if (!n) return n.error();
    if (*n == 0) break;
    head.append(buffer, *n);
  }
  bool gzip = head.size() == 2 && static_cast<unsigned char>(head[0]) == 0x1f &&
              static_cast<unsigned char>(head[1]) == 0x8b;
  std::unique_ptr<ByteSource> whole = std::make_unique<PrefixedSource>(std::move(head), std::move(source));
  if (gzip) return MakeGzipSource(std::move(whole));
  return whole;
}

Result<std::unique_ptr<ByteSource>> OpenLogFile(const std::string& path) {
  if (path == "-") return DecompressIfGzip(std::make_unique<FdByteSource>(0, "-", /*owns_fd=*/false));
  auto file = InputFile::Open(path);
  if (!file) return file.error();
  return OpenLogFile(std::move(*file));
}

Result<std::unique_ptr<ByteSource>> OpenLogFile(InputFile file) {
  std::string name = file.path();
  return DecompressIfGzip(std::make_unique<FdByteSource>(file.Release(), std::move(name), /*owns_fd=*/true));
}

}  // namespace gpudoctor
