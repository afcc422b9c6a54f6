// Thread safety and child processes: 8 threads each make 1,000 device
// allocations freed at once and keep 10 of 64 KiB (in KeepPerThread); then a
// forked child keeps 1 MiB (in ChildKeeps) and exits 0. Arguments: none.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <thread>
#include <vector>

#include "cuda_calls.h"

__attribute__((noinline)) void KeepPerThread(std::vector<void*>& kept) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, 64 << 10));
  kept.push_back(p);
}

__attribute__((noinline)) void Churn() {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, 4096));
  CHECK_CUDA(cudaFree(p));
}

__attribute__((noinline)) void ChildKeeps() {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, 1 << 20));
}

int main() {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([] {
      std::vector<void*> kept;
      for (int i = 0; i < 1000; ++i) {
        Churn();
        if (i % 100 == 0) KeepPerThread(kept);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const pid_t child = fork();
  if (child == 0) {
    ChildKeeps();
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  std::printf("threads_and_fork: child exited %d\n", WEXITSTATUS(status));
  return 0;
}
