// Allocations that never pass through an exported symbol the program links:
// the driver is opened with dlopen, cuGetProcAddress_v2 found with dlsym and
// every entry point fetched through it, as the CUDA runtime does; one more
// through the runtime's cudaGetDriverEntryPoint. Leaks, in known amounts:
//   LeakThroughProcAddress  20 x 2 MiB device (cuMemAlloc), never freed
//   LeakThroughEntryPoint   8 MiB managed (cuMemAllocManaged), never freed
//   MapPool                 16 MiB of physical memory (cuMemCreate) mapped, its handle
//                           released, never unmapped: still held
// and frees, through the same pointers, 20 x 1 MiB device and a 32 MiB handle
// mapped, unmapped and released.
#include <dlfcn.h>

#include <cstdio>

#include "cuda_calls.h"

namespace {

CUresult (*GetProcAddress)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
CUresult (*MemAlloc)(CUdeviceptr*, size_t);
CUresult (*MemFree)(CUdeviceptr);
CUresult (*MemCreate)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long);
CUresult (*MemRelease)(CUmemGenericAllocationHandle);
CUresult (*MemAddressReserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
CUresult (*MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
CUresult (*MemUnmap)(CUdeviceptr, size_t);

template <typename F>
void Fetch(const char* name, F& function) {
  void* found = nullptr;
  CUdriverProcAddressQueryResult status = 1;
  if (GetProcAddress(name, &found, 12040, CU_GET_PROC_ADDRESS_DEFAULT, &status) != 0 || found == nullptr) abort();
  function = reinterpret_cast<F>(found);
}

}  // namespace

__attribute__((noinline)) void LeakThroughProcAddress() {
  CUdeviceptr kept = 0, freed = 0;
  CHECK_CUDA(MemAlloc(&kept, 2 << 20));
  CHECK_CUDA(MemAlloc(&freed, 1 << 20));
  CHECK_CUDA(MemFree(freed));
}

__attribute__((noinline)) void LeakThroughEntryPoint() {
  void* found = nullptr;
  CHECK_CUDA(cudaGetDriverEntryPoint("cuMemAllocManaged", &found, 0, nullptr));
  CUdeviceptr table = 0;
  CHECK_CUDA(reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t, unsigned int)>(found)(&table, 8 << 20, 1));
}

__attribute__((noinline)) void MapPool(CUdeviceptr base) {
  CUmemAllocationProp prop{};
  prop.type = 1;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CUmemGenericAllocationHandle scratch = 0, pool = 0;
  CHECK_CUDA(MemCreate(&scratch, 32 << 20, &prop, 0));
  CHECK_CUDA(MemMap(base, 32 << 20, 0, scratch, 0));
  CHECK_CUDA(MemUnmap(base, 32 << 20));
  CHECK_CUDA(MemRelease(scratch));
  CHECK_CUDA(MemCreate(&pool, 16 << 20, &prop, 0));
  CHECK_CUDA(MemMap(base + (32 << 20), 16 << 20, 0, pool, 0));
  CHECK_CUDA(MemRelease(pool));  // still mapped: the memory stays held
}

int main() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) return 3;
  GetProcAddress = reinterpret_cast<decltype(GetProcAddress)>(dlsym(driver, "cuGetProcAddress_v2"));
  if (GetProcAddress == nullptr) return 3;
  Fetch("cuMemAlloc", MemAlloc);
  Fetch("cuMemFree", MemFree);
  Fetch("cuMemCreate", MemCreate);
  Fetch("cuMemRelease", MemRelease);
  Fetch("cuMemAddressReserve", MemAddressReserve);
  Fetch("cuMemMap", MemMap);
  Fetch("cuMemUnmap", MemUnmap);
  for (int i = 0; i < 20; ++i) LeakThroughProcAddress();
  LeakThroughEntryPoint();
  CUdeviceptr base = 0;
  CHECK_CUDA(MemAddressReserve(&base, 64 << 20, 0, 0, 0));
  MapPool(base);
  std::printf("leak_proc_address: done\n");
  return 0;
}
