// RunMemtest: the memory test of one GPU, through the CUDA driver.
//
// A share of free memory is allocated in chunks and every pattern of
// memtest_patterns.h is written and checked over all of it (walking ones and
// zeros, own address, moving inversions with ones, zeros, 8-bit, random and
// 32-bit shifting patterns, a random sequence, modulo 20, and a stress phase).
// Each mismatch is reported with its device address, the expected and actual
// words, their XOR and the pattern. A device-to-device copy of the same memory
// in the same run is the bandwidth baseline.
//
//   MemtestResult result = RunMemtest(driver, ptx, {.device = 0}, on_progress, stop);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "diag/cuda_driver.h"

namespace gpudoctor {

struct MemtestOptions {
  int device = 0;               // CUDA ordinal
  double free_share = 0.9;      // share of free memory tested
  uint64_t chunk_bytes = 1ull << 30;
  Duration duration{};          // zero: one pass of every pattern; else passes until it is spent
  std::vector<std::string> patterns;  // names from MemtestPatternNames(); empty: all
};

struct MemtestProgress {
  std::string pattern;
  double pass_fraction = 0;  // of the current pass, 0 to 1
  int pass = 1;
  double gb_per_s = 0;       // the last kernel's
};

struct MemtestError {
  uint64_t address = 0;  // device address of the word
  uint32_t expected = 0, actual = 0;
  std::string pattern;
};

struct MemtestPatternResult {
  std::string name;
  uint64_t errors = 0;
  double gb_per_s = 0;  // bytes read and written by its kernels over their time
};

struct MemtestResult {
  std::string device_name, pci_bus_id;
  uint64_t bytes_tested = 0;
  int passes = 0;
  uint64_t error_count = 0;           // every mismatch
  std::vector<MemtestError> errors;   // the first ones, with their words
  std::vector<MemtestPatternResult> patterns;
  double copy_gb_per_s = 0;           // the same-run device-to-device copy
  bool interrupted = false;
};

// Every pattern's name, in the order they run.
const std::vector<std::string_view>& MemtestPatternNames();

// Fails when the device cannot be used (no such ordinal, out of memory, a
// launch error); a device that errs midway fails with what it said.
Result<MemtestResult> RunMemtest(const CudaDriver& cuda, std::string_view ptx, const MemtestOptions& options,
                                 const std::function<void(const MemtestProgress&)>& progress,
                                 const std::function<bool()>& stop);

}  // namespace gpudoctor
