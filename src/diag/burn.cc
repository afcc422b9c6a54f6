#include "diag/burn.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "diag/device_session.h"
#include "diag/kernels/burn_math.h"

namespace gpudoctor {

namespace {

using burn::Index;
using burn::Sum;
using SteadyClock = std::chrono::steady_clock;

enum Kernel : size_t {
  kFillF64, kFillF32, kFillBf16, kExpected1, kExpected2, kSumsF64, kSumsF32, kGemmF64, kGemmF32, kGemmBf16
};

const std::vector<std::string>& KernelNames() {
  static const std::vector<std::string> kNames = {
      "gd_burn_fill_f64", "gd_burn_fill_f32", "gd_burn_fill_bf16", "gd_burn_expected_1", "gd_burn_expected_2",
      "gd_burn_sums_f64", "gd_burn_sums_f32", "gd_burn_gemm_f64",  "gd_burn_gemm_f32",   "gd_burn_gemm_bf16"};
  return kNames;
}

// How each precision is stored, filled, multiplied and summed.
struct Layout {
  size_t input_bytes;   // per entry of A and B
  size_t output_bytes;  // per entry of C
  Kernel fill, sums, gemm;
  int a_type, c_type, compute;  // for cublasGemmEx
};

Layout LayoutOf(Precision precision) {
  using namespace cublas_type;
  switch (precision) {
    case Precision::kFp64: return {8, 8, kFillF64, kSumsF64, kGemmF64, kR64F, kR64F, kCompute64F};
    case Precision::kFp32: return {4, 4, kFillF32, kSumsF32, kGemmF32, kR32F, kR32F, kCompute32F};
    case Precision::kTf32: return {4, 4, kFillF32, kSumsF32, kGemmF32, kR32F, kR32F, kCompute32FFastTF32};
    case Precision::kBf16: return {2, 4, kFillBf16, kSumsF32, kGemmBf16, kR16BF, kR32F, kCompute32F};
  }
  return {};
}

double Tflops(uint64_t n, double seconds) {
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  return seconds > 0 ? flops / seconds / 1e12 : 0;
}

// One precision's buffers and the calls that use them.
class Burner {
 public:
  Burner(DeviceSession& session, const std::vector<CUfunction>& kernels, const Cublas* cublas, cublasHandle_t handle,
         Precision precision, uint64_t n)
      : session_(session), cuda_(session.cuda()), kernels_(kernels), cublas_(cublas), handle_(handle),
        precision_(precision), layout_(LayoutOf(precision)), n_(n) {}
  // The precisions run one after the other, each with the memory to itself.
  ~Burner() {
    for (CUdeviceptr pointer : owned_) session_.Free(pointer);
  }
  Burner(const Burner&) = delete;
  Burner& operator=(const Burner&) = delete;

  Status Prepare(unsigned int seed) {
    const size_t entries = n_ * n_;
    auto a = session_.Allocate(entries * layout_.input_bytes);
    auto b = a ? session_.Allocate(entries * layout_.input_bytes) : a;
    auto c = b ? session_.Allocate(entries * layout_.output_bytes) : b;
    auto sums = c ? session_.Allocate(6 * n_ * sizeof(Sum) + sizeof(unsigned int)) : c;
    for (auto* allocated : {&a, &b, &c, &sums})
      if (*allocated) owned_.push_back(**allocated);
    if (!sums) return sums.error();
    a_ = *a, b_ = *b, c_ = *c;
    // Six vectors of n sums and the count of odd entries, one after the other.
    b_sums_ = *sums, b_weighted_ = b_sums_ + n_ * sizeof(Sum);
    expected_sums_ = b_weighted_ + n_ * sizeof(Sum), expected_weighted_ = expected_sums_ + n_ * sizeof(Sum);
    sums_ = expected_weighted_ + n_ * sizeof(Sum), weighted_ = sums_ + n_ * sizeof(Sum);
    odd_ = weighted_ + n_ * sizeof(Sum);
    seed_a_ = seed, seed_b_ = seed + 1;
    if (Status s = Launch(layout_.fill, Grid(entries), {&a_, &n_, &seed_a_}); !s) return s;
    if (Status s = Launch(layout_.fill, Grid(entries), {&b_, &n_, &seed_b_}); !s) return s;
    if (Status s = Launch(kExpected1, Grid(n_), {&n_, &seed_b_, &b_sums_, &b_weighted_}); !s) return s;
    if (Status s = Launch(kExpected2, Grid(n_),
                          {&n_, &seed_a_, &b_sums_, &b_weighted_, &expected_sums_, &expected_weighted_});
        !s)
      return s;
    expected_sums_host_.resize(n_);
    expected_weighted_host_.resize(n_);
    if (Status s = Read(expected_sums_host_, expected_sums_); !s) return s;
    return Read(expected_weighted_host_, expected_weighted_);
  }

