#include "nvml/probe_wire.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "model/gpu_fields.h"
#include "nvml/probe_wire_writer.h"

namespace gpudoctor {
namespace {

using probe_wire_detail::Kind;
using probe_wire_detail::Writer;

// Reads values back; every read checks what is left, and the first short or
// impossible value makes the whole frame invalid.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}

  bool ok() const { return ok_; }
  void Fail() { ok_ = false; }
  bool at_end() const { return data_.empty(); }

  template <typename T>
    requires std::is_arithmetic_v<T>
  void Get(T& value) {
    if constexpr (std::is_same_v<T, bool>) {
      uint8_t byte = 0;
      Get(byte);
      if (byte > 1) ok_ = false;
      value = byte == 1;
    } else {
      if (!Take(sizeof(T))) return;
      std::memcpy(&value, taken_, sizeof(T));
      // The probe only sends finite readings; NaN would also poison every comparison a rule makes.
      if constexpr (std::is_floating_point_v<T>) {
        if (!std::isfinite(value)) ok_ = false;
      }
    }
  }
  void Get(AccessError& error) {
    uint8_t byte = 0;
    Get(byte);
    if (byte > static_cast<uint8_t>(AccessError::kOther)) ok_ = false;
    error = static_cast<AccessError>(byte);
  }
  void Get(std::string& text) {
    uint32_t size = 0;
    Get(size);
    if (!Take(size)) return;
    // Sized then copied: a string refilled with a value of the same length,
    // as a GPU's name or UUID is from one snapshot to the next, only copies.
    text.resize(size);
    std::memcpy(text.data(), taken_, size);
  }
  void Get(ProcessInfo& process) {
    Get(process.pid);
    Get(process.name);
    Get(process.used_memory_bytes);
  }
  // A GPU's links (Writer::Put(const NvLinkInfo&)). Nearly every link has
  // all five values and is read with one bounds check, through a local cursor.
  void Get(std::vector<NvLinkInfo>& links) {
    if (!GetCount(links)) return;
    const char* at = data_.data();
    size_t left = data_.size();
    for (NvLinkInfo& link : links) {
      if (ReadFullNvLink(at, left, link)) {
        at += probe_wire_detail::kNvLinkAllValuesSize;
        left -= probe_wire_detail::kNvLinkAllValuesSize;
        continue;
      }
      data_ = std::string_view(at, left);
      GetAnyNvLink(link);
      if (!ok_) return;
      at = data_.data();
      left = data_.size();
    }
    data_ = std::string_view(at, left);
  }
  // Reads a link with all five values at `at` into `link`; false when the
  // bytes there are not one (or not whole), and nothing is read.
  [[gnu::always_inline]] static bool ReadFullNvLink(const char* at, size_t left, NvLinkInfo& link) {
    using namespace probe_wire_detail;
    if (left < kNvLinkAllValuesSize || at[kNvLinkMaskAt] != static_cast<char>(kNvLinkAllValues)) return false;
    const auto active = static_cast<uint8_t>(at[kNvLinkActiveAt]);
    if (active > 1) return false;  // the general reader rejects it
    uint64_t counters[4];
    std::memcpy(&link.link, at, sizeof link.link);
    std::memcpy(counters, at + kNvLinkCountersAt, sizeof counters);
    link.active.SetValue(active == 1);
    link.replay_errors.SetValue(counters[0]);
    link.recovery_errors.SetValue(counters[1]);
    link.crc_flit_errors.SetValue(counters[2]);
    link.crc_data_errors.SetValue(counters[3]);
    return true;
  }
  [[gnu::noinline]] void GetAnyNvLink(NvLinkInfo& link) {
    using probe_wire_detail::kNvLinkAllValues;
    uint8_t mask = 0;
    Get(link.link);
    Get(mask);
    if (mask > kNvLinkAllValues) ok_ = false;
    uint8_t bit = 1;
    auto field = [this, mask, &bit](const char*, auto& value) {
      using T = typename std::remove_reference_t<decltype(value)>::value_type;
      if (mask & bit) {
        T read{};
        Get(read);
        value.SetValue(read);
      } else {
        GetAny(value);
        if (value.has_value()) ok_ = false;  // a value belongs in the mask: one encoding only
      }
      bit = static_cast<uint8_t>(bit << 1);
    };
    VisitNvLinkFields(field, link);
  }
  template <typename T>
  void Get(std::vector<T>& items) {
    if (!GetCount(items)) return;
    for (T& item : items) Get(item);
  }
  // A list's count, checked, and `items` sized to it; false when the frame is bad.
  template <typename T>
  bool GetCount(std::vector<T>& items) {
    uint32_t count = 0;
    Get(count);
    // Each item takes at least one byte: a count beyond what is left is garbage.
    if (!ok_ || count > data_.size()) {
      ok_ = false;
      return false;
    }
    items.resize(count);
    return true;
  }
  // A field and the position byte after it, as a GPU frame has them: for a
  // number or flag, one bounds check for the three.
  template <typename T>
  [[gnu::always_inline]] void GetRecord(Field<T>& field, uint8_t& next) {
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool> && !std::is_floating_point_v<T>) {
      if (ok_ && data_.size() >= 2 + sizeof(T) && data_[0] == static_cast<char>(FieldState::kValue)) {
        T value;
        std::memcpy(&value, data_.data() + 1, sizeof(T));
        next = static_cast<uint8_t>(data_[1 + sizeof(T)]);
        field.SetValue(value);
        data_.remove_prefix(2 + sizeof(T));
        return;
      }
    }
    Get(field);
    Get(next);
  }

