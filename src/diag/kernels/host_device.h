// GD_HD marks a function compiled for both sides: into PTX for the GPU (the
// .cu files, by clang at build time) and into the host build, where the fake
// CUDA driver and the tests run it. Such code is plain C++ with fixed-width
// types and no standard library: device code has none.
#pragma once

#if defined(__CUDA__) && defined(__CUDA_ARCH__)
#define GD_HD __attribute__((device)) inline
#else
#define GD_HD inline
#endif
