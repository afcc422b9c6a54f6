// libgpudoctor_trace_alloc.so: preloaded into a program by `gpudoctor
// trace-alloc`, it records every CUDA allocation and free (runtime and driver,
// the list of trace_alloc/cuda_alloc_api.h) into the shared ring of
// trace_wire.h, with the call stack that made it.
//
// How it sees the calls:
// - as the first definition of each entry point in the process (LD_PRELOAD),
//   for programs and libraries that link libcudart or libcuda;
// - through cuGetProcAddress, which the CUDA runtime uses to reach the driver:
//   the entry points it returns for the followed functions are replaced by
//   these wrappers (matched by address, else by name and version);
// - through dlsym, which the runtime uses to find cuGetProcAddress in a
//   handle of libcuda.so.1 that LD_PRELOAD cannot reach: a few instructions of
//   assembly hand the followed names to a filter and jump to the real dlsym
//   for the rest, so the caller's address that dlsym(RTLD_NEXT) relies on is
//   untouched.
//
// Its rules: it never allocates in a hook (the ring, the site table and the
// per-thread stack caches are mmap'ed), never writes to the program's
// descriptors, never changes what a call returns, and does nothing but call
// through when GPUDOCTOR_TRACE_FD is missing or wrong. A call made inside
// another followed call (the runtime's cudaMalloc calling cuMemAlloc_v2) is
// not recorded twice: a thread-local depth marks the outermost one.
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "trace_alloc/cuda_alloc_api.h"
#include "trace_alloc/trace_wire.h"

#define GD_EXPORT extern "C" __attribute__((visibility("default")))
#define GD_TLS __attribute__((tls_model("initial-exec")))

using namespace gpudoctor::trace_wire;

// The real dlsym, which the assembly below jumps to; and the filter it asks first.
extern "C" {
__attribute__((visibility("hidden"))) void* gd_real_dlsym = nullptr;
__attribute__((visibility("hidden"))) void* gd_dlsym_filter(void* handle, const char* name);
}

namespace {

// ---- the followed functions ----

enum Function : int {
#define GD_ENUM(name, ret, params) kFn_##name,
  GPUDOCTOR_TRACE_RUNTIME_FUNCTIONS(GD_ENUM) GPUDOCTOR_TRACE_DRIVER_FUNCTIONS(GD_ENUM)
#undef GD_ENUM
  kFunctionCount
};

constexpr const char* kFunctionNames[] = {
#define GD_NAME(name, ret, params) #name,
    GPUDOCTOR_TRACE_RUNTIME_FUNCTIONS(GD_NAME) GPUDOCTOR_TRACE_DRIVER_FUNCTIONS(GD_NAME)
#undef GD_NAME
};

#define GD_TYPEDEF(name, ret, params) using name##_t = ret(*) params;
GPUDOCTOR_TRACE_RUNTIME_FUNCTIONS(GD_TYPEDEF)
GPUDOCTOR_TRACE_DRIVER_FUNCTIONS(GD_TYPEDEF)
#undef GD_TYPEDEF

std::atomic<void*> g_real[kFunctionCount];
void* g_wrapper[kFunctionCount];  // filled by the constructor of this file (below the wrappers)
// For a function not found: the count of objects ever loaded then, plus one.
// It is looked for again only after another object is loaded.
std::atomic<uint64_t> g_missing_at[kFunctionCount];

int FindFunction(const char* name) {
  for (int i = 0; i < kFunctionCount; ++i)
    if (std::strcmp(kFunctionNames[i], name) == 0) return i;
  return -1;
}

using DlsymFunction = void* (*)(void*, const char*);

DlsymFunction RealDlsym() {
  if (gd_real_dlsym == nullptr) {
    void* found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
#if defined(__x86_64__)
    if (found == nullptr) found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
#elif defined(__aarch64__)
    if (found == nullptr) found = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17");
#endif
    __atomic_store_n(&gd_real_dlsym, found, __ATOMIC_RELEASE);
  }
  return reinterpret_cast<DlsymFunction>(__atomic_load_n(&gd_real_dlsym, __ATOMIC_ACQUIRE));
}

// Looks for `name` in a loaded CUDA library when the global scope has none
// after this one (libcudart loaded RTLD_LOCAL by an interpreter, or renamed
// in a wheel: libcudart-1234abcd.so.12). The paths are collected first and
// opened after dl_iterate_phdr returns: dlopen inside its callback would take
// the loader's locks in the other order than a concurrent dlopen does.
constexpr int kMaxCandidates = 8;
struct Candidates {
  int count = 0;
  char paths[kMaxCandidates][512];
};

int CollectCudaLibrary(struct dl_phdr_info* info, size_t, void* data) {
  auto* candidates = static_cast<Candidates*>(data);
  const char* path = info->dlpi_name;
  if (path == nullptr || (std::strstr(path, "libcudart") == nullptr && std::strstr(path, "libcuda.so") == nullptr))
    return 0;
  if (std::strlen(path) >= sizeof candidates->paths[0]) return 0;
  std::strcpy(candidates->paths[candidates->count++], path);
  return candidates->count == kMaxCandidates ? 1 : 0;
}

void* SearchCudaLibraries(const char* name, void* self) {
  static Candidates candidates;  // too large for a thread's stack in a hook; guarded below
  static std::atomic_flag busy = ATOMIC_FLAG_INIT;
  while (busy.test_and_set(std::memory_order_acquire)) sched_yield();
  candidates.count = 0;
  dl_iterate_phdr(CollectCudaLibrary, &candidates);
  void* found = nullptr;
  for (int i = 0; i < candidates.count && found == nullptr; ++i) {
    void* handle = dlopen(candidates.paths[i], RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    void* symbol = RealDlsym()(handle, name);
    dlclose(handle);
    if (symbol != nullptr && symbol != self) found = symbol;
  }
  busy.clear(std::memory_order_release);
  return found;
}

uint64_t LoadGeneration() {
  uint64_t adds = 0;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) {
        *static_cast<uint64_t*>(data) = info->dlpi_adds;
        return 1;
      },
      &adds);
  return adds;
}

