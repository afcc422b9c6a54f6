// A managed allocation never freed: 64 MiB of embeddings loaded once, then
// steps that allocate and free 1 MiB of pinned host memory each. Arguments:
// steps (50), milliseconds between steps (2).
#include <unistd.h>

#include <cstdio>

#include "cuda_calls.h"

__attribute__((noinline)) void* LoadEmbeddings() {
  void* table = nullptr;
  CHECK_CUDA(cudaMallocManaged(&table, 64 << 20, CU_MEM_ATTACH_GLOBAL));
  return table;
}

__attribute__((noinline)) void Step() {
  void* staging = nullptr;
  CHECK_CUDA(cudaHostAlloc(&staging, 1 << 20, 0));
  CHECK_CUDA(cudaFreeHost(staging));
}

int main(int argc, char** argv) {
  const int steps = ArgOr(argc, argv, 1, 50), pause_ms = ArgOr(argc, argv, 2, 2);
  void* embeddings = LoadEmbeddings();
  for (int i = 0; i < steps; ++i) {
    Step();
    usleep(static_cast<useconds_t>(pause_ms) * 1000);
  }
  std::printf("leak_managed: embeddings at %p\n", embeddings);
  return 0;
}
