// The wire format between the collector and its probe process.
//
// Both ends are the same gpudoctor binary, talking over a pipe, so the format
// is plain and fast rather than self-describing: length-prefixed binary
// frames in native byte order.
//
//   frame   := u32 payload_length, payload
//   payload := u8 kind, body
//   GPU body := u32 index, record*, u8 0xff, u8 access_error, string access_message
//   record  := u8 position (rising; kScalarGpuFields, then processes, NVLinks), field
//   field   := u8 state, value | error text
//
// A GPU field that is not supported has no record. The probe writes GPU
// frames as it reads (GpuFrameEncoder, nvml/probe_wire_writer.h); the rest go
// through AppendProbeFrame.
//
// A snapshot of 8 GPUs is a few KB and costs microseconds to write and read.
// Reading checks every length against what is there: a truncated or garbled
// frame is rejected, never trusted.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>

#include "common/clock.h"
#include "common/result.h"
#include "model/snapshot.h"

namespace gpudoctor {

// More GPUs than any server holds: a larger count from NVML (or from a
// garbled probe) is an error, never a number of GPUs to read or wait for.
inline constexpr uint32_t kMaxGpuCount = 1024;
std::string ImpossibleGpuCountMessage(uint64_t count);

// Parent to probe: read everything once.
struct ProbeRequest {
  std::set<uint32_t> skip_gpus;  // GPUs an older, still-stuck probe is holding
  Duration event_window{};       // how long to listen for Xid events
  bool operator==(const ProbeRequest&) const = default;
};

// Probe to parent, in this order for each request: one ProbeHost (or
// ProbeInitFailed, after which the probe exits), then a GpuSnapshot per GPU
// as it is read, then the XidEvents seen, then ProbeDone. (A GPU's PCI id
// also goes to the shared CallTracker as soon as it is known, nvml/probe.h.)
struct ProbeHost {
  Field<std::string> driver_version;
  Field<std::string> nvml_version;
  Field<int32_t> cuda_driver_version;
  Field<uint32_t> device_count;
  bool operator==(const ProbeHost&) const = default;
};
struct ProbeInitFailed {
  AccessError error = AccessError::kOther;
  std::string message;
  bool operator==(const ProbeInitFailed&) const = default;
};
struct ProbeDone {
  bool operator==(const ProbeDone&) const = default;
};

using ProbeMessage =
    std::variant<ProbeRequest, ProbeHost, ProbeInitFailed, GpuSnapshot, XidEvent, ProbeDone>;

// One whole frame, length prefix included.
std::string EncodeProbeMessage(const ProbeMessage& message);
// Appends one whole frame for `message`, one of ProbeMessage's alternatives,
// to `out`: no copy of the message into a variant, no temporary frame.
template <typename Message>
void AppendProbeFrame(std::string& out, const Message& message);

// Decodes one frame's payload (without its length prefix) into `message`,
// which is left unspecified on error.
Status DecodeProbeMessage(std::string_view payload, ProbeMessage& message);

// The collector's hot path: whether a payload is a GpuSnapshot frame, and
// decoding one straight into `gpu`, with no variant and no move. `gpu` may
// hold an earlier GPU: every part of it is replaced, and its strings and
// lists keep their memory. Left unspecified on error.
bool IsGpuSnapshotFrame(std::string_view payload);
Status DecodeGpuSnapshot(std::string_view payload, GpuSnapshot& gpu);

// Collects bytes from the pipe and hands out whole frames.
class ProbeFrameBuffer {
 public:
  static constexpr uint32_t kMaxFrameBytes = 16u << 20;

  void Append(std::string_view bytes);
  // Reads once from `fd` straight into the buffer, at most `most` bytes; what
  // read(2) returns. Saves the copy through a separate chunk.
  ssize_t ReadFrom(int fd, size_t most);
  // The next whole frame's payload, valid until the next Append, ReadFrom,
  // Next or Clear; nullopt when more bytes are needed, or for good once corrupt().
  std::optional<std::string_view> Next();
  // A frame announced more than kMaxFrameBytes: the stream cannot be trusted.
  bool corrupt() const { return corrupt_; }
  // Starts over, keeping the memory for the next stream.
  void Clear();

 private:
  // Room for `size` more bytes after the ones held, dropping consumed ones first.
  char* Room(size_t size);

  std::string buffer_;  // bytes [consumed_, size_) are held; the rest is spare room
  size_t size_ = 0;
  size_t consumed_ = 0;
  bool corrupt_ = false;
};

}  // namespace gpudoctor
