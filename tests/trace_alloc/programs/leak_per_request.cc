// An inference server that leaks per request: each request allocates two
// 4 MiB device buffers and 64 KiB of pinned host memory and frees them, but
// keeps a 256 KiB stream-ordered allocation in a cache that is never emptied.
// Arguments: requests (200), milliseconds between requests (2).
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "cuda_calls.h"

__attribute__((noinline)) void* RememberRequest() {
  void* entry = nullptr;
  CHECK_CUDA(cudaMallocAsync(&entry, 256 << 10, nullptr));
  return entry;
}

__attribute__((noinline)) void HandleRequest(std::vector<void*>& cache) {
  void *input = nullptr, *output = nullptr, *staging = nullptr;
  CHECK_CUDA(cudaMalloc(&input, 4 << 20));
  CHECK_CUDA(cudaMalloc(&output, 4 << 20));
  CHECK_CUDA(cudaMallocHost(&staging, 64 << 10));
  cache.push_back(RememberRequest());
  CHECK_CUDA(cudaFreeHost(staging));
  CHECK_CUDA(cudaFree(output));
  CHECK_CUDA(cudaFreeAsync(input, nullptr));
}

int main(int argc, char** argv) {
  const int requests = ArgOr(argc, argv, 1, 200), pause_ms = ArgOr(argc, argv, 2, 2);
  std::vector<void*> cache;
  for (int i = 0; i < requests; ++i) {
    HandleRequest(cache);
    usleep(static_cast<useconds_t>(pause_ms) * 1000);
  }
  std::printf("leak_per_request: served %d requests\n", requests);
  return 0;
}