  template <typename T>
  void Get(Field<T>& field) {
    if constexpr (std::is_arithmetic_v<T>) {
      // The common case, a number or flag, with one bounds check for state and value.
      using Wire = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
      if (ok_ && data_.size() > sizeof(Wire) && data_[0] == static_cast<char>(FieldState::kValue)) {
        Wire value;
        std::memcpy(&value, data_.data() + 1, sizeof(Wire));
        if constexpr (std::is_same_v<T, bool>) {
          if (value > 1) {
            ok_ = false;
            return;
          }
        } else if constexpr (std::is_floating_point_v<T>) {
          if (!std::isfinite(value)) {
            ok_ = false;
            return;
          }
        }
        field.SetValue(static_cast<T>(value));
        data_.remove_prefix(1 + sizeof(Wire));
        return;
      }
    }
    GetAny(field);
  }

 private:
  // Any field state, out of line so that the numeric fast path above stays
  // small enough to inline.
  template <typename T>
  [[gnu::noinline]] void GetAny(Field<T>& field) {
    uint8_t state = 0;
    Get(state);
    if (!ok_) return;
    switch (static_cast<FieldState>(state)) {
      case FieldState::kNotSupported:
        field.SetNotSupported();
        return;
      case FieldState::kValue:
        // In place: a string or list that held an earlier value keeps its memory.
        Get(field.MutableValue());
        return;
      case FieldState::kError: {
        std::string message;
        Get(message);
        field.SetFailed(std::move(message));
        return;
      }
    }
    ok_ = false;
  }

  bool Take(size_t size) {
    if (!ok_ || size > data_.size()) {
      ok_ = false;
      return false;
    }
    taken_ = data_.data();
    data_.remove_prefix(size);
    return true;
  }

  std::string_view data_;
  const char* taken_ = nullptr;
  bool ok_ = true;
};

int64_t ToNanos(WallTime time) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count();
}
WallTime FromNanos(int64_t nanos) {
  return WallTime(std::chrono::duration_cast<WallTime::duration>(std::chrono::nanoseconds(nanos)));
}

// One overload per message: the body of its frame, both ways.
void Write(Writer& w, const ProbeRequest& request) {
  w.Put(static_cast<int64_t>(request.event_window.count()));
  w.Put(std::vector<uint32_t>(request.skip_gpus.begin(), request.skip_gpus.end()));
}
void Read(Reader& r, ProbeRequest& request) {
  int64_t window = 0;
  std::vector<uint32_t> skip;
  r.Get(window);
  r.Get(skip);
  request.event_window = Duration(window);
  request.skip_gpus = std::set<uint32_t>(skip.begin(), skip.end());
}

