// The compute burn's kernels, compiled to PTX by clang at build time like the
// memtest's (memtest_kernels.cu): filling the inputs, the sums that verify a
// product (burn_math.h), and gpudoctor's own matrix products for when cuBLAS
// is not installed. The own products run on the CUDA cores (no tensor-core
// instructions): they stress and verify the GPU but do not reach its
// tensor-core peak, and the burn says which engine ran.
#include "burn_math.h"
#include "device_support.h"

using namespace gpudoctor::burn;
using gpudoctor::kernels::FirstIndex;
using gpudoctor::kernels::Stride;

namespace {

constexpr int kTile = 16;

// C = A B with 16 x 16 tiles in shared memory; blocks of 16 x 16 threads,
// one per element of C. `Load` turns a stored entry into the type summed in.
template <typename Stored, typename Acc, Acc (*Load)(Stored)>
__attribute__((device)) void TiledProduct(const Stored* a, const Stored* b, Acc* c, Index n, Acc (*tile_a)[kTile],
                                          Acc (*tile_b)[kTile]) {
  const unsigned tx = __nvvm_read_ptx_sreg_tid_x(), ty = __nvvm_read_ptx_sreg_tid_y();
  const Index row = static_cast<Index>(__nvvm_read_ptx_sreg_ctaid_x()) * kTile + tx;
  const Index col = static_cast<Index>(__nvvm_read_ptx_sreg_ctaid_y()) * kTile + ty;
  Acc sum = 0;
  for (Index k0 = 0; k0 < n; k0 += kTile) {
    tile_a[ty][tx] = row < n && k0 + ty < n ? Load(a[row + (k0 + ty) * n]) : Acc(0);
    tile_b[ty][tx] = col < n && k0 + tx < n ? Load(b[(k0 + tx) + col * n]) : Acc(0);
    __nvvm_bar_sync(0);
    for (int k = 0; k < kTile; ++k) sum += tile_a[k][tx] * tile_b[ty][k];
    __nvvm_bar_sync(0);
  }
  if (row < n && col < n) c[row + col * n] = sum;
}

__attribute__((device)) double AsDouble(double v) { return v; }
__attribute__((device)) float AsFloat(float v) { return v; }
__attribute__((device)) float FromBf16(unsigned short v) { return Bf16Value(v); }

}  // namespace

extern "C" __global__ void gd_burn_fill_f64(double* m, Index n, unsigned int seed) {
  for (Index t = FirstIndex(); t < n * n; t += Stride()) FillThread(m, n, seed, t);
}
extern "C" __global__ void gd_burn_fill_f32(float* m, Index n, unsigned int seed) {
  for (Index t = FirstIndex(); t < n * n; t += Stride()) FillThread(m, n, seed, t);
}
extern "C" __global__ void gd_burn_fill_bf16(unsigned short* m, Index n, unsigned int seed) {
  for (Index t = FirstIndex(); t < n * n; t += Stride()) FillBf16Thread(m, n, seed, t);
}

extern "C" __global__ void gd_burn_expected_1(Index n, unsigned int seed_b, Sum* b_sums, Sum* b_weighted) {
  for (Index t = FirstIndex(); t < n; t += Stride()) ExpectedStep1Thread(n, seed_b, b_sums, b_weighted, t);
}
extern "C" __global__ void gd_burn_expected_2(Index n, unsigned int seed_a, const Sum* b_sums, const Sum* b_weighted,
                                              Sum* sums, Sum* weighted) {
  for (Index t = FirstIndex(); t < n; t += Stride()) ExpectedStep2Thread(n, seed_a, b_sums, b_weighted, sums, weighted, t);
}

extern "C" __global__ void gd_burn_sums_f64(const double* c, Index n, Sum* sums, Sum* weighted, unsigned int* odd) {
  const Index threads = n * ((n + kSegment - 1) / kSegment);
  for (Index t = FirstIndex(); t < threads; t += Stride()) SumsThread(c, n, sums, weighted, odd, t);
}
extern "C" __global__ void gd_burn_sums_f32(const float* c, Index n, Sum* sums, Sum* weighted, unsigned int* odd) {
  const Index threads = n * ((n + kSegment - 1) / kSegment);
  for (Index t = FirstIndex(); t < threads; t += Stride()) SumsThread(c, n, sums, weighted, odd, t);
}

extern "C" __global__ void gd_burn_gemm_f64(const double* a, const double* b, double* c, Index n) {
  __shared__ double tile_a[kTile][kTile], tile_b[kTile][kTile];
  TiledProduct<double, double, AsDouble>(a, b, c, n, tile_a, tile_b);
}
extern "C" __global__ void gd_burn_gemm_f32(const float* a, const float* b, float* c, Index n) {
  __shared__ float tile_a[kTile][kTile], tile_b[kTile][kTile];
  TiledProduct<float, float, AsFloat>(a, b, c, n, tile_a, tile_b);
}
extern "C" __global__ void gd_burn_gemm_bf16(const unsigned short* a, const unsigned short* b, float* c, Index n) {
  __shared__ float tile_a[kTile][kTile], tile_b[kTile][kTile];
  TiledProduct<unsigned short, float, FromBf16>(a, b, c, n, tile_a, tile_b);
}