  // C = A B; true when cuBLAS did it.
  Status Multiply() {
    if (cublas_ != nullptr) {
      const double one64 = 1, zero64 = 0;
      const float one32 = 1, zero32 = 0;
      const bool wide = precision_ == Precision::kFp64;
      const int n = static_cast<int>(n_);
      const cublasStatus_t status = cublas_->cublasGemmEx(
          handle_, cublas_type::kOpN, cublas_type::kOpN, n, n, n, wide ? static_cast<const void*>(&one64) : &one32,
          reinterpret_cast<const void*>(a_), layout_.a_type, n, reinterpret_cast<const void*>(b_), layout_.a_type, n,
          wide ? static_cast<const void*>(&zero64) : &zero32, reinterpret_cast<void*>(c_), layout_.c_type, n,
          layout_.compute, cublas_type::kGemmDefault);
      if (status != 0) return Error{fmt::format("cublasGemmEx ({}) failed with status {}", PrecisionName(precision_), status)};
      return {};
    }
    const unsigned tiles = static_cast<unsigned>((n_ + 15) / 16);
    void* params[] = {&a_, &b_, &c_, &n_};
    return session_.Call(
        cuda_.cuLaunchKernel(kernels_[layout_.gemm], tiles, tiles, 1, 16, 16, 1, 0, nullptr, params, nullptr),
        KernelNames()[layout_.gemm]);
  }

  // Checks C against the expected sums; fills `error` when it is wrong.
  Result<bool> Verify(BurnError& error) {
    // sums_, weighted_ and odd_ lie one after the other.
    const size_t words = (2 * n_ * sizeof(Sum) + sizeof(unsigned int)) / 4;
    if (Status s = session_.Call(cuda_.cuMemsetD32_v2(sums_, 0, words), "clearing the sums"); !s) return s.error();
    return CompareSums(error);
  }

  Result<double> TimeProducts(int count) {
    return session_.Timed([&]() -> Status {
      for (int i = 0; i < count; ++i)
        if (Status s = Multiply(); !s) return s;
      return {};
    });
  }

  uint64_t n() const { return n_; }

