// The compute burn's per-thread work, written once for both sides: compiled
// into PTX for the GPU (burn_kernels.cu) and into the host build, where the
// fake CUDA driver runs it. Plain C++, no standard library.
//
// Every matrix entry is a small integer in [-2, 2], a hash of its position,
// so every product and every partial sum is exact in FP64, FP32, TF32 and
// BF16 with FP32 accumulation (|C| <= 4n < 2^24). A product is verified by
// its row and column sums, computed exactly in 64-bit integers and compared
// with sums derived from the entries alone (A's column sums times B, A times
// B's row sums): one wrong element shows in its row and in its column, so it
// is found and located at a cost of reading C once.
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

// Thread `k` of n, first step of the expected sums: B's row k summed, and A's column k.
GD_HD void ExpectedStep1Thread(Index n, unsigned int seed_a, unsigned int seed_b, Sum* b_row_sums, Sum* a_col_sums,
                               Index k) {
  Sum b = 0, a = 0;
  for (Index j = 0; j < n; ++j) {
    b += Entry(seed_b, k, j);
    a += Entry(seed_a, j, k);
  }
  b_row_sums[k] = b;
  a_col_sums[k] = a;
}

// Thread `t` of n, second step: C's row t and column t as they must sum.
GD_HD void ExpectedStep2Thread(Index n, unsigned int seed_a, unsigned int seed_b, const Sum* b_row_sums,
                               const Sum* a_col_sums, Sum* row_sums, Sum* col_sums, Index t) {
  Sum row = 0, col = 0;
  for (Index k = 0; k < n; ++k) {
    row += Entry(seed_a, t, k) * b_row_sums[k];
    col += a_col_sums[k] * Entry(seed_b, k, t);
  }
  row_sums[t] = row;
  col_sums[t] = col;
}

// Thread `t` of n * ceil(n / kSegment): adds a segment of row (t % n) and of
// column (t % n) of C into the sums; counts entries that are not integers
// (a flipped low bit of a mantissa), which the sums alone could miss.
template <typename T>
GD_HD void SumsThread(const T* c, Index n, Sum* row_sums, Sum* col_sums, unsigned int* not_integer, Index t) {
  const Index line = t % n;
  const Index begin = t / n * kSegment;
  const Index end = begin + kSegment < n ? begin + kSegment : n;
  Sum row = 0, col = 0;
  unsigned int odd = 0;
  for (Index other = begin; other < end; ++other) {
    const T along_row = c[line + other * n];
    const T along_col = c[other + line * n];
    const Sum r = static_cast<Sum>(along_row);
    const Sum k = static_cast<Sum>(along_col);
    odd += static_cast<T>(r) != along_row;
    row += r;
    col += k;
  }
  __atomic_fetch_add(&row_sums[line], row, __ATOMIC_RELAXED);
  __atomic_fetch_add(&col_sums[line], col, __ATOMIC_RELAXED);
  if (odd != 0) __atomic_fetch_add(not_integer, odd, __ATOMIC_RELAXED);
}

}  // namespace gpudoctor::burn
