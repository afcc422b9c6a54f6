// A stand-in for libcuda.so.1, built only for the tests of `gpudoctor
// trace-alloc`: the driver's allocation calls over host memory, and
// cuGetProcAddress as the driver documents it (a base name and a CUDA version
// choose the versioned entry point; the per-thread flag the _ptsz one).
//
//   GPUDOCTOR_STUB_MEMORY_BYTES=N     device and managed memory beyond N bytes is out of memory
//   GPUDOCTOR_STUB_PRIVATE_ENTRY_POINTS=1
//                                     cuGetProcAddress hands out functions that are not the
//                                     exported symbols (as a driver may), so a tracer must match
//                                     them by name
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "trace_alloc/cuda_alloc_api.h"

#define STUB_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct Allocation {
  size_t bytes;
  bool counts;  // against GPUDOCTOR_STUB_MEMORY_BYTES
};

struct Memory {
  std::mutex mutex;
  std::unordered_map<uint64_t, Allocation> live;            // pointers handed out
  std::unordered_map<uint64_t, size_t> handles;             // cuMemCreate
  std::unordered_map<uint64_t, size_t> reservations;        // cuMemAddressReserve
  uint64_t next_handle = 1;
  size_t used = 0;
  size_t limit = 0;  // 0: none
};

Memory& State() {
  static Memory* memory = [] {
    auto* m = new Memory;
    if (const char* limit = std::getenv("GPUDOCTOR_STUB_MEMORY_BYTES")) m->limit = std::strtoull(limit, nullptr, 10);
    return m;
  }();
  return *memory;
}

CUresult Allocate(CUdeviceptr* out, size_t bytes, bool counts) {
  if (out == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  Memory& m = State();
  std::lock_guard lock(m.mutex);
  if (counts && m.limit != 0 && m.used + bytes > m.limit) return CUDA_ERROR_OUT_OF_MEMORY;
  void* p = std::malloc(bytes);  // large blocks are mapped lazily: untouched, they cost no memory
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  *out = reinterpret_cast<uint64_t>(p);
  m.live[*out] = {bytes, counts};
  if (counts) m.used += bytes;
  return CUDA_SUCCESS;
}

CUresult Release(uint64_t pointer) {
  Memory& m = State();
  std::lock_guard lock(m.mutex);
  auto found = m.live.find(pointer);
  if (found == m.live.end()) return CUDA_ERROR_INVALID_VALUE;
  if (found->second.counts) m.used -= found->second.bytes;
  m.live.erase(found);
  std::free(reinterpret_cast<void*>(pointer));
  return CUDA_SUCCESS;
}

CUresult AllocDevice(CUdeviceptr* pointer, size_t bytes) { return Allocate(pointer, bytes, true); }
CUresult AllocManaged(CUdeviceptr* pointer, size_t bytes, unsigned int) { return Allocate(pointer, bytes, true); }
CUresult AllocHost(void** pointer, size_t bytes) { return Allocate(reinterpret_cast<CUdeviceptr*>(pointer), bytes, false); }
CUresult HostAlloc(void** pointer, size_t bytes, unsigned int) { return AllocHost(pointer, bytes); }
CUresult AllocAsync(CUdeviceptr* pointer, size_t bytes, CUstream) { return Allocate(pointer, bytes, true); }
CUresult FreeDevice(CUdeviceptr pointer) { return Release(pointer); }
CUresult FreeHost(void* pointer) { return Release(reinterpret_cast<uint64_t>(pointer)); }
CUresult FreeAsync(CUdeviceptr pointer, CUstream) { return Release(pointer); }

// The private twins that GPUDOCTOR_STUB_PRIVATE_ENTRY_POINTS hands out: other
// addresses, same work.
__attribute__((noinline)) CUresult PrivateAllocDevice(CUdeviceptr* p, size_t n) { return AllocDevice(p, n); }
__attribute__((noinline)) CUresult PrivateFreeDevice(CUdeviceptr p) { return FreeDevice(p); }
__attribute__((noinline)) CUresult PrivateAllocManaged(CUdeviceptr* p, size_t n, unsigned f) { return AllocManaged(p, n, f); }

}  // namespace

STUB_EXPORT CUresult cuInit(unsigned int) { return CUDA_SUCCESS; }
STUB_EXPORT CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = 12040;
  return CUDA_SUCCESS;
}
STUB_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes) { return AllocDevice(pointer, bytes); }
STUB_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* pointer, size_t bytes, unsigned int flags) {
  return AllocManaged(pointer, bytes, flags);
}
STUB_EXPORT CUresult cuMemAllocHost_v2(void** pointer, size_t bytes) { return AllocHost(pointer, bytes); }
STUB_EXPORT CUresult cuMemHostAlloc(void** pointer, size_t bytes, unsigned int flags) {
  return HostAlloc(pointer, bytes, flags);
}
STUB_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* pointer, size_t bytes, CUstream stream) {
  return AllocAsync(pointer, bytes, stream);
}
STUB_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* pointer, size_t bytes, CUstream stream) {
  return AllocAsync(pointer, bytes, stream);
}
STUB_EXPORT CUresult cuMemFree_v2(CUdeviceptr pointer) { return FreeDevice(pointer); }
STUB_EXPORT CUresult cuMemFreeHost(void* pointer) { return FreeHost(pointer); }
STUB_EXPORT CUresult cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) { return FreeAsync(pointer, stream); }
STUB_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr pointer, CUstream stream) { return FreeAsync(pointer, stream); }

