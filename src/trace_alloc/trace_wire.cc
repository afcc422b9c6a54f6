#include "trace_alloc/trace_wire.h"

namespace gpudoctor::trace_wire {

const char* ApiName(uint8_t api) {
  static constexpr const char* kNames[] = {
      "?",
      "cudaMalloc", "cudaMallocManaged", "cudaMallocAsync", "cudaMallocHost", "cudaHostAlloc",
      "cudaFree", "cudaFreeAsync", "cudaFreeHost",
      "cuMemAlloc_v2", "cuMemAllocManaged", "cuMemAllocHost_v2", "cuMemHostAlloc", "cuMemAllocAsync",
      "cuMemFree_v2", "cuMemFreeHost", "cuMemFreeAsync",
      "cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap"};
  static_assert(sizeof kNames / sizeof kNames[0] == static_cast<size_t>(Api::kCount));
  return api < static_cast<uint8_t>(Api::kCount) ? kNames[api] : "?";
}

}  // namespace gpudoctor::trace_wire
