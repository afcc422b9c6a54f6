// The cost of `gpudoctor trace-alloc` per CUDA call: a million cudaMalloc /
// cudaFree pairs through the stub runtime (testing/fake_cudart), called from
// a few frames down as real code would. bench/trace_alloc.sh runs it plain
// and under trace-alloc, alternating, and prints the difference per call.
//
//   trace_alloc_bench [PAIRS] [THREADS]   prints: pairs=N threads=T ns_per_pair=X
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "trace_alloc/cuda_alloc_api.h"

extern "C" cudaError_t cudaMalloc(void** pointer, size_t bytes);
extern "C" cudaError_t cudaFree(void* pointer);

namespace {

double NowSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

__attribute__((noinline)) void AllocateAndFree(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != 0 || cudaFree(p) != 0) std::abort();
}

// A few frames of "application" above the call, each a distinct return address.
__attribute__((noinline)) void Layer3(size_t bytes) { AllocateAndFree(bytes); asm volatile(""); }
__attribute__((noinline)) void Layer2(size_t bytes) { Layer3(bytes); asm volatile(""); }
__attribute__((noinline)) void Layer1(size_t bytes) { Layer2(bytes); asm volatile(""); }

void Run(long pairs) {
  for (long i = 0; i < pairs; ++i) Layer1(256 + static_cast<size_t>(i % 4) * 256);
}

}  // namespace

int main(int argc, char** argv) {
  const long pairs = argc > 1 ? std::atol(argv[1]) : 1'000'000;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  Run(1000);  // warm: the runtime finds the driver, the tracer its tables
  const double start = NowSeconds();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) workers.emplace_back(Run, pairs / threads);
  for (std::thread& worker : workers) worker.join();
  const double seconds = NowSeconds() - start;
  std::fprintf(stderr, "pairs=%ld threads=%d ns_per_pair=%.1f\n", pairs, threads, seconds * 1e9 / static_cast<double>(pairs) * threads);
  return 0;
}
