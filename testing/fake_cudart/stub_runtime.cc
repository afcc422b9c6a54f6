// A stand-in for libcudart.so.12, built only for the tests of `gpudoctor
// trace-alloc`. Like NVIDIA's runtime it reaches the driver through
// cuGetProcAddress, which it finds with dlsym in a handle of libcuda.so.1
// (the stub driver beside it), so the tracer's cuGetProcAddress and dlsym
// paths are tested as a real program would use them.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "trace_alloc/cuda_alloc_api.h"

#define STUB_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kRuntimeVersion = 12040;
constexpr cudaError_t kInitializationError = 3;

struct Driver {
  CUresult (*get_proc_address)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*) = nullptr;
  CUresult (*init)(unsigned int) = nullptr;
  CUresult (*alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*alloc_managed)(CUdeviceptr*, size_t, unsigned int) = nullptr;
  CUresult (*alloc_host)(void**, size_t) = nullptr;
  CUresult (*host_alloc)(void**, size_t, unsigned int) = nullptr;
  CUresult (*alloc_async)(CUdeviceptr*, size_t, CUstream) = nullptr;
  CUresult (*free)(CUdeviceptr) = nullptr;
  CUresult (*free_host)(void*) = nullptr;
  CUresult (*free_async)(CUdeviceptr, CUstream) = nullptr;
  bool ready = false;
};

template <typename F>
void Fetch(Driver& d, const char* name, F& function) {
  void* found = nullptr;
  d.get_proc_address(name, &found, kRuntimeVersion, CU_GET_PROC_ADDRESS_DEFAULT, nullptr);
  function = reinterpret_cast<F>(found);
}

const Driver& TheDriver() {
  static Driver driver = [] {
    Driver d;
    void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) return d;
    d.get_proc_address = reinterpret_cast<decltype(d.get_proc_address)>(dlsym(library, "cuGetProcAddress_v2"));
    if (d.get_proc_address == nullptr) return d;
    Fetch(d, "cuInit", d.init);
    Fetch(d, "cuMemAlloc", d.alloc);
    Fetch(d, "cuMemAllocManaged", d.alloc_managed);
    Fetch(d, "cuMemAllocHost", d.alloc_host);
    Fetch(d, "cuMemHostAlloc", d.host_alloc);
    Fetch(d, "cuMemAllocAsync", d.alloc_async);
    Fetch(d, "cuMemFree", d.free);
    Fetch(d, "cuMemFreeHost", d.free_host);
    Fetch(d, "cuMemFreeAsync", d.free_async);
    d.ready = d.init && d.alloc && d.alloc_managed && d.alloc_host && d.host_alloc && d.alloc_async && d.free &&
              d.free_host && d.free_async && d.init(0) == CUDA_SUCCESS;
    return d;
  }();
  return driver;
}

// The runtime's codes for what the stub driver returns: success, invalid
// value and out of memory keep their numbers.
cudaError_t FromDriver(CUresult result) { return static_cast<cudaError_t>(result); }

}  // namespace

STUB_EXPORT cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  const Driver& d = TheDriver();
  if (!d.ready) return kInitializationError;
  return FromDriver(d.alloc(reinterpret_cast<CUdeviceptr*>(pointer), bytes));
}
STUB_EXPORT cudaError_t cudaMallocManaged(void** pointer, size_t bytes, unsigned int flags) {
  const Driver& d = TheDriver();
  if (!d.ready) return kInitializationError;
  return FromDriver(d.alloc_managed(reinterpret_cast<CUdeviceptr*>(pointer), bytes, flags));
}
STUB_EXPORT cudaError_t cudaMallocAsync(void** pointer, size_t bytes, cudaStream_t stream) {
  const Driver& d = TheDriver();
  if (!d.ready) return kInitializationError;
  return FromDriver(d.alloc_async(reinterpret_cast<CUdeviceptr*>(pointer), bytes, stream));
}
STUB_EXPORT cudaError_t cudaMallocHost(void** pointer, size_t bytes) {
  const Driver& d = TheDriver();
  if (!d.ready) return kInitializationError;
  return FromDriver(d.alloc_host(pointer, bytes));
}
STUB_EXPORT cudaError_t cudaHostAlloc(void** pointer, size_t bytes, unsigned int flags) {
  const Driver& d = TheDriver();
  if (!d.ready) return kInitializationError;
  return FromDriver(d.host_alloc(pointer, bytes, flags));
}
STUB_EXPORT cudaError_t cudaFree(void* pointer) {
  const Driver& d = TheDriver();
  if (!d.ready) return kInitializationError;
  if (pointer == nullptr) return 0;
  return FromDriver(d.free(reinterpret_cast<CUdeviceptr>(pointer)));
}
STUB_EXPORT cudaError_t cudaFreeAsync(void* pointer, cudaStream_t stream) {
  const Driver& d = TheDriver();
  if (!d.ready) return kInitializationError;
  return FromDriver(d.free_async(reinterpret_cast<CUdeviceptr>(pointer), stream));
}
STUB_EXPORT cudaError_t cudaFreeHost(void* pointer) {
  const Driver& d = TheDriver();
  if (!d.ready) return kInitializationError;
  return FromDriver(d.free_host(pointer));
}
STUB_EXPORT cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** function, unsigned long long flags,
                                                cudaDriverEntryPointQueryResult* status) {
  const Driver& d = TheDriver();
  if (!d.ready) return kInitializationError;
  return FromDriver(d.get_proc_address(symbol, function, kRuntimeVersion, flags, status));
}
STUB_EXPORT cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return 1;
  *version = kRuntimeVersion;
  return 0;
}