void* Real(int function) {
  void* real = g_real[function].load(std::memory_order_acquire);
  if (real != nullptr) return real;
  const uint64_t generation = LoadGeneration();
  if (g_missing_at[function].load(std::memory_order_relaxed) == generation + 1) return nullptr;
  DlsymFunction lookup = RealDlsym();
  if (lookup == nullptr) return nullptr;
  real = lookup(RTLD_NEXT, kFunctionNames[function]);
  if (real == g_wrapper[function]) real = nullptr;
  if (real == nullptr) real = SearchCudaLibraries(kFunctionNames[function], g_wrapper[function]);
  if (real == nullptr) {
    g_missing_at[function].store(generation + 1, std::memory_order_relaxed);
    return nullptr;
  }
  void* expected = nullptr;
  if (!g_real[function].compare_exchange_strong(expected, real)) real = expected;
  return real;
}

// ---- the ring ----

struct State {
  RingHeader* header = nullptr;
  Slot* slots = nullptr;
  uint64_t mask = 0;
  std::atomic<bool> active{false};
  uint32_t pid = 0;
  uint32_t frames = kDefaultFrames;
  char executable[4096] = {};
};
State g;

GD_TLS __thread int t_depth = 0;

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline void CpuRelax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

bool Recording() {
  return t_depth == 0 && g.active.load(std::memory_order_relaxed) &&
         g.header->abandoned.load(std::memory_order_relaxed) == 0;
}

