// Cublas: NVIDIA's cuBLAS, found and loaded at run time when it is installed,
// for the burn's matrix products at the GPU's full tensor-core rate. Nothing
// of it is needed to build or run gpudoctor: without it the burn uses its own
// kernels and says so. Like the driver, only the subset called is declared,
// here, from NVIDIA's documentation.
//
//   auto cublas = Cublas::Find("");   // the search below
//   if (cublas) (*cublas)->cublasGemmEx(...);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

extern "C" {
typedef struct cublasContext* cublasHandle_t;
typedef int cublasStatus_t;  // 0: success
}

namespace gpudoctor {

// cudaDataType and cublasComputeType_t values the burn uses.
namespace cublas_type {
inline constexpr int kR32F = 0;
inline constexpr int kR64F = 1;
inline constexpr int kR16BF = 14;
inline constexpr int kCompute32F = 68;
inline constexpr int kCompute64F = 70;
inline constexpr int kCompute32FFastTF32 = 77;
inline constexpr int kGemmDefault = -1;
inline constexpr int kOpN = 0;
}  // namespace cublas_type

#define GPUDOCTOR_CUBLAS_FUNCTIONS(X)                                                                         \
  X(cublasCreate_v2, cublasStatus_t, (cublasHandle_t * handle))                                              \
  X(cublasDestroy_v2, cublasStatus_t, (cublasHandle_t handle))                                               \
  X(cublasGetVersion_v2, cublasStatus_t, (cublasHandle_t handle, int* version))                              \
  X(cublasGemmEx, cublasStatus_t,                                                                            \
    (cublasHandle_t handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* a,   \
     int a_type, int lda, const void* b, int b_type, int ldb, const void* beta, void* c, int c_type, int ldc, \
     int compute_type, int algo))

class Cublas {
 public:
  // Loads `path` when given; otherwise the first that loads of: libcublas.so.12,
  // .11 and libcublas.so by the loader's search (LD_LIBRARY_PATH, the cache),
  // /usr/local/cuda/lib64, and the nvidia-cublas wheel of a Python environment
  // (nvidia/cublas/lib under $VIRTUAL_ENV, $CONDA_PREFIX, ~/.local, /usr/local,
  // /usr, /opt/conda). The error lists every place tried.
  static Result<std::unique_ptr<Cublas>> Find(const std::string& path);
  ~Cublas();
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;

#define GPUDOCTOR_DECLARE_POINTER(name, ret, params) ret(*name) params = nullptr;
  GPUDOCTOR_CUBLAS_FUNCTIONS(GPUDOCTOR_DECLARE_POINTER)
#undef GPUDOCTOR_DECLARE_POINTER

  const std::string& path() const { return path_; }

 private:
  Cublas() = default;
  void* handle_ = nullptr;
  std::string path_;
};

// The places Find tries when no path is given, in order.
std::vector<std::string> CublasCandidates();

}  // namespace gpudoctor
