// The compute burn's per-thread work, written once for both sides: compiled
// into PTX for the GPU (burn_kernels.cu) and into the host build, where the
// fake CUDA driver runs it. Plain C++, no standard library.
//
// Every matrix entry is a small integer in [-2, 2], a hash of its position,
// so every product and every partial sum is exact in FP64, FP32, TF32 and
// BF16 with FP32 accumulation (|C| <= 4n < 2^24). A product is verified by
// two checksums of each row of C, computed exactly in 64-bit integers: the
// plain sum S0 and the sum weighted by column index S1 = sum_j j * C[i][j].
// They are compared with the same sums derived from the entries alone
// (A times B's plain and weighted row sums). A wrong entry (i, j), off by e,
// moves S0 of row i by e and S1 by j * e: it is found, and its column is
// S1's change over S0's. Two wrong entries of one row cannot hide each other
// in both sums. Reading C once, along rows, keeps every access coalesced.
//
// Matrices are n x n, column-major (element (row, col) at row + col * n), as
// cuBLAS has them.
#pragma once

#include "host_device.h"

namespace gpudoctor::burn {

typedef unsigned long long Index;
typedef long long Sum;

// Column or row segments each thread of the sums kernel adds up.
inline constexpr Index kSegment = 256;

GD_HD int Entry(unsigned int seed, Index row, Index col) {
  unsigned long long x = (row << 32 ^ col) + 0x9E3779B97F4A7C15ull * (static_cast<unsigned long long>(seed) + 1);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<int>(x % 5) - 2;
}

// The bfloat16 bits of a small integer: the top half of its float, exact.
GD_HD unsigned short Bf16Bits(float value) {
  return static_cast<unsigned short>(__builtin_bit_cast(unsigned int, value) >> 16);
}
GD_HD float Bf16Value(unsigned short bits) { return __builtin_bit_cast(float, static_cast<unsigned int>(bits) << 16); }

// Thread `t` of n*n: writes one entry of a matrix made from `seed`.
template <typename T>
GD_HD void FillThread(T* matrix, Index n, unsigned int seed, Index t) {
  matrix[t] = static_cast<T>(Entry(seed, t % n, t / n));
}
GD_HD void FillBf16Thread(unsigned short* matrix, Index n, unsigned int seed, Index t) {
  matrix[t] = Bf16Bits(static_cast<float>(Entry(seed, t % n, t / n)));
}

// Thread `k` of n, first step of the expected sums: B's row k summed plain and weighted by column.
GD_HD void ExpectedStep1Thread(Index n, unsigned int seed_b, Sum* b_sums, Sum* b_weighted, Index k) {
  Sum plain = 0, weighted = 0;
  for (Index j = 0; j < n; ++j) {
    const Sum entry = Entry(seed_b, k, j);
    plain += entry;
    weighted += static_cast<Sum>(j) * entry;
  }
  b_sums[k] = plain;
  b_weighted[k] = weighted;
}

// Thread `i` of n, second step: C's row i as its two checksums must be.
GD_HD void ExpectedStep2Thread(Index n, unsigned int seed_a, const Sum* b_sums, const Sum* b_weighted, Sum* sums,
                               Sum* weighted, Index i) {
  Sum plain = 0, by_column = 0;
  for (Index k = 0; k < n; ++k) {
    const Sum entry = Entry(seed_a, i, k);
    plain += entry * b_sums[k];
    by_column += entry * b_weighted[k];
  }
  sums[i] = plain;
  weighted[i] = by_column;
}

// Thread `t` of n * ceil(n / kSegment): adds a segment of row (t % n) of C
// into its two checksums (neighbouring threads read neighbouring rows of a
// column: coalesced), and counts entries that are not integers (a flipped
// low bit of a mantissa), which truncation could hide from the sums.
template <typename T>
GD_HD void SumsThread(const T* c, Index n, Sum* sums, Sum* weighted, unsigned int* not_integer, Index t) {
  const Index row = t % n;
  const Index begin = t / n * kSegment;
  const Index end = begin + kSegment < n ? begin + kSegment : n;
  Sum plain = 0, by_column = 0;
  unsigned int odd = 0;
  for (Index col = begin; col < end; ++col) {
    const T value = c[row + col * n];
    const Sum entry = static_cast<Sum>(value);
    odd += static_cast<T>(entry) != value;
    plain += entry;
    by_column += static_cast<Sum>(col) * entry;
  }
  __atomic_fetch_add(&sums[row], plain, __ATOMIC_RELAXED);
  __atomic_fetch_add(&weighted[row], by_column, __ATOMIC_RELAXED);
  if (odd != 0) __atomic_fetch_add(not_integer, odd, __ATOMIC_RELAXED);
}

}  // namespace gpudoctor::burn