// Waits until the reader has emptied the slot at `position`: false when the
// reader stopped answering (the library then stops recording).
__attribute__((noinline)) bool WaitForSlot(Slot* slot, uint64_t position) {
  for (uint32_t spin = 0;; ++spin) {
    if (slot->sequence.load(std::memory_order_acquire) == position) return true;
    if (g.header->abandoned.load(std::memory_order_relaxed) != 0) return false;
    if (spin < 128) {
      CpuRelax();
      continue;
    }
    timespec pause{0, 200'000};
    nanosleep(&pause, nullptr);
    if (spin % 64 == 0) {
      const uint64_t heartbeat = g.header->reader_heartbeat_ns.load(std::memory_order_relaxed);
      const uint64_t now = NowNs();
      if (now > heartbeat && now - heartbeat > kReaderTimeoutNs) {
        g.header->abandoned.store(1, std::memory_order_relaxed);
        return false;
      }
    }
  }
}

// A slot to fill, or null (the record is dropped). Publish() hands it over.
struct Reservation {
  Slot* slot = nullptr;
  uint64_t position = 0;
};

Reservation Reserve(RecordType type) {
  const uint64_t position = g.header->head.fetch_add(1, std::memory_order_relaxed);
  Slot* slot = &g.slots[position & g.mask];
  if (slot->sequence.load(std::memory_order_acquire) != position && !WaitForSlot(slot, position)) {
    g.header->records_dropped.fetch_add(1, std::memory_order_relaxed);
    return {};
  }
  slot->type = static_cast<uint8_t>(type);
  slot->api = 0;
  slot->aux = 0;
  slot->pid = g.pid;
  return {slot, position};
}

void Publish(const Reservation& reservation) {
  reservation.slot->sequence.store(reservation.position + 1, std::memory_order_release);
}

void SendEvent(RecordType type, Api api, uint16_t aux, uint64_t address, uint64_t bytes, uint32_t site, int result,
               uint64_t extra) {
  Reservation r = Reserve(type);
  if (r.slot == nullptr) return;
  r.slot->api = static_cast<uint8_t>(api);
  r.slot->aux = aux;
  r.slot->event.time_ns = NowNs();
  r.slot->event.address = address;
  r.slot->event.bytes = bytes;
  r.slot->event.site = site;
  r.slot->event.result = result;
  r.slot->event.extra = extra;
  Publish(r);
}

void SendText(TextOwner owner, uint32_t id, const char* text) {
  const size_t length = std::strlen(text);
  for (size_t offset = 0, piece = 0; offset < length || piece == 0; offset += kTextBytes, ++piece) {
    Reservation r = Reserve(RecordType::kText);
    if (r.slot == nullptr) return;
    const size_t n = length - offset < kTextBytes ? length - offset : kTextBytes;
    r.slot->aux = static_cast<uint16_t>(piece);
    r.slot->piece.owner = static_cast<uint8_t>(owner);
    r.slot->piece.length = static_cast<uint8_t>(n);
    r.slot->piece.id = id;
    std::memcpy(r.slot->piece.text, text + offset, n);
    Publish(r);
    if (n == 0) break;
  }
}

// ---- modules: which object a return address belongs to ----

struct ModuleEntry {
  const void* link_map;
  uint32_t id;
};
constexpr int kMaxModules = 1024;
ModuleEntry g_modules[kMaxModules];
int g_module_count = 0;
std::atomic_flag g_modules_lock = ATOMIC_FLAG_INIT;

// The module id of the object holding `pc` and the offset of `pc` in it
// (0 and the address itself when no object holds it).
void LocateFrame(uint64_t pc, uint32_t* module, uint64_t* offset) {
  *module = 0;
  *offset = pc;
  Dl_info info;
  struct link_map* map = nullptr;
  if (dladdr1(reinterpret_cast<void*>(pc - 1), &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 ||
      map == nullptr)
    return;
  *offset = pc - static_cast<uint64_t>(map->l_addr);
  while (g_modules_lock.test_and_set(std::memory_order_acquire)) CpuRelax();
  for (int i = 0; i < g_module_count; ++i) {
    if (g_modules[i].link_map == map) {
      *module = g_modules[i].id;
      g_modules_lock.clear(std::memory_order_release);
      return;
    }
  }
  const uint32_t id = g.header->next_module_id.fetch_add(1, std::memory_order_relaxed) + 1;
  if (g_module_count < kMaxModules) g_modules[g_module_count++] = {map, id};
  const char* path = map->l_name != nullptr && map->l_name[0] != '\0' ? map->l_name : g.executable;
  SendEvent(RecordType::kModule, Api::kNone, 0, static_cast<uint64_t>(map->l_addr), std::strlen(path), 0, 0, id);
  SendText(TextOwner::kModulePath, id, path);
  g_modules_lock.clear(std::memory_order_release);
  *module = id;
}

// ---- call sites ----

struct Stack {
  uint32_t count = 0;
  uint64_t pcs[kMaxFrames];
  uint64_t slots[kMaxFrames];  // where on the stack each return address is kept (x86-64)
};

struct UnwindState {
  uint64_t start;  // the hook's return address: frames before it are this library's
  bool started = false;
  uint32_t limit;
  Stack* stack;
};

_Unwind_Reason_Code CollectFrame(struct _Unwind_Context* context, void* data) {
  auto* state = static_cast<UnwindState*>(data);
  const uint64_t pc = _Unwind_GetIP(context);
  const uint64_t cfa = _Unwind_GetCFA(context);
  if (!state->started) {
    if (pc != state->start) return _URC_NO_REASON;
    state->started = true;
  }
  if (pc == 0 || state->stack->count >= state->limit) return _URC_END_OF_STACK;
  state->stack->pcs[state->stack->count] = pc;
  // On x86-64 a call leaves the return address just below the CFA the
  // unwinder reports with it.
  state->stack->slots[state->stack->count] = cfa - sizeof(uint64_t);
  state->stack->count++;
  return _URC_NO_REASON;
}

uint64_t HashStack(const Stack& stack) {
  uint64_t hash = 0xcbf29ce484222325ull ^ stack.count;
  for (uint32_t i = 0; i < stack.count; ++i) {
    hash ^= stack.pcs[i];
    hash *= 0x100000001b3ull;
    hash ^= hash >> 29;
  }
  return hash == 0 ? 1 : hash;
}

// The process-wide table of sites: open addressing over an mmap'ed array.
struct SiteEntry {
  std::atomic<uint64_t> hash;
  std::atomic<uint32_t> id;
  uint32_t unused;
};
constexpr uint64_t kSiteTableSize = 1 << 16;
SiteEntry* g_sites = nullptr;

uint32_t DescribeSite(const Stack& stack) {
  const uint32_t id = g.header->next_site_id.fetch_add(1, std::memory_order_relaxed) + 1;
  SendEvent(RecordType::kSite, Api::kNone, 0, 0, stack.count, id, 0, 0);
  for (uint32_t i = 0; i < stack.count; ++i) {
    uint32_t module;
    uint64_t offset;
    LocateFrame(stack.pcs[i], &module, &offset);
    SendEvent(RecordType::kFrame, Api::kNone, static_cast<uint16_t>(i), offset, 0, id, 0, module);
  }
  return id;
}

uint32_t SiteOf(const Stack& stack) {
  if (g_sites == nullptr || stack.count == 0) return 0;
  const uint64_t hash = HashStack(stack);
  for (uint64_t probe = 0; probe < 64; ++probe) {
    SiteEntry& entry = g_sites[(hash + probe) & (kSiteTableSize - 1)];
    uint64_t seen = entry.hash.load(std::memory_order_acquire);
    if (seen == 0) {
      if (entry.hash.compare_exchange_strong(seen, hash, std::memory_order_acq_rel)) {
        const uint32_t id = DescribeSite(stack);
        entry.id.store(id, std::memory_order_release);
        return id;
      }
    }
    if (seen == hash) {
      uint32_t id;
      while ((id = entry.id.load(std::memory_order_acquire)) == 0) CpuRelax();  // being described
      return id;
    }
  }
  g.header->sites_overflowed.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

// Each thread keeps the stacks it saw last, keyed by the hook's return address
// and CFA. A hit is checked against the stack itself: every return address
// must still be where it was, so the unwinder (microseconds) runs only for a
// stack not seen before. Only on x86-64, where that place is known.
struct CachedStack {
  uint64_t return_address = 0, cfa = 0;
  uint32_t site = 0;
  Stack stack;
};
constexpr int kCacheEntries = 16;
struct StackCache {
  CachedStack entries[kCacheEntries];
};
GD_TLS __thread StackCache* t_cache = nullptr;
pthread_key_t g_cache_key;
pthread_once_t g_cache_once = PTHREAD_ONCE_INIT;

void ReleaseCache(void* cache) { munmap(cache, sizeof(StackCache)); }
void CreateCacheKey() { pthread_key_create(&g_cache_key, ReleaseCache); }

StackCache* ThreadCache() {
  if (t_cache != nullptr) return t_cache;
  void* memory = mmap(nullptr, sizeof(StackCache), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return nullptr;
  pthread_once(&g_cache_once, CreateCacheKey);
  pthread_setspecific(g_cache_key, memory);
  t_cache = static_cast<StackCache*>(memory);
  return t_cache;
}

bool StillOnStack(const CachedStack& cached) {
  for (uint32_t i = 1; i < cached.stack.count; ++i)
    if (*reinterpret_cast<const uint64_t*>(cached.stack.slots[i]) != cached.stack.pcs[i]) return false;
  return true;
}

__attribute__((noinline)) uint32_t CurrentSite(uint64_t return_address, uint64_t cfa) {
#if defined(__x86_64__)
  StackCache* cache = ThreadCache();
  CachedStack* entry = nullptr;
  if (cache != nullptr) {
    entry = &cache->entries[((return_address >> 4) ^ (cfa >> 3)) % kCacheEntries];
    if (entry->return_address == return_address && entry->cfa == cfa && StillOnStack(*entry)) return entry->site;
  }
#else
  (void)cfa;
  CachedStack* entry = nullptr;
  CachedStack local;
#endif
  Stack stack;
  UnwindState state{return_address, false, g.frames, &stack};
  _Unwind_Backtrace(CollectFrame, &state);
  if (stack.count == 0) {  // no unwind information up to the caller: the caller alone
    stack.pcs[0] = return_address;
    stack.slots[0] = cfa - sizeof(uint64_t);
    stack.count = 1;
  }
  const uint32_t site = SiteOf(stack);
#if defined(__x86_64__)
  if (entry != nullptr) {
    entry->return_address = return_address;
    entry->cfa = cfa;
    entry->site = site;
    entry->stack = stack;
  }
#else
  (void)entry;
  (void)local;
#endif
  return site;
}

struct DepthGuard {
  DepthGuard() { ++t_depth; }
  ~DepthGuard() { --t_depth; }
};

__attribute__((noinline)) void RecordAlloc(Api api, Kind kind, int result, uint64_t address, uint64_t bytes,
                                           uint64_t return_address, uint64_t cfa) {
  const uint32_t site = CurrentSite(return_address, cfa);
  SendEvent(RecordType::kAlloc, api, static_cast<uint16_t>(kind), result == 0 ? address : 0, bytes, site, result, 0);
}

Kind KindOfProp(const CUmemAllocationProp* prop) {
  if (prop == nullptr) return Kind::kDevice;
  const int type = prop->location.type;
  return type == CU_MEM_LOCATION_TYPE_HOST || type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
                 type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT
             ? Kind::kHostPinned
             : Kind::kDevice;
}

constexpr int kCudaErrorNotFound = 35;  // cudaErrorInsufficientDriver: no runtime to call
constexpr CUresult kDriverNotFound = CUDA_ERROR_NOT_INITIALIZED;

}  // namespace

// ---- the wrappers ----

#define GD_RETURN_ADDRESS reinterpret_cast<uint64_t>(__builtin_return_address(0))
#define GD_CFA reinterpret_cast<uint64_t>(__builtin_dwarf_cfa())

// An allocation: `call` runs the real function; `address` and `bytes` are read after it.
#define GD_ALLOC_BODY(NAME, MISSING, API, KIND, CALL, ADDRESS, BYTES)                                   \
  auto real = reinterpret_cast<NAME##_t>(Real(kFn_##NAME));                                           \
  if (real == nullptr) return MISSING;                                                                \
  if (!Recording()) return real CALL;                                                                 \
  DepthGuard guard;                                                                                   \
  auto result = real CALL;                                                                            \
  RecordAlloc(API, KIND, static_cast<int>(result), (ADDRESS), (BYTES), GD_RETURN_ADDRESS, GD_CFA);    \
  return result;

// A free: reserved before the real call, so no reuse of the address can be
// recorded ahead of it; published with the call's result.
#define GD_FREE_BODY(NAME, MISSING, API, TYPE, CALL, ADDRESS, BYTES, EXTRA)                             \
  auto real = reinterpret_cast<NAME##_t>(Real(kFn_##NAME));                                           \
  if (real == nullptr) return MISSING;                                                                \
  if (!Recording()) return real CALL;                                                                 \
  DepthGuard guard;                                                                                   \
  Reservation r = Reserve(TYPE);                                                                      \
  auto result = real CALL;                                                                            \
  if (r.slot != nullptr) {                                                                            \
    r.slot->api = static_cast<uint8_t>(API);                                                          \
    r.slot->event.time_ns = NowNs();                                                                  \
    r.slot->event.address = (ADDRESS);                                                                \
    r.slot->event.bytes = (BYTES);                                                                    \
    r.slot->event.site = 0;                                                                           \
    r.slot->event.result = static_cast<int>(result);                                                  \
    r.slot->event.extra = (EXTRA);                                                                    \
    Publish(r);                                                                                       \
  }                                                                                                   \
  return result;

#define GD_P(pointer) reinterpret_cast<uint64_t>(pointer)

GD_EXPORT cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  GD_ALLOC_BODY(cudaMalloc, kCudaErrorNotFound, Api::kCudaMalloc, Kind::kDevice, (pointer, bytes),
                pointer ? GD_P(*pointer) : 0, bytes)
}
GD_EXPORT cudaError_t cudaMallocManaged(void** pointer, size_t bytes, unsigned int flags) {
  GD_ALLOC_BODY(cudaMallocManaged, kCudaErrorNotFound, Api::kCudaMallocManaged, Kind::kManaged,
                (pointer, bytes, flags), pointer ? GD_P(*pointer) : 0, bytes)
}
GD_EXPORT cudaError_t cudaMallocAsync(void** pointer, size_t bytes, cudaStream_t stream) {
  GD_ALLOC_BODY(cudaMallocAsync, kCudaErrorNotFound, Api::kCudaMallocAsync, Kind::kDevice, (pointer, bytes, stream),
                pointer ? GD_P(*pointer) : 0, bytes)
}
GD_EXPORT cudaError_t cudaMallocHost(void** pointer, size_t bytes) {
  GD_ALLOC_BODY(cudaMallocHost, kCudaErrorNotFound, Api::kCudaMallocHost, Kind::kHostPinned, (pointer, bytes),
                pointer ? GD_P(*pointer) : 0, bytes)
}
GD_EXPORT cudaError_t cudaHostAlloc(void** pointer, size_t bytes, unsigned int flags) {
  GD_ALLOC_BODY(cudaHostAlloc, kCudaErrorNotFound, Api::kCudaHostAlloc, Kind::kHostPinned, (pointer, bytes, flags),
                pointer ? GD_P(*pointer) : 0, bytes)
}
GD_EXPORT cudaError_t cudaFree(void* pointer) {
  if (pointer == nullptr) {
    auto real = reinterpret_cast<cudaFree_t>(Real(kFn_cudaFree));
    return real ? real(pointer) : kCudaErrorNotFound;
  }
  GD_FREE_BODY(cudaFree, kCudaErrorNotFound, Api::kCudaFree, RecordType::kFree, (pointer), GD_P(pointer), 0, 0)
}
GD_EXPORT cudaError_t cudaFreeAsync(void* pointer, cudaStream_t stream) {
  GD_FREE_BODY(cudaFreeAsync, kCudaErrorNotFound, Api::kCudaFreeAsync, RecordType::kFree, (pointer, stream),
               GD_P(pointer), 0, 0)
}
GD_EXPORT cudaError_t cudaFreeHost(void* pointer) {
  GD_FREE_BODY(cudaFreeHost, kCudaErrorNotFound, Api::kCudaFreeHost, RecordType::kFree, (pointer), GD_P(pointer), 0,
               0)
}

GD_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes) {
  GD_ALLOC_BODY(cuMemAlloc_v2, kDriverNotFound, Api::kCuMemAlloc, Kind::kDevice, (pointer, bytes),
                pointer ? *pointer : 0, bytes)
}
GD_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* pointer, size_t bytes, unsigned int flags) {
  GD_ALLOC_BODY(cuMemAllocManaged, kDriverNotFound, Api::kCuMemAllocManaged, Kind::kManaged, (pointer, bytes, flags),
                pointer ? *pointer : 0, bytes)
}
GD_EXPORT CUresult cuMemAllocHost_v2(void** pointer, size_t bytes) {
  GD_ALLOC_BODY(cuMemAllocHost_v2, kDriverNotFound, Api::kCuMemAllocHost, Kind::kHostPinned, (pointer, bytes),
                pointer ? GD_P(*pointer) : 0, bytes)
}
GD_EXPORT CUresult cuMemHostAlloc(void** pointer, size_t bytes, unsigned int flags) {
  GD_ALLOC_BODY(cuMemHostAlloc, kDriverNotFound, Api::kCuMemHostAlloc, Kind::kHostPinned, (pointer, bytes, flags),
                pointer ? GD_P(*pointer) : 0, bytes)
}
GD_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* pointer, size_t bytes, CUstream stream) {
  GD_ALLOC_BODY(cuMemAllocAsync, kDriverNotFound, Api::kCuMemAllocAsync, Kind::kDevice, (pointer, bytes, stream),
                pointer ? *pointer : 0, bytes)
}
GD_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* pointer, size_t bytes, CUstream stream) {
  GD_ALLOC_BODY(cuMemAllocAsync_ptsz, kDriverNotFound, Api::kCuMemAllocAsync, Kind::kDevice, (pointer, bytes, stream),
                pointer ? *pointer : 0, bytes)
}
GD_EXPORT CUresult cuMemFree_v2(CUdeviceptr pointer) {
  GD_FREE_BODY(cuMemFree_v2, kDriverNotFound, Api::kCuMemFree, RecordType::kFree, (pointer), pointer, 0, 0)
}
GD_EXPORT CUresult cuMemFreeHost(void* pointer) {
  GD_FREE_BODY(cuMemFreeHost, kDriverNotFound, Api::kCuMemFreeHost, RecordType::kFree, (pointer), GD_P(pointer), 0, 0)
}
GD_EXPORT CUresult cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
  GD_FREE_BODY(cuMemFreeAsync, kDriverNotFound, Api::kCuMemFreeAsync, RecordType::kFree, (pointer, stream), pointer,
               0, 0)
}
GD_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr pointer, CUstream stream) {
  GD_FREE_BODY(cuMemFreeAsync_ptsz, kDriverNotFound, Api::kCuMemFreeAsync, RecordType::kFree, (pointer, stream),
               pointer, 0, 0)
}
GD_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t bytes, const CUmemAllocationProp* prop,
                               unsigned long long flags) {
  GD_ALLOC_BODY(cuMemCreate, kDriverNotFound, Api::kCuMemCreate, KindOfProp(prop), (handle, bytes, prop, flags),
                handle ? *handle : 0, bytes)
}
GD_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  GD_FREE_BODY(cuMemRelease, kDriverNotFound, Api::kCuMemRelease, RecordType::kFree, (handle), handle, 0, 0)
}
GD_EXPORT CUresult cuMemMap(CUdeviceptr pointer, size_t bytes, size_t offset, CUmemGenericAllocationHandle handle,
                            unsigned long long flags) {
  auto real = reinterpret_cast<cuMemMap_t>(Real(kFn_cuMemMap));
  if (real == nullptr) return kDriverNotFound;
  if (!Recording()) return real(pointer, bytes, offset, handle, flags);
  DepthGuard guard;
  const CUresult result = real(pointer, bytes, offset, handle, flags);
  SendEvent(RecordType::kMap, Api::kCuMemMap, 0, pointer, bytes, 0, result, handle);
  return result;
}
GD_EXPORT CUresult cuMemUnmap(CUdeviceptr pointer, size_t bytes) {
  GD_FREE_BODY(cuMemUnmap, kDriverNotFound, Api::kCuMemUnmap, RecordType::kUnmap, (pointer, bytes), pointer, bytes, 0)
}

