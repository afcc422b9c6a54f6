// The CUDA runtime and driver allocation calls that `gpudoctor trace-alloc`
// follows, declared here from NVIDIA's documentation (no NVIDIA header is used
// or shipped; the driver's basic types come from diag/cuda_api.h). The
// preloaded library (preload/trace_hooks.cc) defines every one of them as a
// wrapper; the stub runtime and driver of the tests (testing/fake_cudart)
// implement them over host memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "diag/cuda_api.h"

extern "C" {

typedef int cudaError_t;  // cudaSuccess (0) or an error code
typedef struct CUstream_st* cudaStream_t;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef unsigned long long cuuint64_t;
typedef int CUdriverProcAddressQueryResult;  // CU_GET_PROC_ADDRESS_SUCCESS (0), ...
typedef int cudaDriverEntryPointQueryResult;

// cuGetProcAddress flags.
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_DEFAULT = 0;
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1;
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2;

// cudaMallocManaged / cuMemAllocManaged flags.
inline constexpr unsigned int CU_MEM_ATTACH_GLOBAL = 0x1;

// CUmemAllocationProp as cuMemCreate reads it; only `location.type` is
// looked at (device or host memory).
inline constexpr int CU_MEM_LOCATION_TYPE_DEVICE = 1;
inline constexpr int CU_MEM_LOCATION_TYPE_HOST = 2;
inline constexpr int CU_MEM_LOCATION_TYPE_HOST_NUMA = 3;
inline constexpr int CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT = 4;
struct CUmemLocation {
  int type;
  int id;
};
struct CUmemAllocationProp {
  int type;                   // CU_MEM_ALLOCATION_TYPE_PINNED (1)
  int requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};

}  // extern "C"

// X(name, return type, parameter list): every entry point the preloaded
// library defines, runtime first. The driver's are the exported (versioned)
// symbols; cuGetProcAddress hands out the same wrappers.
#define GPUDOCTOR_TRACE_RUNTIME_FUNCTIONS(X)                                                    \
  X(cudaMalloc, cudaError_t, (void** pointer, size_t bytes))                                   \
  X(cudaMallocManaged, cudaError_t, (void** pointer, size_t bytes, unsigned int flags))        \
  X(cudaMallocAsync, cudaError_t, (void** pointer, size_t bytes, cudaStream_t stream))         \
  X(cudaMallocHost, cudaError_t, (void** pointer, size_t bytes))                               \
  X(cudaHostAlloc, cudaError_t, (void** pointer, size_t bytes, unsigned int flags))            \
  X(cudaFree, cudaError_t, (void* pointer))                                                    \
  X(cudaFreeAsync, cudaError_t, (void* pointer, cudaStream_t stream))                          \
  X(cudaFreeHost, cudaError_t, (void* pointer))

#define GPUDOCTOR_TRACE_DRIVER_FUNCTIONS(X)                                                                    \
  X(cuMemAlloc_v2, CUresult, (CUdeviceptr * pointer, size_t bytes))                                           \
  X(cuMemAllocManaged, CUresult, (CUdeviceptr * pointer, size_t bytes, unsigned int flags))                   \
  X(cuMemAllocHost_v2, CUresult, (void** pointer, size_t bytes))                                              \
  X(cuMemHostAlloc, CUresult, (void** pointer, size_t bytes, unsigned int flags))                             \
  X(cuMemAllocAsync, CUresult, (CUdeviceptr * pointer, size_t bytes, CUstream stream))                        \
  X(cuMemAllocAsync_ptsz, CUresult, (CUdeviceptr * pointer, size_t bytes, CUstream stream))                   \
  X(cuMemFree_v2, CUresult, (CUdeviceptr pointer))                                                            \
  X(cuMemFreeHost, CUresult, (void* pointer))                                                                 \
  X(cuMemFreeAsync, CUresult, (CUdeviceptr pointer, CUstream stream))                                         \
  X(cuMemFreeAsync_ptsz, CUresult, (CUdeviceptr pointer, CUstream stream))                                    \
  X(cuMemCreate, CUresult,                                                                                    \
    (CUmemGenericAllocationHandle * handle, size_t bytes, const CUmemAllocationProp* prop,                    \
     unsigned long long flags))                                                                               \
  X(cuMemRelease, CUresult, (CUmemGenericAllocationHandle handle))                                            \
  X(cuMemMap, CUresult,                                                                                       \
    (CUdeviceptr pointer, size_t bytes, size_t offset, CUmemGenericAllocationHandle handle,                   \
     unsigned long long flags))                                                                               \
  X(cuMemUnmap, CUresult, (CUdeviceptr pointer, size_t bytes))                                                \
  X(cuGetProcAddress, CUresult, (const char* symbol, void** function, int cuda_version, cuuint64_t flags))    \
  X(cuGetProcAddress_v2, CUresult,                                                                            \
    (const char* symbol, void** function, int cuda_version, cuuint64_t flags,                                 \
     CUdriverProcAddressQueryResult* status))