// Virtual memory management: a handle is physical memory (counted), an
// address range is reserved with no access, and mapping opens it.
STUB_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t bytes, const CUmemAllocationProp*,
                                 unsigned long long) {
  if (handle == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  Memory& m = State();
  std::lock_guard lock(m.mutex);
  if (m.limit != 0 && m.used + bytes > m.limit) return CUDA_ERROR_OUT_OF_MEMORY;
  *handle = m.next_handle++;
  m.handles[*handle] = bytes;
  m.used += bytes;
  return CUDA_SUCCESS;
}
STUB_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  Memory& m = State();
  std::lock_guard lock(m.mutex);
  auto found = m.handles.find(handle);
  if (found == m.handles.end()) return CUDA_ERROR_INVALID_VALUE;
  m.used -= found->second;
  m.handles.erase(found);
  return CUDA_SUCCESS;
}
STUB_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* pointer, size_t bytes, size_t, CUdeviceptr, unsigned long long) {
  if (pointer == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = reinterpret_cast<CUdeviceptr>(p);
  Memory& m = State();
  std::lock_guard lock(m.mutex);
  m.reservations[*pointer] = bytes;
  return CUDA_SUCCESS;
}
STUB_EXPORT CUresult cuMemAddressFree(CUdeviceptr pointer, size_t bytes) {
  Memory& m = State();
  std::lock_guard lock(m.mutex);
  if (m.reservations.erase(pointer) == 0) return CUDA_ERROR_INVALID_VALUE;
  munmap(reinterpret_cast<void*>(pointer), bytes);
  return CUDA_SUCCESS;
}
STUB_EXPORT CUresult cuMemMap(CUdeviceptr pointer, size_t bytes, size_t, CUmemGenericAllocationHandle handle,
                              unsigned long long) {
  {
    Memory& m = State();
    std::lock_guard lock(m.mutex);
    if (!m.handles.contains(handle)) return CUDA_ERROR_INVALID_VALUE;
  }
  return mprotect(reinterpret_cast<void*>(pointer), bytes, PROT_READ | PROT_WRITE) == 0 ? CUDA_SUCCESS
                                                                                        : CUDA_ERROR_INVALID_VALUE;
}
STUB_EXPORT CUresult cuMemUnmap(CUdeviceptr pointer, size_t bytes) {
  return mprotect(reinterpret_cast<void*>(pointer), bytes, PROT_NONE) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

STUB_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** function, int cuda_version, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult* status);

STUB_EXPORT CUresult cuGetProcAddress(const char* symbol, void** function, int cuda_version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, function, cuda_version, flags, nullptr);
}

STUB_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** function, int cuda_version, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || function == nullptr) return CUDA_ERROR_INVALID_VALUE;
  static const bool private_entry_points = [] {
    const char* value = std::getenv("GPUDOCTOR_STUB_PRIVATE_ENTRY_POINTS");
    return value != nullptr && std::string_view(value) == "1";
  }();
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const std::string_view name(symbol);
  void* found = nullptr;
  auto entry = [](auto* f) { return reinterpret_cast<void*>(f); };
  if (name == "cuInit") found = entry(&cuInit);
  else if (name == "cuDriverGetVersion") found = entry(&cuDriverGetVersion);
  else if (name == "cuMemAlloc" && cuda_version >= 3020)
    found = private_entry_points ? entry(&PrivateAllocDevice) : entry(&cuMemAlloc_v2);
  else if (name == "cuMemFree" && cuda_version >= 3020)
    found = private_entry_points ? entry(&PrivateFreeDevice) : entry(&cuMemFree_v2);
  else if (name == "cuMemAllocManaged")
    found = private_entry_points ? entry(&PrivateAllocManaged) : entry(&cuMemAllocManaged);
  else if (name == "cuMemAllocHost" && cuda_version >= 3020) found = entry(&cuMemAllocHost_v2);
  else if (name == "cuMemHostAlloc") found = entry(&cuMemHostAlloc);
  else if (name == "cuMemFreeHost") found = entry(&cuMemFreeHost);
  else if (name == "cuMemAllocAsync") found = per_thread ? entry(&cuMemAllocAsync_ptsz) : entry(&cuMemAllocAsync);
  else if (name == "cuMemFreeAsync") found = per_thread ? entry(&cuMemFreeAsync_ptsz) : entry(&cuMemFreeAsync);
  else if (name == "cuMemCreate") found = entry(&cuMemCreate);
  else if (name == "cuMemRelease") found = entry(&cuMemRelease);
  else if (name == "cuMemMap") found = entry(&cuMemMap);
  else if (name == "cuMemUnmap") found = entry(&cuMemUnmap);
  else if (name == "cuMemAddressReserve") found = entry(&cuMemAddressReserve);
  else if (name == "cuMemAddressFree") found = entry(&cuMemAddressFree);
  else if (name == "cuGetProcAddress")
    found = cuda_version >= 12000 ? entry(&cuGetProcAddress_v2) : entry(&cuGetProcAddress);
  *function = found;
  if (status != nullptr) *status = found != nullptr ? 0 : 1;  // SUCCESS, SYMBOL_NOT_FOUND
  return CUDA_SUCCESS;
}
