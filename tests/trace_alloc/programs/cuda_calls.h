// The CUDA calls the test programs make, declared from the list the tracer
// follows (trace_alloc/cuda_alloc_api.h). They link the stub runtime and
// driver (testing/fake_cudart), never NVIDIA's.
#pragma once

#include <cstdlib>

#include "trace_alloc/cuda_alloc_api.h"

extern "C" {
#define GD_DECLARE(name, ret, params) ret name params;
GPUDOCTOR_TRACE_RUNTIME_FUNCTIONS(GD_DECLARE)
#undef GD_DECLARE
cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** function, unsigned long long flags,
                                    cudaDriverEntryPointQueryResult* status);
}

// Stops the program when a call fails: the tests count on every call succeeding.
#define CHECK_CUDA(call)      \
  do {                        \
    if ((call) != 0) abort(); \
  } while (0)

inline int ArgOr(int argc, char** argv, int index, int fallback) {
  return argc > index ? std::atoi(argv[index]) : fallback;
}
