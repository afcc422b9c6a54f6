// The encoding half of the probe's wire format (nvml/probe_wire.h), for the
// probe's hot path: GpuFrameEncoder writes a GPU's frame while the GPU is
// read, with no GpuSnapshot built in between.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "model/gpu_fields.h"
#include "model/snapshot.h"

namespace gpudoctor {
namespace probe_wire_detail {

// Numbers are kept: 4 was a GPU identity frame, replaced by CallTracker::gpu_pci.
enum class Kind : uint8_t { kRequest = 1, kHost = 2, kInitFailed = 3, kGpu = 5, kXid = 6, kDone = 7 };

// An NVLink's value mask when all five of its fields have values: the common case.
inline constexpr uint8_t kNvLinkAllValues = 0x1f;
// An NVLink record with all five values: u32 number, u8 mask, u8 state, then
// the four u64 counters, at these offsets.
inline constexpr size_t kNvLinkMaskAt = sizeof(uint32_t);
inline constexpr size_t kNvLinkActiveAt = kNvLinkMaskAt + 1;
inline constexpr size_t kNvLinkCountersAt = kNvLinkActiveAt + 1;
inline constexpr size_t kNvLinkAllValuesSize = kNvLinkCountersAt + 4 * sizeof(uint64_t);

// A GPU frame is a list of records, each a field's position in
// kScalarGpuFields (then these two for the lists) and the field; positions
// rise, a field left out is "not supported", and kGpuEnd closes the list.
inline constexpr uint8_t kGpuProcesses = kScalarGpuFieldCount;
inline constexpr uint8_t kGpuNvLinks = kScalarGpuFieldCount + 1;
inline constexpr uint8_t kGpuEnd = 0xff;
static_assert(kGpuNvLinks < kGpuEnd);

// Appends values to a frame; the length prefix is filled in by Finish().
// `out` is grown ahead of the writing and cut back to what was written at the
// end, so putting a value is a bounds check and a copy: a GPU frame holds
// over a hundred values.
class Writer {
 public:
  // Appends to `out`, which may already hold earlier frames.
  Writer(std::string& out, Kind kind) : out_(out), start_(out.size()) {
    cursor_ = end_ = out_.data() + start_;
    Room(sizeof(uint32_t));
    cursor_ += sizeof(uint32_t);  // the length, filled in by Finish()
    Put(static_cast<uint8_t>(kind));
  }

  template <typename T>
    requires std::is_arithmetic_v<T>
  [[gnu::always_inline]] void Put(T value) {
    if constexpr (std::is_same_v<T, bool>) {
      Put(static_cast<uint8_t>(value));
    } else {
      char* at = Room(sizeof(T));
      std::memcpy(at, &value, sizeof(T));
      cursor_ = at + sizeof(T);
    }
  }
  void Put(AccessError error) { Put(static_cast<uint8_t>(error)); }
  void Put(std::string_view text) {
    Put(static_cast<uint32_t>(text.size()));
    PutBytes(text.data(), text.size());
  }
  void Put(const std::string& text) { Put(std::string_view(text)); }
  void Put(const ProcessInfo& process) {
    Put(process.pid);
    Put(process.name);
    Put(process.used_memory_bytes);
  }
  // An NVLink: its number, a byte with a bit per field that has a value (in
  // the order of VisitNvLinkFields), then each field: the bare value when its
  // bit is set, else the field (state and error text).
  void Put(const NvLinkInfo& link) {
    uint8_t mask = 0;
    uint8_t bit = 1;
    auto has_value = [&mask, &bit](const char*, const auto& field) {
      if (field.has_value()) mask |= bit;
      bit = static_cast<uint8_t>(bit << 1);
    };
    VisitNvLinkFields(has_value, link);
    Put(link.link);
    Put(mask);
    auto field = [this](const char*, const auto& value) {
      if (value.has_value()) {
        Put(value.value());
      } else {
        PutAny(value);
      }
    };
    VisitNvLinkFields(field, link);
  }
  template <typename T>
  void Put(const std::vector<T>& items) {
    Put(static_cast<uint32_t>(items.size()));
    for (const T& item : items) Put(item);
  }
  template <typename T>
  void Put(const Field<T>& field) {
    if constexpr (std::is_arithmetic_v<T>) {
      // The common case, a number or flag, with one bounds check for state and value.
      if (field.has_value()) {
        using Wire = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
        const Wire value = static_cast<Wire>(field.value());
        char* at = Room(1 + sizeof(Wire));
        at[0] = static_cast<char>(FieldState::kValue);
        std::memcpy(at + 1, &value, sizeof(Wire));
        cursor_ = at + 1 + sizeof(Wire);
        return;
      }
    }
    PutAny(field);
  }

  // The next `size` bytes, for the caller to fill in: one bounds check for a
  // record of several values.
  [[gnu::always_inline]] char* Claim(size_t size) {
    char* at = Room(size);
    cursor_ = at + size;
    return at;
  }

  // Leaves room for a number filled in later by Patch(); returns where it is.
  size_t Reserve(size_t size) {
    char* at = Room(size);
    cursor_ = at + size;
    return static_cast<size_t>(at - out_.data());
  }
  void Patch(size_t at, uint32_t value) { std::memcpy(out_.data() + at, &value, sizeof value); }

  void Finish() {
    out_.resize(static_cast<size_t>(cursor_ - out_.data()));
    const auto length = static_cast<uint32_t>(out_.size() - start_ - sizeof(uint32_t));
    std::memcpy(out_.data() + start_, &length, sizeof length);
  }

