// The shared-memory ring through which the preloaded library
// (libgpudoctor_trace_alloc.so) hands its records to `gpudoctor trace-alloc`.
//
// gpudoctor creates a memfd holding one RingHeader and `capacity` slots, and
// gives its descriptor number to the program in GPUDOCTOR_TRACE_FD. Every
// process of the program (children inherit the descriptor and LD_PRELOAD)
// maps it and writes records; gpudoctor alone reads. It is a bounded
// multi-producer queue (Vyukov's): a producer takes a position with one
// fetch_add on `head`, waits until the slot's sequence says the reader has
// emptied it, fills it and publishes it by storing position + 1; the reader
// takes slots in order and frees one by storing position + capacity. So the
// order of records is the order of the hooks' reservations: an allocation is
// reserved after the driver returned the address and a free before it is
// handed back, so no reuse of an address is ever seen before its free.
//
// The traced program can write anything into the mapping, so the reader
// copies each slot and checks it (trace_ring.h): nothing here is trusted.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gpudoctor::trace_wire {

inline constexpr char kMagic[8] = {'G', 'D', 'T', 'R', 'A', 'C', 'E', '1'};
inline constexpr uint32_t kVersion = 1;
inline constexpr const char* kFdVariable = "GPUDOCTOR_TRACE_FD";        // the memfd's descriptor number
inline constexpr const char* kDepthVariable = "GPUDOCTOR_TRACE_DEPTH";  // frames kept per site (default 24)
inline constexpr uint32_t kMaxFrames = 32;
inline constexpr uint32_t kDefaultFrames = 24;
// A producer that finds the ring full waits for the reader; when the reader
// has not moved for this long (gpudoctor stopped or killed), the library stops
// recording rather than hold the program.
inline constexpr uint64_t kReaderTimeoutNs = 3'000'000'000;

enum class RecordType : uint8_t {
  kEmpty = 0,
  kAttach = 1,   // a process loaded the library: pid, parent pid in `extra`; its executable follows as text
  kAlloc = 2,    // api, address (a handle for cuMemCreate), bytes, site, result, kind
  kFree = 3,     // api, address (a handle for cuMemRelease), result
  kMap = 4,      // cuMemMap: address, bytes, handle in `extra`, result
  kUnmap = 5,    // cuMemUnmap: address, bytes, result
  kSite = 6,     // a new call stack: site id, frame count in `bytes`; its frames follow
  kFrame = 7,    // one frame of a site: site id, index in `aux`, module id in `extra`, offset in `address`
  kModule = 8,   // a loaded object: module id in `extra`, load bias in `address`, path length in `bytes`
  kText = 9,     // a piece of a module's path or an executable's name (TextRecord)
  kDetach = 10,  // a process is exiting normally (its library's destructor ran)
};

enum class Kind : uint8_t { kNone = 0, kDevice = 1, kManaged = 2, kHostPinned = 3 };
inline constexpr int kKindCount = 4;

// The entry points, in the order of the wrappers' table (preload/trace_hooks.cc).
enum class Api : uint8_t {
  kNone = 0,
  kCudaMalloc, kCudaMallocManaged, kCudaMallocAsync, kCudaMallocHost, kCudaHostAlloc,
  kCudaFree, kCudaFreeAsync, kCudaFreeHost,
  kCuMemAlloc, kCuMemAllocManaged, kCuMemAllocHost, kCuMemHostAlloc, kCuMemAllocAsync,
  kCuMemFree, kCuMemFreeHost, kCuMemFreeAsync,
  kCuMemCreate, kCuMemRelease, kCuMemMap, kCuMemUnmap,
  kCount
};
// "cudaMalloc", "cuMemAlloc_v2", ...; "?" for a value out of range.
const char* ApiName(uint8_t api);

// Who owns a text record.
enum class TextOwner : uint8_t { kModulePath = 0, kExecutable = 1 };

inline constexpr size_t kSlotBytes = 64;
inline constexpr size_t kTextBytes = 40;

struct alignas(kSlotBytes) Slot {
  std::atomic<uint64_t> sequence;
  uint8_t type;
  uint8_t api;
  uint16_t aux;  // kFrame: frame index; kText: piece index; kAlloc: Kind
  uint32_t pid;
  union {
    struct {
      uint64_t time_ns;  // CLOCK_MONOTONIC
      uint64_t address;
      uint64_t bytes;
      uint32_t site;
      int32_t result;  // the call's CUresult / cudaError_t: 0 is success
      uint64_t extra;
    } event;
    struct {
      uint8_t owner;   // TextOwner
      uint8_t length;  // bytes used in `text`
      uint16_t unused;
      uint32_t id;     // module id or pid
      char text[kTextBytes];
    } piece;
  };
};
static_assert(sizeof(Slot) == kSlotBytes);

struct alignas(64) RingHeader {
  char magic[8];
  uint32_t version;
  uint32_t slot_bytes;
  uint64_t capacity;  // slots, a power of two
  uint64_t reader_pid;
  alignas(64) std::atomic<uint64_t> head;  // next position a producer takes
  alignas(64) std::atomic<uint64_t> reader_heartbeat_ns;  // CLOCK_MONOTONIC, refreshed by the reader
  std::atomic<uint32_t> abandoned;  // producers gave up waiting for the reader
  std::atomic<uint32_t> next_site_id;
  std::atomic<uint32_t> next_module_id;
  std::atomic<uint32_t> processes_attached;
  std::atomic<uint64_t> records_dropped;  // given up on (reader gone, site table full)
  // The driver's entry points handed out by cuGetProcAddress or dlsym:
  // replaced by the library's wrappers, matched by address or by name, and
  // those for a followed function that could not be matched (not recorded).
  std::atomic<uint32_t> proc_address_wrapped;
  std::atomic<uint32_t> proc_address_by_name;
  std::atomic<uint32_t> proc_address_unmatched;
  std::atomic<uint32_t> dlsym_wrapped;
  std::atomic<uint32_t> sites_overflowed;  // stacks beyond the site table, recorded without a site
};
static_assert(sizeof(RingHeader) % kSlotBytes == 0);

inline constexpr size_t RingBytes(uint64_t capacity) { return sizeof(RingHeader) + capacity * kSlotBytes; }

inline Slot* Slots(RingHeader* header) {
  return reinterpret_cast<Slot*>(reinterpret_cast<char*>(header) + sizeof(RingHeader));
}

}  // namespace gpudoctor::trace_wire
