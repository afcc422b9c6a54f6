// The memory test's kernels, compiled to PTX by clang at build time
// (-x cuda --cuda-device-only -nocudainc -nocudalib) and loaded with
// cuModuleLoadData; the driver compiles them for the GPU in front of it.
// Each is a grid-stride loop over the per-word work of memtest_patterns.h, so
// neighbouring threads touch neighbouring words: every access coalesced.
#include "device_support.h"
#include "memtest_patterns.h"

using namespace gpudoctor::memtest;
using gpudoctor::kernels::FirstIndex;
using gpudoctor::kernels::Stride;

namespace {

__attribute__((device)) void Check(ErrorLog* log, Index address, Word expected, Word actual) {
  if (actual == expected) return;
  const unsigned int slot = __atomic_fetch_add(&log->count, 1u, __ATOMIC_RELAXED);
  Record(log, slot, address, expected, actual);
}

}  // namespace

// Writes the pattern over `words` words at `base`.
extern "C" __global__ void gd_memtest_fill(Word* base, Index words, Pattern pattern) {
  const Index address = reinterpret_cast<Index>(base);
  for (Index i = FirstIndex(); i < words; i += Stride()) base[i] = Expected(pattern, address, i);
}

// Checks the pattern.
extern "C" __global__ void gd_memtest_check(const Word* base, Index words, Pattern pattern, ErrorLog* log) {
  const Index address = reinterpret_cast<Index>(base);
  for (Index i = FirstIndex(); i < words; i += Stride()) Check(log, address + i * sizeof(Word), Expected(pattern, address, i), base[i]);
}

// Moving inversions: checks the pattern and writes its complement in the same pass.
extern "C" __global__ void gd_memtest_check_invert(Word* base, Index words, Pattern pattern, ErrorLog* log) {
  const Index address = reinterpret_cast<Index>(base);
  for (Index i = FirstIndex(); i < words; i += Stride()) {
    const Word expected = Expected(pattern, address, i);
    const Word actual = base[i];
    Check(log, address + i * sizeof(Word), expected, actual);
    base[i] = ~expected;
  }
}
