// ByteSource: where log bytes come from. Files, standard input, pipes from a
// subprocess, and gzip streams (decoded on the fly) all look the same to the
// reader, which asks for the next block until the source says it is done.
//
//   auto source = OpenLogFile("/var/log/kern.log.2.gz");   // gzip detected by content
//   char buffer[65536];
//   while (true) { auto n = (*source)->Read(buffer, sizeof buffer); if (!n || *n == 0) break; ... }
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "common/input_file.h"
#include "common/result.h"

namespace gpudoctor {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to `capacity` bytes. 0 means the end of the data. An error means
  // the rest cannot be read (bytes returned before it stay valid).
  virtual Result<size_t> Read(char* buffer, size_t capacity) = 0;
  // How the source is named in events and messages: a path, "-", "/dev/kmsg".
  virtual const std::string& name() const = 0;
};

// Reads a file descriptor it owns (or standard input, which it does not close).
class FdByteSource final : public ByteSource {
 public:
  FdByteSource(int fd, std::string name, bool owns_fd);
  ~FdByteSource() override;
  Result<size_t> Read(char* buffer, size_t capacity) override;
  const std::string& name() const override { return name_; }

 private:
  int fd_;
  std::string name_;
  bool owns_fd_;
};

// Serves bytes from memory; for tests and fuzzing.
class MemoryByteSource final : public ByteSource {
 public:
  MemoryByteSource(std::string data, std::string name, size_t max_read = SIZE_MAX);
  Result<size_t> Read(char* buffer, size_t capacity) override;
  const std::string& name() const override { return name_; }

 private:
  std::string data_;
  size_t offset_ = 0;
  std::string name_;
  size_t max_read_;
};

// Decodes gzip data (several concatenated members too) from another source.
// A stream cut short is an error after all the bytes that could be decoded.
std::unique_ptr<ByteSource> MakeGzipSource(std::unique_ptr<ByteSource> compressed);

// Wraps `source` in a gzip decoder when its data starts with the gzip magic
// bytes; otherwise returns a source with the same bytes.
Result<std::unique_ptr<ByteSource>> DecompressIfGzip(std::unique_ptr<ByteSource> source);

// Opens a log file ("-" is standard input), decoding gzip by content. A
// named file must pass the input rule (common/input_file.h): a FIFO or a
// device is refused, never read.
Result<std::unique_ptr<ByteSource>> OpenLogFile(const std::string& path);

// The same for a file already opened under the input rule.
Result<std::unique_ptr<ByteSource>> OpenLogFile(InputFile file);

}  // namespace gpudoctor
