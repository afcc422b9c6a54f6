#include "trace_alloc/trace_ring.h"

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace gpudoctor {

using namespace trace_wire;

uint64_t MonotonicNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Result<std::unique_ptr<TraceRing>> TraceRing::Create(uint64_t capacity, uint64_t max_waiting_writers) {
  if (capacity == 0 || (capacity & (capacity - 1)) != 0) return Error{"ring capacity must be a power of two"};
  const int fd = memfd_create("gpudoctor-trace-alloc", 0);  // inherited by the program on purpose
  if (fd < 0) return Error{std::string("memfd_create: ") + std::strerror(errno)};
  const size_t bytes = RingBytes(capacity);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    close(fd);
    return Error{std::string("ftruncate: ") + std::strerror(error)};
  }
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (memory == MAP_FAILED) {
    const int error = errno;
    close(fd);
    return Error{std::string("mmap: ") + std::strerror(error)};
  }
  auto* header = new (memory) RingHeader();
  std::memcpy(header->magic, kMagic, sizeof kMagic);
  header->version = kVersion;
  header->slot_bytes = kSlotBytes;
  header->capacity = capacity;
  header->reader_pid = static_cast<uint64_t>(getpid());
  Slot* slots = Slots(header);
  for (uint64_t i = 0; i < capacity; ++i) slots[i].sequence.store(i, std::memory_order_relaxed);
  header->reader_heartbeat_ns.store(MonotonicNowNs());
  return std::unique_ptr<TraceRing>(new TraceRing(fd, header, bytes, capacity, max_waiting_writers));
}

TraceRing::TraceRing(int fd, RingHeader* header, size_t bytes, uint64_t capacity, uint64_t max_waiting_writers)
    : fd_(fd), header_(header), bytes_(bytes), capacity_(capacity), max_waiting_writers_(max_waiting_writers) {}

TraceRing::~TraceRing() {
  munmap(header_, bytes_);
  close(fd_);
}

void TraceRing::MarkCorrupt(std::string why) {
  if (corrupt()) return;
  corruption_ = std::move(why);
  // Writers waiting for a slot would wait for a reader that no longer reads:
  // tell them to stop recording, so the program runs on untraced.
  header_->abandoned.store(1, std::memory_order_relaxed);
}

std::optional<uint64_t> TraceRing::CheckedHead() {
  if (corrupt()) return std::nullopt;
  // Each field is read once: the program may be changing it as we look.
  const uint64_t capacity = header_->capacity;
  const uint32_t version = header_->version, slot_bytes = header_->slot_bytes;
  if (std::memcmp(header_->magic, kMagic, sizeof kMagic) != 0 || version != kVersion || slot_bytes != kSlotBytes ||
      capacity != capacity_) {
    MarkCorrupt("its header was overwritten (magic, version, slot size or capacity changed)");
    return std::nullopt;
  }
  const uint64_t head = header_->head.load(std::memory_order_acquire);
  // Unsigned: a position behind the reader reads as far ahead.
  if (head - tail_ > capacity_ + max_waiting_writers_) {
    MarkCorrupt(head < tail_ ? fmt::format("its write position {} went back behind the reader's {}", head, tail_)
                             : fmt::format("its write position {} is {} ahead of the reader's {}, more than the {} "
                                           "slots and every waiting writer could hold",
                                           head, head - tail_, tail_, capacity_));
    return std::nullopt;
  }
  return head;
}

bool TraceRing::TakeOne(const std::function<void(const TraceRecord&)>& sink) {
  Slot& slot = Slots(header_)[tail_ & (capacity_ - 1)];
  if (slot.sequence.load(std::memory_order_acquire) != tail_ + 1) return false;
  // Copy field by field out of shared memory the program can still write.
  Slot copy;
  std::memcpy(reinterpret_cast<char*>(&copy) + sizeof(copy.sequence),
              reinterpret_cast<const char*>(&slot) + sizeof(slot.sequence), sizeof(Slot) - sizeof(slot.sequence));
  slot.sequence.store(tail_ + capacity_, std::memory_order_release);
  ++tail_;
  if (std::optional<TraceRecord> record = DecodeSlot(copy)) sink(*record);
  else ++malformed_;
  return true;
}

size_t TraceRing::Drain(const std::function<void(const TraceRecord&)>& sink, size_t limit) {
  const std::optional<uint64_t> head = CheckedHead();
  if (!head) return 0;
  // A slot is published only after its position was taken, so nothing at or
  // beyond the write position is a record, whatever its sequence says.
  limit = static_cast<size_t>(std::min<uint64_t>(limit, *head - tail_));
  size_t taken = 0;
  while (taken < limit && TakeOne(sink)) ++taken;
  return taken;
}

size_t TraceRing::DrainRemaining(const std::function<void(const TraceRecord&)>& sink, uint64_t grace_ns,
                                 const std::function<bool()>& stop) {
  size_t taken = 0;
  // The grace is given once: a writer still alive fills its slot within it,
  // and any later hole is one more writer that died (or gave up on a reader
  // it found too slow), not worth another wait.
  const uint64_t deadline = MonotonicNowNs() + grace_ns;
  for (;;) {
    // Checked on every turn: the program's other processes may still write.
    const std::optional<uint64_t> head = CheckedHead();
    if (!head || tail_ >= *head || (stop && stop())) break;
    if (TakeOne(sink)) {
      ++taken;
      continue;
    }
    if (MonotonicNowNs() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    Slots(header_)[tail_ & (capacity_ - 1)].sequence.store(tail_ + capacity_, std::memory_order_release);
    ++tail_;
    ++skipped_;
  }
  return taken;
}

void TraceRing::Heartbeat() {
  // A corrupt ring is not read: writers must see the reader gone, not alive.
  if (!corrupt()) header_->reader_heartbeat_ns.store(MonotonicNowNs(), std::memory_order_relaxed);
}

std::optional<RingCounters> TraceRing::counters() const {
  if (corrupt()) return std::nullopt;
  RingCounters c;
  c.processes_attached = header_->processes_attached.load();
  c.abandoned = header_->abandoned.load() != 0;
  c.records_dropped = header_->records_dropped.load();
  c.proc_address_wrapped = header_->proc_address_wrapped.load();
  c.proc_address_by_name = header_->proc_address_by_name.load();
  c.proc_address_unmatched = header_->proc_address_unmatched.load();
  c.dlsym_wrapped = header_->dlsym_wrapped.load();
  c.sites_overflowed = header_->sites_overflowed.load();
  // A dropped record took a position first, so there cannot be more of them.
  if (c.records_dropped > header_->head.load()) return std::nullopt;
  return c;
}

}  // namespace gpudoctor