template <typename Io, typename Host>
void VisitHost(Io& io, Host& host) {
  io(host.driver_version);
  io(host.nvml_version);
  io(host.cuda_driver_version);
  io(host.device_count);
}
void Write(Writer& w, const ProbeHost& host) {
  auto put = [&w](const auto& value) { w.Put(value); };
  VisitHost(put, host);
}
void Read(Reader& r, ProbeHost& host) {
  auto get = [&r](auto& value) { r.Get(value); };
  VisitHost(get, host);
}

void Write(Writer& w, const ProbeInitFailed& failed) {
  w.Put(failed.error);
  w.Put(failed.message);
}
void Read(Reader& r, ProbeInitFailed& failed) {
  r.Get(failed.error);
  r.Get(failed.message);
}

// A GPU frame: the index, then a record per field that is not "not
// supported" (nvml/probe_wire_writer.h), then the access error.
void Write(Writer& w, const GpuSnapshot& gpu) {
  w.Put(gpu.index);
  uint8_t position = 0;
  auto field = [&w, &position](const char*, const auto& value) {
    if (!value.not_supported()) {
      w.Put(position);
      w.Put(value);
    }
    ++position;
  };
  VisitScalarGpuFields(field, gpu);
  if (!gpu.processes.not_supported()) {
    w.Put(probe_wire_detail::kGpuProcesses);
    w.Put(gpu.processes);
  }
  if (!gpu.nvlinks.not_supported()) {
    w.Put(probe_wire_detail::kGpuNvLinks);
    w.Put(gpu.nvlinks);
  }
  w.Put(probe_wire_detail::kGpuEnd);
  w.Put(gpu.access_error);
  w.Put(gpu.access_message);
}
void Read(Reader& r, GpuSnapshot& gpu) {
  r.Get(gpu.index);
  uint8_t next = 0;
  r.Get(next);
  uint8_t position = 0;
  // Every field is set, a record or "not supported", so `gpu` may hold an
  // earlier GPU whose memory is reused.
  // Inlined for each of the ~45 fields: a call per field would cost more than the field.
  auto field = [&r, &next, &position](const char*, auto& value) __attribute__((always_inline)) {
    if (next == position++) {
      r.GetRecord(value, next);
    } else {
      value.SetNotSupported();
    }
  };
  VisitScalarGpuFields(field, gpu);
  if (next == probe_wire_detail::kGpuProcesses) {
    r.Get(gpu.processes);
    r.Get(next);
  } else {
    gpu.processes.SetNotSupported();
  }
  if (next == probe_wire_detail::kGpuNvLinks) {
    r.Get(gpu.nvlinks);
    r.Get(next);
  } else {
    gpu.nvlinks.SetNotSupported();
  }
  if (next != probe_wire_detail::kGpuEnd) r.Fail();  // out of order, or unknown
  r.Get(gpu.access_error);
  r.Get(gpu.access_message);
}

void Write(Writer& w, const XidEvent& xid) {
  w.Put(xid.gpu_index);
  w.Put(xid.xid);
  w.Put(ToNanos(xid.time));
}
void Read(Reader& r, XidEvent& xid) {
  int64_t nanos = 0;
  r.Get(xid.gpu_index);
  r.Get(xid.xid);
  r.Get(nanos);
  xid.time = FromNanos(nanos);
}

void Write(Writer&, const ProbeDone&) {}
void Read(Reader&, ProbeDone&) {}

constexpr Kind KindOf(const ProbeRequest&) { return Kind::kRequest; }
constexpr Kind KindOf(const ProbeHost&) { return Kind::kHost; }
constexpr Kind KindOf(const ProbeInitFailed&) { return Kind::kInitFailed; }
constexpr Kind KindOf(const GpuSnapshot&) { return Kind::kGpu; }
constexpr Kind KindOf(const XidEvent&) { return Kind::kXid; }
constexpr Kind KindOf(const ProbeDone&) { return Kind::kDone; }

// Reads the body in place: no copy of a GPU's strings, and no variant moves.
template <typename Message>
Status ReadBody(Reader& reader, Message& body) {
  Read(reader, body);
  if (!reader.ok()) return Error{"probe message is truncated or malformed"};
  if (!reader.at_end()) return Error{"probe message has trailing bytes"};
  return Status::Ok();
}
template <typename Message>
Status EmplaceBody(Reader& reader, ProbeMessage& message) {
  return ReadBody(reader, message.emplace<Message>());
}

}  // namespace

