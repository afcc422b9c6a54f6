// The subset of the CUDA driver API that gpudoctor calls, declared here from
// NVIDIA's documentation (no NVIDIA header is used or shipped). libcuda.so.1
// is loaded at run time (cuda_driver.h); the fake driver in testing/fake_cuda
// implements the same list.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

typedef int CUresult;  // CUDA_SUCCESS or an error code
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef unsigned long long CUdeviceptr;

enum : CUresult {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,  // the PTX's ISA is newer than the driver reads
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_LAUNCH_TIMEOUT = 702,
  CUDA_ERROR_ECC_UNCORRECTABLE = 214,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
  CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
  CUDA_ERROR_UNKNOWN = 999,
};

typedef int CUdevice_attribute;
enum : CUdevice_attribute {
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
};

// cuMemHostAlloc flags.
inline constexpr unsigned int CU_MEMHOSTALLOC_PORTABLE = 0x01;

}  // extern "C"

// X(name, return type, parameter list): every driver entry point gpudoctor
// uses, the versioned symbol where the driver has one.
#define GPUDOCTOR_CUDA_FUNCTIONS(X)                                                                          \
  X(cuInit, CUresult, (unsigned int flags))                                                                 \
  X(cuDriverGetVersion, CUresult, (int* version))                                                           \
  X(cuGetErrorName, CUresult, (CUresult error, const char** name))                                          \
  X(cuGetErrorString, CUresult, (CUresult error, const char** text))                                        \
  X(cuDeviceGetCount, CUresult, (int* count))                                                               \
  X(cuDeviceGet, CUresult, (CUdevice * device, int ordinal))                                                \
  X(cuDeviceGetName, CUresult, (char* name, int length, CUdevice device))                                   \
  X(cuDeviceGetAttribute, CUresult, (int* value, CUdevice_attribute attribute, CUdevice device))            \
  X(cuDeviceGetPCIBusId, CUresult, (char* bus_id, int length, CUdevice device))                             \
  X(cuDeviceTotalMem_v2, CUresult, (size_t * bytes, CUdevice device))                                       \
  X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext * context, CUdevice device))                             \
  X(cuDevicePrimaryCtxRelease_v2, CUresult, (CUdevice device))                                              \
  X(cuCtxSetCurrent, CUresult, (CUcontext context))                                                         \
  X(cuCtxSynchronize, CUresult, ())                                                                         \
  X(cuMemGetInfo_v2, CUresult, (size_t * free, size_t * total))                                             \
  X(cuMemAlloc_v2, CUresult, (CUdeviceptr * pointer, size_t bytes))                                         \
  X(cuMemFree_v2, CUresult, (CUdeviceptr pointer))                                                          \
  X(cuMemsetD32_v2, CUresult, (CUdeviceptr pointer, unsigned int value, size_t count))                      \
  X(cuMemcpyDtoH_v2, CUresult, (void* host, CUdeviceptr device, size_t bytes))                              \
  X(cuMemcpyHtoD_v2, CUresult, (CUdeviceptr device, const void* host, size_t bytes))                        \
  X(cuMemcpyDtoD_v2, CUresult, (CUdeviceptr destination, CUdeviceptr source, size_t bytes))                 \
  X(cuMemHostAlloc, CUresult, (void** pointer, size_t bytes, unsigned int flags))                           \
  X(cuMemFreeHost, CUresult, (void* pointer))                                                               \
  X(cuDeviceCanAccessPeer, CUresult, (int* can_access, CUdevice device, CUdevice peer))                    \
  X(cuCtxEnablePeerAccess, CUresult, (CUcontext peer, unsigned int flags))                                  \
  X(cuMemcpyPeer, CUresult,                                                                                 \
    (CUdeviceptr destination, CUcontext destination_context, CUdeviceptr source, CUcontext source_context,  \
     size_t bytes))                                                                                         \
  X(cuModuleLoadData, CUresult, (CUmodule * module, const void* image))                                     \
  X(cuModuleUnload, CUresult, (CUmodule module))                                                            \
  X(cuModuleGetFunction, CUresult, (CUfunction * function, CUmodule module, const char* name))              \
  X(cuLaunchKernel, CUresult,                                                                               \
    (CUfunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z, unsigned int block_x, \
     unsigned int block_y, unsigned int block_z, unsigned int shared_bytes, CUstream stream, void** params,   \
     void** extra))                                                                                         \
  X(cuEventCreate, CUresult, (CUevent * event, unsigned int flags))                                         \
  X(cuEventRecord, CUresult, (CUevent event, CUstream stream))                                              \
  X(cuEventSynchronize, CUresult, (CUevent event))                                                          \
  X(cuEventElapsedTime, CUresult, (float* milliseconds, CUevent start, CUevent end))                       \
  X(cuEventDestroy_v2, CUresult, (CUevent event))