namespace {

// The wrapper for an entry point the driver handed out for `symbol` (a base
// name: "cuMemAlloc"), or the entry point itself when none follows it.
void* WrapProcAddress(const char* symbol, void* function, int cuda_version, cuuint64_t flags) {
  if (symbol == nullptr || function == nullptr || symbol[0] != 'c' || symbol[1] != 'u') return function;
  for (int i = kFn_cuMemAlloc_v2; i < kFunctionCount; ++i) {
    if (function == g_wrapper[i] || function == Real(i)) {
      if (g.header != nullptr) g.header->proc_address_wrapped.fetch_add(1, std::memory_order_relaxed);
      return g_wrapper[i];
    }
  }
  // Not an exported entry point: choose the variant the driver documents for
  // this name, version and flags.
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  struct Variant {
    const char* base;
    int function;
  };
  const Variant variants[] = {
      {"cuMemAlloc", cuda_version >= 3020 ? kFn_cuMemAlloc_v2 : -1},
      {"cuMemAllocManaged", kFn_cuMemAllocManaged},
      {"cuMemAllocHost", cuda_version >= 3020 ? kFn_cuMemAllocHost_v2 : -1},
      {"cuMemHostAlloc", kFn_cuMemHostAlloc},
      {"cuMemAllocAsync", per_thread ? kFn_cuMemAllocAsync_ptsz : kFn_cuMemAllocAsync},
      {"cuMemFree", cuda_version >= 3020 ? kFn_cuMemFree_v2 : -1},
      {"cuMemFreeHost", kFn_cuMemFreeHost},
      {"cuMemFreeAsync", per_thread ? kFn_cuMemFreeAsync_ptsz : kFn_cuMemFreeAsync},
      {"cuMemCreate", kFn_cuMemCreate},
      {"cuMemRelease", kFn_cuMemRelease},
      {"cuMemMap", kFn_cuMemMap},
      {"cuMemUnmap", kFn_cuMemUnmap},
      {"cuGetProcAddress", cuda_version >= 12000 ? kFn_cuGetProcAddress_v2 : kFn_cuGetProcAddress},
  };
  for (const Variant& variant : variants) {
    if (std::strcmp(symbol, variant.base) != 0) continue;
    if (variant.function < 0) break;
    // The wrapper calls the exported function of that version when there is
    // one (the same call the driver documents), else the one handed out.
    void* expected = nullptr;
    g_real[variant.function].compare_exchange_strong(expected, function);
    if (g.header != nullptr) g.header->proc_address_by_name.fetch_add(1, std::memory_order_relaxed);
    return g_wrapper[variant.function];
  }
  if (g.header != nullptr) {
    for (const Variant& variant : variants)
      if (std::strcmp(symbol, variant.base) == 0)
        g.header->proc_address_unmatched.fetch_add(1, std::memory_order_relaxed);
  }
  return function;
}

}  // namespace

