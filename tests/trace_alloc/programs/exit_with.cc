// Prints a line on standard output, leaks one 1 MiB device buffer (in
// LeakOnce), then ends as its argument says: a number is the exit status,
// "signal:N" raises signal N. What gpudoctor trace-alloc must pass through.
#include <csignal>
#include <cstdio>
#include <cstring>

#include "cuda_calls.h"

__attribute__((noinline)) void LeakOnce() {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, 1 << 20));
}

int main(int argc, char** argv) {
  std::printf("program output\n");
  std::fflush(stdout);
  LeakOnce();
  if (argc > 1 && std::strncmp(argv[1], "signal:", 7) == 0) std::raise(std::atoi(argv[1] + 7));
  return ArgOr(argc, argv, 1, 0);
}
