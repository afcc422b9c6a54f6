// A growing list: each step keeps one more 1 MiB device buffer and never frees
// it; a 2 MiB scratch buffer per step is freed. Arguments: steps (100),
// milliseconds between steps (5).
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "cuda_calls.h"

__attribute__((noinline)) void GrowList(std::vector<void*>& list) {
  void* buffer = nullptr;
  CHECK_CUDA(cudaMalloc(&buffer, 1 << 20));
  list.push_back(buffer);
}

__attribute__((noinline)) void UseScratch() {
  void* scratch = nullptr;
  CHECK_CUDA(cudaMalloc(&scratch, 2 << 20));
  CHECK_CUDA(cudaFree(scratch));
}

int main(int argc, char** argv) {
  const int steps = ArgOr(argc, argv, 1, 100), pause_ms = ArgOr(argc, argv, 2, 5);
  std::vector<void*> list;
  for (int i = 0; i < steps; ++i) {
    GrowList(list);
    UseScratch();
    usleep(static_cast<useconds_t>(pause_ms) * 1000);
  }
  std::printf("leak_list: kept %zu buffers\n", list.size());
  return 0;
}
