// TraceRing: gpudoctor's end of the shared ring (trace_wire.h). It creates
// the memfd the traced program inherits, and reads the records the preloaded
// library publishes, in order, copying each slot before it trusts anything.
//
// The program can write every byte of the mapping, so nothing in it bounds
// the reader: positions come from the reader's own count, the header is
// checked against what the reader wrote before each read, and a header no
// writer could have left (a changed capacity, a write position behind the
// reader or further ahead than the ring and every waiting writer allow) makes
// the ring corrupt: it is read no more, corruption() says why, and the
// program runs on untraced. Every read ends within its limit or its deadline.
//
//   Result<std::unique_ptr<TraceRing>> ring = TraceRing::Create(1 << 18);
//   env: GPUDOCTOR_TRACE_FD=(*ring)->fd()
//   (*ring)->Drain([&](const TraceRecord& r) { ledger.Add(r); });
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

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
  // Writers that may hold a position beyond the ring's capacity, each waiting
  // for its slot: one per thread of the program (Linux allows at most 2^22
  // processes and threads). A write position further ahead is corruption.
  static constexpr uint64_t kMaxWaitingWriters = 1 << 22;

  // A ring of `capacity` slots (a power of two), in a memfd that child
  // processes inherit (not close-on-exec). Tests may allow fewer waiting writers.
  static Result<std::unique_ptr<TraceRing>> Create(uint64_t capacity,
                                                   uint64_t max_waiting_writers = kMaxWaitingWriters);
  ~TraceRing();
  TraceRing(const TraceRing&) = delete;
  TraceRing& operator=(const TraceRing&) = delete;

  int fd() const { return fd_; }
  // Hands every published record to `sink`, in order, and frees its slot; at
  // most `limit` of them. Returns how many slots it consumed (0 once corrupt).
  size_t Drain(const std::function<void(const TraceRecord&)>& sink, size_t limit = SIZE_MAX);
  // After the program ended: a slot taken but never filled (a process killed
  // inside a hook) is skipped after `grace_ns` instead of waited for. Visits
  // at most the ring's capacity plus the waiting writers' positions, and stops
  // early when `stop` returns true (an interrupt).
  size_t DrainRemaining(const std::function<void(const TraceRecord&)>& sink, uint64_t grace_ns,
                        const std::function<bool()>& stop = {});
  // Tells the library the reader is alive (it stops waiting for a full ring
  // after trace_wire::kReaderTimeoutNs without this).
  void Heartbeat();
  // The library's counters; nullopt when the ring is corrupt, or when they
  // cannot be true (more records dropped than positions ever taken).
  std::optional<RingCounters> counters() const;
  uint64_t malformed() const { return malformed_; }  // slots that held no valid record
  uint64_t skipped() const { return skipped_; }      // slots never filled
  // Why the ring was given up on; empty while it is sound.
  const std::string& corruption() const { return corruption_; }
  bool corrupt() const { return !corruption_.empty(); }

 private:
  TraceRing(int fd, trace_wire::RingHeader* header, size_t bytes, uint64_t capacity, uint64_t max_waiting_writers);
  bool TakeOne(const std::function<void(const TraceRecord&)>& sink);
  // Checks the header against what Create wrote and the write position
  // against the reader's; marks the ring corrupt and returns false when it
  // cannot be. Returns the write position when sound.
  std::optional<uint64_t> CheckedHead();
  void MarkCorrupt(std::string why);

  int fd_;
  trace_wire::RingHeader* header_;
  size_t bytes_;
  uint64_t capacity_;
  uint64_t max_waiting_writers_;
  uint64_t tail_ = 0;
  uint64_t malformed_ = 0, skipped_ = 0;
  std::string corruption_;
};

uint64_t MonotonicNowNs();

}  // namespace gpudoctor