GD_EXPORT CUresult cuGetProcAddress(const char* symbol, void** function, int cuda_version, cuuint64_t flags) {
  auto real = reinterpret_cast<cuGetProcAddress_t>(Real(kFn_cuGetProcAddress));
  if (real == nullptr) return kDriverNotFound;
  const CUresult result = real(symbol, function, cuda_version, flags);
  if (result == CUDA_SUCCESS && function != nullptr)
    *function = WrapProcAddress(symbol, *function, cuda_version, flags);
  return result;
}

GD_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** function, int cuda_version, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult* status) {
  auto real = reinterpret_cast<cuGetProcAddress_v2_t>(Real(kFn_cuGetProcAddress_v2));
  if (real == nullptr) return kDriverNotFound;
  const CUresult result = real(symbol, function, cuda_version, flags, status);
  if (result == CUDA_SUCCESS && function != nullptr)
    *function = WrapProcAddress(symbol, *function, cuda_version, flags);
  return result;
}

// What dlsym returns for a followed name in an explicit handle: the wrapper,
// with the handle's symbol as the real function. Null: let dlsym answer.
extern "C" __attribute__((visibility("hidden"))) void* gd_dlsym_filter(void* handle, const char* name) {
  DlsymFunction lookup = RealDlsym();
  if (lookup == nullptr || handle == RTLD_NEXT || name == nullptr || name[0] != 'c' || name[1] != 'u') return nullptr;
  const int function = FindFunction(name);
  if (function < 0) return nullptr;
  void* real = lookup(handle, name);
  if (real == nullptr || real == g_wrapper[function]) return real;
  void* expected = nullptr;
  g_real[function].compare_exchange_strong(expected, real);
  if (g.header != nullptr) g.header->dlsym_wrapped.fetch_add(1, std::memory_order_relaxed);
  return g_wrapper[function];
}