 private:
  // Blocks of 256 threads for a grid-stride loop over `threads` items.
  static unsigned Grid(uint64_t threads) {
    return static_cast<unsigned>(std::clamp<uint64_t>((threads + 255) / 256, 1, 65'535));
  }

  Status Launch(Kernel kernel, unsigned blocks, std::vector<void*> params) {
    return session_.Call(cuda_.cuLaunchKernel(kernels_[kernel], blocks, 1, 1, 256, 1, 1, 0, nullptr,
                                              params.data(), nullptr),
                         KernelNames()[kernel]);
  }

  Status Read(std::vector<Sum>& host, CUdeviceptr device) {
    return session_.Call(cuda_.cuMemcpyDtoH_v2(host.data(), device, host.size() * sizeof(Sum)), "reading sums");
  }

  Result<bool> CompareSums(BurnError& error) {
    const uint64_t segments = (n_ + burn::kSegment - 1) / burn::kSegment;
    if (Status s = Launch(layout_.sums, Grid(n_ * segments), {&c_, &n_, &sums_, &weighted_, &odd_}); !s)
      return s.error();
    std::vector<Sum> sums(n_), weighted(n_);
    unsigned int odd = 0;
    if (Status s = Read(sums, sums_); !s) return s.error();
    if (Status s = Read(weighted, weighted_); !s) return s.error();
    if (Status s = session_.Call(cuda_.cuMemcpyDtoH_v2(&odd, odd_, sizeof odd), "reading sums"); !s) return s.error();
    error = {};
    error.not_integer = odd;
    for (uint64_t row = 0; row < n_; ++row) {
      const Sum off = sums[row] - expected_sums_host_[row];
      const Sum weighted_off = weighted[row] - expected_weighted_host_[row];
      if (off == 0 && weighted_off == 0) continue;
      ++error.bad_rows;
      if (error.rows.size() >= 16) continue;
      // One wrong entry moves the weighted sum by its column times the plain sum's change.
      const bool one_entry = off != 0 && weighted_off % off == 0 && weighted_off / off >= 0 &&
                             static_cast<uint64_t>(weighted_off / off) < n_;
      error.rows.push_back(row);
      error.cols.push_back(one_entry ? weighted_off / off : -1);
    }
    return error.bad_rows == 0 && error.not_integer == 0;
  }

  DeviceSession& session_;
  const CudaDriver& cuda_;
  const std::vector<CUfunction>& kernels_;
  const Cublas* cublas_;
  cublasHandle_t handle_;
  Precision precision_;
  Layout layout_;
  uint64_t n_;
  unsigned int seed_a_ = 0, seed_b_ = 0;
  CUdeviceptr a_ = 0, b_ = 0, c_ = 0, b_sums_ = 0, b_weighted_ = 0, expected_sums_ = 0, expected_weighted_ = 0,
              sums_ = 0, weighted_ = 0, odd_ = 0;
  std::vector<Sum> expected_sums_host_, expected_weighted_host_;
  std::vector<CUdeviceptr> owned_;
};

// The largest order from 16384 down whose three matrices fit in `budget`.
uint64_t MatrixOrderFor(Precision precision, uint64_t budget) {
  const Layout layout = LayoutOf(precision);
  for (uint64_t n = 16384; n >= 256; n /= 2) {
    if (n * n * (2 * layout.input_bytes + layout.output_bytes) + 6 * n * sizeof(Sum) <= budget) return n;
  }
  return 0;
}

}  // namespace

const char* PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp64: return "fp64";
    case Precision::kFp32: return "fp32";
    case Precision::kTf32: return "tf32";
    case Precision::kBf16: return "bf16";
  }
  return "fp32";
}

std::optional<Precision> ParsePrecision(std::string_view name) {
  for (Precision precision : kAllPrecisions)
    if (name == PrecisionName(precision)) return precision;
  return std::nullopt;
}

Result<BurnResult> RunBurn(const CudaDriver& cuda, const Cublas* cublas, std::string_view ptx,
                           const BurnOptions& options, const std::function<void(const BurnProgress&)>& progress,
                           const std::function<bool()>& stop) {
  std::vector<Precision> precisions = options.precisions;
  if (precisions.empty()) precisions.assign(std::begin(kAllPrecisions), std::end(kAllPrecisions));

  DeviceSession session(cuda);
  if (Status s = session.Open(options.device); !s) return s.error();
  auto kernels = session.LoadModule(ptx, KernelNames());
  if (!kernels) return kernels.error();
  BurnResult result;
  const DeviceIdentity identity = session.Identity();
  result.device_name = identity.name;
  result.pci_bus_id = identity.pci_bus_id;

  cublasHandle_t handle = nullptr;
  std::string engine = "gpudoctor kernel (CUDA cores)";
  if (cublas != nullptr) {
    if (const cublasStatus_t status = cublas->cublasCreate_v2(&handle); status != 0) {
      result.engine_note = fmt::format("cuBLAS {} could not start (status {})", cublas->path(), status);
      cublas = nullptr;
    } else {
      int version = 0;
      cublas->cublasGetVersion_v2(handle, &version);
      engine = fmt::format("cuBLAS {}.{}.{}", version / 10000, version / 100 % 100, version % 100);
    }
  }
  struct HandleGuard {
    const Cublas* cublas;
    cublasHandle_t handle;
    ~HandleGuard() {
      if (cublas != nullptr && handle != nullptr) cublas->cublasDestroy_v2(handle);
    }
  } guard{cublas, handle};

  const auto share = options.duration / static_cast<int64_t>(precisions.size());
  const auto started = SteadyClock::now();
  // Each precision is its share of the bar: a slow host that overruns one
  // precision's time does not make the bar jump to the end.
  auto fraction = [&](size_t p, SteadyClock::time_point begun, SteadyClock::time_point deadline) {
    const auto now = SteadyClock::now();
    const double within = deadline > begun ? std::chrono::duration<double>(now - begun) / (deadline - begun) : 1.0;
    return (static_cast<double>(p) + std::clamp(within, 0.0, 1.0)) / static_cast<double>(precisions.size());
  };
  for (size_t p = 0; p < precisions.size(); ++p) {
    const Precision precision = precisions[p];
    size_t free_bytes = 0, total_bytes = 0;
    if (Status s = session.Call(cuda.cuMemGetInfo_v2(&free_bytes, &total_bytes), "cuMemGetInfo"); !s) return s.error();
    const uint64_t n = options.matrix != 0
                           ? options.matrix
                           : MatrixOrderFor(precision, static_cast<uint64_t>(static_cast<double>(free_bytes) *
                                                                             std::clamp(options.free_share, 0.0, 1.0)));
    if (n == 0) return Error{fmt::format("too little free memory for a {} burn ({} bytes free)", PrecisionName(precision), free_bytes)};
    const auto deadline = started + share * static_cast<int64_t>(p + 1);
    const double base = static_cast<double>(p) / static_cast<double>(precisions.size());
    auto preparing = [&](const char* phase, double tflops) {
      if (progress)
        progress({.precision = PrecisionName(precision), .phase = phase, .fraction = base, .tflops = tflops});
    };
    Burner burner(session, *kernels, cublas, handle, precision, n);
    if (Status s = burner.Prepare(static_cast<unsigned>(2 * p + 1)); !s) return s.error();
    preparing("preparing", 0);

    BurnPrecisionResult entry{.precision = PrecisionName(precision), .engine = engine, .matrix = n};
    // The same product alone: the baseline, after one product to warm up.
    if (Status s = burner.Multiply(); !s) return s.error();
    preparing("alone", 0);
    double alone = 0;
    constexpr int kAloneProducts = 3;
    for (int i = 0; i < kAloneProducts; ++i) {
      if (stop && stop()) {
        result.interrupted = true;
        return result;
      }
      auto took = burner.TimeProducts(1);
      if (!took) return took.error();
      alone += *took;
      preparing("alone", Tflops(n, *took));
    }
    entry.baseline_tflops = Tflops(n, alone / kAloneProducts);

    const auto begun = SteadyClock::now();
    double busy = 0;  // seconds of products and their verification, on the device's clock
    do {
      if (stop && stop()) {
        result.interrupted = true;
        break;
      }
      auto took = burner.TimeProducts(1);
      if (!took) return took.error();
      BurnError error;
      bool good = true;
      auto verified = session.Timed([&]() -> Status {
        auto checked = burner.Verify(error);
        if (!checked) return checked.error();
        good = *checked;
        return {};
      });
      if (!verified) return verified.error();
      busy += *took + *verified;
      ++entry.iterations;
      if (!good) {
        ++entry.wrong_iterations;
        error.precision = entry.precision;
        error.iteration = entry.iterations;
        if (result.errors.size() < 100) result.errors.push_back(std::move(error));
      }
      if (progress) {
        progress({.precision = entry.precision,
                  .fraction = fraction(p, begun, deadline),
                  .iteration = entry.iterations,
                  .tflops = Tflops(n, *took)});
      }
    } while (SteadyClock::now() < deadline);
    entry.tflops = entry.iterations > 0 ? Tflops(n, busy / entry.iterations) : 0;
    result.precisions.push_back(std::move(entry));
    if (result.interrupted) break;
  }
  return result;
}

}  // namespace gpudoctor