 private:
  // Any field state, out of line so that the numeric fast path above stays
  // small enough to inline.
  template <typename T>
  [[gnu::noinline]] void PutAny(const Field<T>& field) {
    Put(static_cast<uint8_t>(field.state()));
    if (field.has_value()) Put(field.value());
    if (field.failed()) Put(field.error());
  }

  void PutBytes(const void* bytes, size_t size) {
    char* at = Room(size);
    std::memcpy(at, bytes, size);
    cursor_ = at + size;
  }
  // Where the next `size` bytes go, growing `out` when they do not fit.
  [[gnu::always_inline]] char* Room(size_t size) {
    if (static_cast<size_t>(end_ - cursor_) < size) Grow(size);
    return cursor_;
  }
  void Grow(size_t size) {
    const size_t used = static_cast<size_t>(cursor_ - out_.data());
    // A little slack at a time: growing zero-fills, and the string's own
    // growth keeps reallocations geometric.
    out_.resize(used + std::max<size_t>(size, 2048));
    cursor_ = out_.data() + used;
    end_ = out_.data() + out_.size();
  }

  std::string& out_;
  size_t start_;
  char* cursor_;
  char* end_;
};

}  // namespace probe_wire_detail

// Writes one GPU frame as the GPU is read. Fields go in the order of
// kScalarGpuFields, then the processes, then the NVLinks; a field never set
// is "not supported". The member names the field and fixes its type:
//
//   GpuFrameEncoder gpu(batch, 3);
//   gpu.Value<&GpuSnapshot::temperature_c>(71);
//   gpu.Failed<&GpuSnapshot::power_draw_w>("GPU is lost");
//   gpu.Finish(AccessError::kNone, "");
//
// A field out of order makes the frame undecodable, so the mistake shows up
// as a missing GPU in every test, not as a value in the wrong place.
class GpuFrameEncoder {
 public:
  GpuFrameEncoder(std::string& out, uint32_t index) : writer_(out, probe_wire_detail::Kind::kGpu) {
    writer_.Put(index);
  }

  template <auto Member, typename V>
  void Value(const V& value) {
    using T = typename std::remove_reference_t<decltype(std::declval<GpuSnapshot&>().*Member)>::value_type;
    constexpr auto position = static_cast<char>(ScalarGpuFieldIndex<Member>());
    if constexpr (std::is_arithmetic_v<T>) {
      // Position, state and value with one bounds check.
      using Wire = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
      const auto wire = static_cast<Wire>(static_cast<T>(value));
      char* at = writer_.Claim(2 + sizeof(Wire));
      at[0] = position;
      at[1] = static_cast<char>(FieldState::kValue);
      std::memcpy(at + 2, &wire, sizeof(Wire));
    } else {
      writer_.Put(static_cast<uint8_t>(position));
      writer_.Put(static_cast<uint8_t>(FieldState::kValue));
      if constexpr (std::is_same_v<T, std::string>) {
        writer_.Put(std::string_view(value));
      } else {
        writer_.Put(value);  // a list
      }
    }
  }
  template <auto Member>
  void Failed(std::string_view message) {
    writer_.Put(static_cast<uint8_t>(ScalarGpuFieldIndex<Member>()));
    PutFailed(message);
  }

  void Processes(const std::vector<ProcessInfo>& processes) {
    writer_.Put(probe_wire_detail::kGpuProcesses);
    writer_.Put(static_cast<uint8_t>(FieldState::kValue));
    writer_.Put(processes);
  }
  void ProcessesFailed(std::string_view message) {
    writer_.Put(probe_wire_detail::kGpuProcesses);
    PutFailed(message);
  }

  // The links, one at a time, then EndNvLinks(); nothing at all when the GPU has none.
  void NvLink(const NvLinkInfo& link) {
    StartNvLink();
    writer_.Put(link);
  }
  // A link whose state and four error counters (in the order of
  // VisitNvLinkFields) were all read: written with one bounds check.
  void NvLink(uint32_t link, bool active, const uint64_t (&counters)[4]) {
    StartNvLink();
    using namespace probe_wire_detail;
    char* at = writer_.Claim(kNvLinkAllValuesSize);
    std::memcpy(at, &link, sizeof link);
    at[kNvLinkMaskAt] = static_cast<char>(kNvLinkAllValues);
    at[kNvLinkActiveAt] = static_cast<char>(active);
    std::memcpy(at + kNvLinkCountersAt, counters, sizeof counters);
  }
  void EndNvLinks() {
    if (links_ > 0) writer_.Patch(count_at_, links_);
  }
  void NvLinksFailed(std::string_view message) {
    writer_.Put(probe_wire_detail::kGpuNvLinks);
    PutFailed(message);
  }

  // Ends the frame with the GPU's access error (kNone when it was read).
  void Finish(AccessError error, std::string_view message) {
    writer_.Put(probe_wire_detail::kGpuEnd);
    writer_.Put(error);
    writer_.Put(message);
    writer_.Finish();
  }

 private:
  void StartNvLink() {
    if (links_ == 0) {
      writer_.Put(probe_wire_detail::kGpuNvLinks);
      writer_.Put(static_cast<uint8_t>(FieldState::kValue));
      count_at_ = writer_.Reserve(sizeof(uint32_t));
    }
    ++links_;
  }
  void PutFailed(std::string_view message) {
    writer_.Put(static_cast<uint8_t>(FieldState::kError));
    writer_.Put(message);
  }

  probe_wire_detail::Writer writer_;
  size_t count_at_ = 0;
  uint32_t links_ = 0;
};

}  // namespace gpudoctor
