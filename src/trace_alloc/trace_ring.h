// TraceRing: gpudoctor's end of the shared ring (trace_wire.h). It creates
// the memfd the traced program inherits, and reads the records the preloaded
// library publishes, in order, copying each slot before it trusts anything.
//
//   Result<std::unique_ptr<TraceRing>> ring = TraceRing::Create(1 << 18);
//   env: GPUDOCTOR_TRACE_FD=(*ring)->fd()
//   (*ring)->Drain([&](const TraceRecord& r) { ledger.Add(r); });
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "common/result.h"
#include "trace_alloc/trace_records.h"
#include "trace_alloc/trace_wire.h"

namespace gpudoctor {

// The library's own counters, as the ring's header holds them.
struct RingCounters {
  uint32_t processes_attached = 0;
  bool abandoned = false;  // the library stopped recording: gpudoctor did not keep up
  uint64_t records_dropped = 0;
  uint32_t proc_address_wrapped = 0, proc_address_by_name = 0, proc_address_unmatched = 0, dlsym_wrapped = 0;
  uint32_t sites_overflowed = 0;
};

class TraceRing {
 public:
  // A ring of `capacity` slots (a power of two), in a memfd that child
  // processes inherit (not close-on-exec).
  static Result<std::unique_ptr<TraceRing>> Create(uint64_t capacity);
  ~TraceRing();
  TraceRing(const TraceRing&) = delete;
  TraceRing& operator=(const TraceRing&) = delete;

  int fd() const { return fd_; }
  // Hands every published record to `sink`, in order, and frees its slot; at
  // most `limit` of them. Returns how many slots it consumed.
  size_t Drain(const std::function<void(const TraceRecord&)>& sink, size_t limit = SIZE_MAX);
  // After the program ended: a slot taken but never filled (a process killed
  // inside a hook) is skipped after `grace_ns` instead of waited for.
  size_t DrainRemaining(const std::function<void(const TraceRecord&)>& sink, uint64_t grace_ns);
  // Tells the library the reader is alive (it stops waiting for a full ring
  // after trace_wire::kReaderTimeoutNs without this).
  void Heartbeat();
  RingCounters counters() const;
  uint64_t malformed() const { return malformed_; }  // slots that held no valid record
  uint64_t skipped() const { return skipped_; }      // slots never filled

 private:
  TraceRing(int fd, trace_wire::RingHeader* header, size_t bytes, uint64_t capacity);
  bool TakeOne(const std::function<void(const TraceRecord&)>& sink);

  int fd_;
  trace_wire::RingHeader* header_;
  size_t bytes_;
  uint64_t capacity_;
  uint64_t tail_ = 0;
  uint64_t malformed_ = 0, skipped_ = 0;
};

uint64_t MonotonicNowNs();

}  // namespace gpudoctor