// dlsym itself: a jump, not a call, to the real one, so that it sees its
// caller's return address (dlsym(RTLD_NEXT) searches after the caller).
#if defined(__x86_64__)
asm(R"(
    .text
    .globl dlsym
    .type dlsym, @function
dlsym:
    .cfi_startproc
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call gd_dlsym_filter
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    testq %rax, %rax
    jnz 1f
    jmp *gd_real_dlsym(%rip)
1:
    ret
    .cfi_endproc
    .size dlsym, .-dlsym
)");
#elif defined(__aarch64__)
asm(R"(
    .text
    .globl dlsym
    .type dlsym, %function
dlsym:
    .cfi_startproc
    stp x29, x30, [sp, #-32]!
    .cfi_def_cfa_offset 32
    .cfi_offset 29, -32
    .cfi_offset 30, -24
    mov x29, sp
    stp x0, x1, [sp, #16]
    bl gd_dlsym_filter
    mov x2, x0
    ldp x0, x1, [sp, #16]
    ldp x29, x30, [sp], #32
    .cfi_def_cfa_offset 0
    cbz x2, 1f
    mov x0, x2
    ret
1:
    adrp x16, gd_real_dlsym
    ldr x16, [x16, #:lo12:gd_real_dlsym]
    br x16
    .cfi_endproc
    .size dlsym, .-dlsym
)");
#endif

namespace {

void AfterForkInChild() {
  g.pid = static_cast<uint32_t>(getpid());
  if (g.active.load()) {
    g.header->processes_attached.fetch_add(1, std::memory_order_relaxed);
    SendEvent(RecordType::kAttach, Api::kNone, 0, 0, 0, 0, 0, static_cast<uint64_t>(getppid()));
    SendText(TextOwner::kExecutable, g.pid, g.executable);
  }
}

__attribute__((constructor)) void Start() {
#define GD_WRAPPER(name, ret, params) g_wrapper[kFn_##name] = reinterpret_cast<void*>(&name);
  GPUDOCTOR_TRACE_RUNTIME_FUNCTIONS(GD_WRAPPER)
  GPUDOCTOR_TRACE_DRIVER_FUNCTIONS(GD_WRAPPER)
#undef GD_WRAPPER
  RealDlsym();
  const char* fd_text = getenv(kFdVariable);
  if (fd_text == nullptr || *fd_text == '\0') return;
  char* end = nullptr;
  const long fd = strtol(fd_text, &end, 10);
  if (*end != '\0' || fd < 0) return;
  struct stat status;
  if (fstat(static_cast<int>(fd), &status) != 0 || status.st_size < static_cast<off_t>(sizeof(RingHeader))) return;
  void* memory = mmap(nullptr, static_cast<size_t>(status.st_size), PROT_READ | PROT_WRITE, MAP_SHARED,
                      static_cast<int>(fd), 0);
  if (memory == MAP_FAILED) return;
  auto* header = static_cast<RingHeader*>(memory);
  const uint64_t capacity = header->capacity;
  if (std::memcmp(header->magic, kMagic, sizeof kMagic) != 0 || header->version != kVersion ||
      header->slot_bytes != kSlotBytes || capacity == 0 || (capacity & (capacity - 1)) != 0 ||
      RingBytes(capacity) > static_cast<uint64_t>(status.st_size)) {
    munmap(memory, static_cast<size_t>(status.st_size));
    return;
  }
  void* sites = mmap(nullptr, kSiteTableSize * sizeof(SiteEntry), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  g_sites = sites == MAP_FAILED ? nullptr : static_cast<SiteEntry*>(sites);
  if (const char* depth = getenv(kDepthVariable)) {
    const long frames = strtol(depth, &end, 10);
    if (*end == '\0' && frames >= 1 && frames <= static_cast<long>(kMaxFrames)) g.frames = static_cast<uint32_t>(frames);
  }
  const ssize_t n = readlink("/proc/self/exe", g.executable, sizeof g.executable - 1);
  g.executable[n > 0 ? n : 0] = '\0';
  g.header = header;
  g.slots = Slots(header);
  g.mask = capacity - 1;
  g.pid = static_cast<uint32_t>(getpid());
  // The unwinder finds its tables on first use; do that here, not in a hook.
  Stack warm;
  UnwindState state{0, false, 1, &warm};
  _Unwind_Backtrace(CollectFrame, &state);
  pthread_atfork(nullptr, nullptr, AfterForkInChild);
  header->processes_attached.fetch_add(1, std::memory_order_relaxed);
  g.active.store(true, std::memory_order_release);
  SendEvent(RecordType::kAttach, Api::kNone, 0, 0, 0, 0, 0, static_cast<uint64_t>(getppid()));
  SendText(TextOwner::kExecutable, g.pid, g.executable);
}

__attribute__((destructor)) void Stop() {
  if (!g.active.load()) return;
  SendEvent(RecordType::kDetach, Api::kNone, 0, 0, 0, 0, 0, 0);
}

}  // namespace
