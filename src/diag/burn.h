// RunBurn: the compute burn of one GPU. Matrix products in FP64, FP32, TF32
// and BF16, through cuBLAS when it is installed and gpudoctor's own kernels
// otherwise, each product verified exactly (kernels/burn_math.h explains
// how). Before the verified loop of each precision the same product runs
// alone a few times: the baseline the verified throughput is compared with.
//
//   BurnResult result = RunBurn(driver, cublas, ptx, {.device = 0}, on_progress, stop);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "diag/cublas.h"
#include "diag/cuda_driver.h"

namespace gpudoctor {

enum class Precision { kFp64, kFp32, kTf32, kBf16 };
inline constexpr Precision kAllPrecisions[] = {Precision::kFp64, Precision::kFp32, Precision::kTf32, Precision::kBf16};
const char* PrecisionName(Precision precision);  // "fp64", "fp32", "tf32", "bf16"
std::optional<Precision> ParsePrecision(std::string_view name);

struct BurnOptions {
  int device = 0;                      // CUDA ordinal
  Duration duration = std::chrono::seconds(60);  // split evenly over the precisions
  std::vector<Precision> precisions;   // empty: all four
  uint64_t matrix = 0;                 // order of the matrices; 0: the largest of 16384, 8192... that fits
  double free_share = 0.9;             // of free memory the matrices may take
};

// Reported after every product: the preparation and the baseline too, so a
// slow product still shows the burn advancing.
struct BurnProgress {
  std::string precision;
  std::string phase;    // "preparing", "alone" (the baseline); empty in the verified loop
  double fraction = 0;  // of the whole burn
  int iteration = 0;
  double tflops = 0;    // the last product's
};

// A product that came out wrong: the rows whose checksums differ, with the
// column of the wrong entry where one entry of the row is wrong (-1 where
// the row's changes do not point at one column), and entries that were not
// even integers.
struct BurnError {
  std::string precision;
  int iteration = 0;
  std::vector<uint64_t> rows;  // the first 16
  std::vector<int64_t> cols;   // for each of `rows`
  uint64_t bad_rows = 0, not_integer = 0;
};

struct BurnPrecisionResult {
  std::string precision;
  std::string engine;          // "cuBLAS 12.8.4" or "gpudoctor kernel (CUDA cores)"
  uint64_t matrix = 0;
  int iterations = 0;
  int wrong_iterations = 0;
  double tflops = 0;           // verified products over the wall time of the loop
  double baseline_tflops = 0;  // the same product run alone, in the same run
};

struct BurnResult {
  std::string device_name, pci_bus_id;
  std::string engine_note;  // why cuBLAS was not used, when it was not
  std::vector<BurnPrecisionResult> precisions;
  std::vector<BurnError> errors;  // the first ones
  bool interrupted = false;
};

// `cublas` may be null: gpudoctor's own kernels do the products.
Result<BurnResult> RunBurn(const CudaDriver& cuda, const Cublas* cublas, std::string_view ptx,
                           const BurnOptions& options, const std::function<void(const BurnProgress&)>& progress,
                           const std::function<bool()>& stop);

}  // namespace gpudoctor
