// The memory test's per-word work, written once for both sides: compiled into
// PTX for the GPU (memtest_kernels.cu, by clang at build time) and into the
// host build, where the fake CUDA driver runs it and the test checks it.
// Plain C++ with fixed-width types, no standard library: device code has none.
#pragma once

#include "host_device.h"

namespace gpudoctor::memtest {

typedef unsigned int Word;            // 32-bit words, read and written coalesced
typedef unsigned long long Index;

// What a pass writes; `param` and `seed` mean what each kind says.
enum PatternKind : unsigned int {
  kConstant = 0,         // param
  kOwnAddress = 1,       // the low 32 bits of the word's own address; seed 1: inverted
  kRandom = 2,           // a hash of (seed, index): every word different, reproducible
  kModulo20 = 3,         // param at index % 20 == seed, ~param elsewhere
  kShiftingOnes = 4,     // 1 rotated left by (index + seed) % 32
};

struct Pattern {
  PatternKind kind;
  Word param;
  Word seed;
  Word inverted;  // 1: the complement of the above (moving inversions' second half)
};

// One recorded mismatch. The log is device memory the check kernels fill;
// one log serves every chunk of a step, read once the step is done.
struct ErrorRecord {
  Index address;  // device address of the word
  Word expected;
  Word actual;
};

inline constexpr unsigned int kMaxErrorRecords = 1024;

struct ErrorLog {
  unsigned int count;  // every mismatch, recorded or not
  unsigned int reserved;
  ErrorRecord records[kMaxErrorRecords];
};

GD_HD Word RotateLeft(Word value, unsigned int by) { return by == 0 ? value : (value << by) | (value >> (32 - by)); }

GD_HD Word Mix(Index index, Word seed) {
  // splitmix64's finaliser: fast, and every word of a chunk gets another value.
  Index x = index + 0x9E3779B97F4A7C15ull * (static_cast<Index>(seed) + 1);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return static_cast<Word>(x ^ (x >> 31));
}

// The word `pattern` puts at `index` of a chunk whose first word is at device address `base`.
GD_HD Word Expected(const Pattern& pattern, Index base, Index index) {
  Word value;
  switch (pattern.kind) {
    case kOwnAddress: value = static_cast<Word>(base + index * sizeof(Word)); break;
    case kRandom: value = Mix(index, pattern.seed); break;
    case kModulo20: value = index % 20 == pattern.seed ? pattern.param : ~pattern.param; break;
    case kShiftingOnes: value = RotateLeft(1u, static_cast<unsigned int>((index + pattern.seed) % 32)); break;
    default: value = pattern.param; break;
  }
  return pattern.inverted ? ~value : value;
}

// Records a mismatch in `slot`, the value of log->count before the caller's
// atomic increment; past kMaxErrorRecords mismatches are only counted.
GD_HD void Record(ErrorLog* log, unsigned int slot, Index address, Word expected, Word actual) {
  if (slot < kMaxErrorRecords) {
    log->records[slot].address = address;
    log->records[slot].expected = expected;
    log->records[slot].actual = actual;
  }
}

}  // namespace gpudoctor::memtest