template <typename Message>
void AppendProbeFrame(std::string& out, const Message& message) {
  Writer writer(out, KindOf(message));
  Write(writer, message);
  writer.Finish();
}
template void AppendProbeFrame(std::string&, const ProbeRequest&);
template void AppendProbeFrame(std::string&, const ProbeHost&);
template void AppendProbeFrame(std::string&, const ProbeInitFailed&);
template void AppendProbeFrame(std::string&, const GpuSnapshot&);
template void AppendProbeFrame(std::string&, const XidEvent&);
template void AppendProbeFrame(std::string&, const ProbeDone&);

std::string EncodeProbeMessage(const ProbeMessage& message) {
  std::string frame;
  std::visit([&frame](const auto& body) { AppendProbeFrame(frame, body); }, message);
  return frame;
}

std::string ImpossibleGpuCountMessage(uint64_t count) {
  return "NVML reported " + std::to_string(count) + " GPUs, more than any server holds (at most " +
         std::to_string(kMaxGpuCount) + ")";
}

bool IsGpuSnapshotFrame(std::string_view payload) {
  return !payload.empty() && static_cast<Kind>(payload[0]) == Kind::kGpu;
}

Status DecodeGpuSnapshot(std::string_view payload, GpuSnapshot& gpu) {
  if (!IsGpuSnapshotFrame(payload)) return Error{"not a GPU snapshot frame"};
  Reader reader(payload.substr(1));
  return ReadBody(reader, gpu);
}

Status DecodeProbeMessage(std::string_view payload, ProbeMessage& message) {
  Reader reader(payload);
  uint8_t kind = 0;
  reader.Get(kind);
  if (!reader.ok()) return Error{"empty probe message"};
  switch (static_cast<Kind>(kind)) {
    case Kind::kRequest:
      return EmplaceBody<ProbeRequest>(reader, message);
    case Kind::kHost:
      return EmplaceBody<ProbeHost>(reader, message);
    case Kind::kInitFailed:
      return EmplaceBody<ProbeInitFailed>(reader, message);
    case Kind::kGpu:
      return EmplaceBody<GpuSnapshot>(reader, message);
    case Kind::kXid:
      return EmplaceBody<XidEvent>(reader, message);
    case Kind::kDone:
      return EmplaceBody<ProbeDone>(reader, message);
  }
  return Error{"unknown probe message kind " + std::to_string(kind)};
}

char* ProbeFrameBuffer::Room(size_t size) {
  if (consumed_ > 0 && consumed_ >= size_ / 2) {
    std::memmove(buffer_.data(), buffer_.data() + consumed_, size_ - consumed_);
    size_ -= consumed_;
    consumed_ = 0;
  }
  if (buffer_.size() - size_ < size) buffer_.resize(std::max(size_ + size, buffer_.size() * 2));
  return buffer_.data() + size_;
}

void ProbeFrameBuffer::Append(std::string_view bytes) {
  std::memcpy(Room(bytes.size()), bytes.data(), bytes.size());
  size_ += bytes.size();
}

ssize_t ProbeFrameBuffer::ReadFrom(int fd, size_t most) {
  ssize_t n = ::read(fd, Room(most), most);
  if (n > 0) size_ += static_cast<size_t>(n);
  return n;
}

void ProbeFrameBuffer::Clear() {
  size_ = consumed_ = 0;
  corrupt_ = false;
}

std::optional<std::string_view> ProbeFrameBuffer::Next() {
  if (corrupt_) return std::nullopt;
  const size_t available = size_ - consumed_;
  uint32_t length = 0;
  if (available < sizeof length) return std::nullopt;
  std::memcpy(&length, buffer_.data() + consumed_, sizeof length);
  if (length > kMaxFrameBytes) {
    corrupt_ = true;
    return std::nullopt;
  }
  if (available - sizeof length < length) return std::nullopt;
  std::string_view payload(buffer_.data() + consumed_ + sizeof length, length);
  consumed_ += sizeof length + length;
  return payload;
}

}  // namespace gpudoctor
