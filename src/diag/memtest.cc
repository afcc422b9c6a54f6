#include "diag/memtest.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "diag/device_session.h"
#include "diag/kernels/memtest_patterns.h"

namespace gpudoctor {

namespace {

using memtest::ErrorLog;
using memtest::Pattern;
using memtest::PatternKind;
using memtest::Word;
using SteadyClock = std::chrono::steady_clock;

enum class Kernel { kFill, kCheck, kCheckInvert };

constexpr const char* KernelName(Kernel kernel) {
  switch (kernel) {
    case Kernel::kFill: return "gd_memtest_fill";
    case Kernel::kCheck: return "gd_memtest_check";
    case Kernel::kCheckInvert: return "gd_memtest_check_invert";
  }
  return "";
}

// Bytes a kernel moves per byte of memory: one write, one read, or both.
constexpr double Traffic(Kernel kernel) { return kernel == Kernel::kCheckInvert ? 2.0 : 1.0; }

struct Step {
  Kernel kernel;
  Pattern pattern;
};

Pattern Make(PatternKind kind, Word param = 0, Word seed = 0, bool inverted = false) {
  return Pattern{kind, param, seed, inverted ? 1u : 0u};
}

// Fill, then check and write the complement, then check the complement.
void MovingInversion(std::vector<Step>& steps, Pattern pattern) {
  steps.push_back({Kernel::kFill, pattern});
  steps.push_back({Kernel::kCheckInvert, pattern});
  Pattern inverted = pattern;
  inverted.inverted = 1;
  steps.push_back({Kernel::kCheck, inverted});
}

std::vector<Step> StepsOf(std::string_view name, std::mt19937& random) {
  std::vector<Step> steps;
  if (name == "walking_ones" || name == "walking_zeros") {
    for (unsigned bit = 0; bit < 32; ++bit) {
      const Pattern pattern = Make(memtest::kConstant, 1u << bit, 0, name == "walking_zeros");
      steps.push_back({Kernel::kFill, pattern});
      steps.push_back({Kernel::kCheck, pattern});
    }
  } else if (name == "own_address") {
    for (bool inverted : {false, true}) {
      steps.push_back({Kernel::kFill, Make(memtest::kOwnAddress, 0, 0, inverted)});
      steps.push_back({Kernel::kCheck, Make(memtest::kOwnAddress, 0, 0, inverted)});
    }
  } else if (name == "moving_inversions_ones") {
    MovingInversion(steps, Make(memtest::kConstant, 0xFFFFFFFFu));
  } else if (name == "moving_inversions_zeros") {
    MovingInversion(steps, Make(memtest::kConstant, 0));
  } else if (name == "moving_inversions_8bit") {
    for (unsigned shift = 0; shift < 8; ++shift) MovingInversion(steps, Make(memtest::kConstant, 0x01010101u << shift));
  } else if (name == "moving_inversions_random") {
    MovingInversion(steps, Make(memtest::kConstant, static_cast<Word>(random())));
  } else if (name == "moving_inversions_32bit") {
    for (Word offset = 0; offset < 32; ++offset) MovingInversion(steps, Make(memtest::kShiftingOnes, 0, offset));
  } else if (name == "random_sequence") {
    MovingInversion(steps, Make(memtest::kRandom, 0, static_cast<Word>(random())));
  } else if (name == "modulo_20") {
    const Word param = static_cast<Word>(random());
    for (Word offset = 0; offset < 20; ++offset) {
      steps.push_back({Kernel::kFill, Make(memtest::kModulo20, param, offset)});
      steps.push_back({Kernel::kCheck, Make(memtest::kModulo20, param, offset)});
    }
  } else if (name == "stress") {
    for (int round = 0; round < 8; ++round) MovingInversion(steps, Make(memtest::kRandom, 0, static_cast<Word>(random())));
  }
  return steps;
}

double GbPerSecond(double bytes, double seconds) {
  return seconds > 0 ? bytes / seconds / 1e9 : 0;
}

}  // namespace

const std::vector<std::string_view>& MemtestPatternNames() {
  static const std::vector<std::string_view> kNames = {
      "walking_ones",           "walking_zeros",           "own_address",
      "moving_inversions_ones", "moving_inversions_zeros", "moving_inversions_8bit",
      "moving_inversions_random", "moving_inversions_32bit", "random_sequence",
      "modulo_20",              "stress"};
  return kNames;
}

Result<MemtestResult> RunMemtest(const CudaDriver& cuda, std::string_view ptx, const MemtestOptions& options,
                                 const std::function<void(const MemtestProgress&)>& progress,
                                 const std::function<bool()>& stop) {
  std::vector<std::string_view> names;
  for (const std::string& name : options.patterns) {
    const auto& all = MemtestPatternNames();
    auto known = std::find(all.begin(), all.end(), name);
    if (known == all.end()) return Error{fmt::format("unknown memtest pattern '{}'", name)};
    names.push_back(*known);
  }
  if (names.empty()) names = MemtestPatternNames();

  DeviceSession session(cuda);
  if (Status s = session.Open(options.device); !s) return s.error();
  auto functions = session.LoadModule(ptx, {KernelName(Kernel::kFill), KernelName(Kernel::kCheck),
                                            KernelName(Kernel::kCheckInvert)});
  if (!functions) return functions.error();
  auto function = [&](Kernel kernel) { return (*functions)[static_cast<size_t>(kernel)]; };

  MemtestResult result;
  const DeviceIdentity identity = session.Identity();
  result.device_name = identity.name;
  result.pci_bus_id = identity.pci_bus_id;
  const int sms = identity.multiprocessors;

  size_t free_bytes = 0, total_bytes = 0;
  if (Status s = session.Call(cuda.cuMemGetInfo_v2(&free_bytes, &total_bytes), "cuMemGetInfo"); !s) return s.error();
  const size_t error_log_bytes = sizeof(ErrorLog);
  const uint64_t wanted = static_cast<uint64_t>(static_cast<double>(free_bytes) * std::clamp(options.free_share, 0.0, 1.0));
  const uint64_t chunk_bytes = std::max<uint64_t>(options.chunk_bytes / 4 * 4, 4096);
  struct Chunk {
    CUdeviceptr base;
    uint64_t words;
  };
  std::vector<Chunk> chunks;
  if (wanted < error_log_bytes + 4096)
    return Error{fmt::format("too little free memory to test ({} bytes free)", free_bytes)};
  auto log = session.Allocate(error_log_bytes);
  if (!log) return log.error();
  for (uint64_t left = wanted > error_log_bytes ? (wanted - error_log_bytes) / 4 * 4 : 0; left >= 4096;) {
    const uint64_t bytes = std::min(left, chunk_bytes);
    auto base = session.Allocate(bytes);
    if (!base) {
      if (chunks.empty()) return base.error();
      break;  // what is allocated is tested; the driver keeps a little for itself
    }
    chunks.push_back({*base, bytes / 4});
    result.bytes_tested += bytes;
    left -= bytes;
  }
  if (chunks.empty()) return Error{fmt::format("too little free memory to test ({} bytes free)", free_bytes)};

  const unsigned threads = 256;
  const unsigned blocks = static_cast<unsigned>(std::max(1, sms) * 8);
  if (Status s = session.Call(cuda.cuMemsetD32_v2(*log, 0, error_log_bytes / 4), "clearing the error log"); !s)
    return s.error();

  // Baseline: copying the first chunk's first half onto its second half.
  {
    const size_t half = chunks.front().words / 2 * 4;
    auto seconds = session.Timed([&] {
      return session.Call(cuda.cuMemcpyDtoD_v2(chunks.front().base + half, chunks.front().base, half),
                          "device-to-device copy");
    });
    if (!seconds) return seconds.error();
    result.copy_gb_per_s = *seconds > 0 ? 2.0 * static_cast<double>(half) / *seconds / 1e9 : 0;
  }

  std::mt19937 random(20'240'601);
  const auto started = SteadyClock::now();
  for (int pass = 1;; ++pass) {
    std::vector<std::pair<std::string_view, std::vector<Step>>> plan;
    size_t total_steps = 0;
    for (std::string_view pattern_name : names) {
      plan.emplace_back(pattern_name, StepsOf(pattern_name, random));
      total_steps += plan.back().second.size();
    }
    size_t done_steps = 0;
    for (auto& planned : plan) {
      const std::string_view pattern_name = planned.first;  // a plain name: lambdas below capture it
      std::vector<Step>& steps = planned.second;
      auto found = std::find_if(result.patterns.begin(), result.patterns.end(),
                                [&](const MemtestPatternResult& r) { return r.name == pattern_name; });
      if (found == result.patterns.end()) {
        result.patterns.push_back({.name = std::string(pattern_name)});
        found = std::prev(result.patterns.end());
      }
      double bytes_moved = 0;
      double busy = 0;  // seconds on the GPU's clock
      for (Step& step : steps) {
        if (stop && stop()) {
          result.interrupted = true;
          return result;
        }
        // Every chunk's kernel back to back, then one wait and one look at the
        // error log: the GPU never idles between chunks.
        auto seconds = session.Timed([&]() -> Status {
          for (const Chunk& chunk : chunks) {
            CUdeviceptr base = chunk.base;
            memtest::Index words = chunk.words;
            CUdeviceptr log_pointer = *log;
            void* params[] = {&base, &words, &step.pattern, &log_pointer};
            if (Status s = session.Call(cuda.cuLaunchKernel(function(step.kernel), blocks, 1, 1, threads, 1, 1, 0,
                                                            nullptr, params, nullptr),
                                        fmt::format("launching {} ({})", KernelName(step.kernel), pattern_name));
                !s)
              return s;
          }
          return session.Call(cuda.cuCtxSynchronize(), fmt::format("{} ({})", KernelName(step.kernel), pattern_name));
        });
        if (!seconds) return seconds.error();
        if (step.kernel != Kernel::kFill) {
          unsigned int count = 0;
          if (Status s = session.Call(cuda.cuMemcpyDtoH_v2(&count, *log, sizeof count), "reading the error log"); !s)
            return s.error();
          if (count > 0) {
            ErrorLog copy{};
            if (Status s = session.Call(cuda.cuMemcpyDtoH_v2(&copy, *log, sizeof copy), "reading the error log"); !s)
              return s.error();
            result.error_count += count;
            found->errors += count;
            for (unsigned i = 0; i < std::min(count, memtest::kMaxErrorRecords) && result.errors.size() < 10'000; ++i) {
              const memtest::ErrorRecord& record = copy.records[i];
              result.errors.push_back({.address = record.address,
                                       .expected = record.expected,
                                       .actual = record.actual,
                                       .pattern = std::string(pattern_name)});
            }
            if (Status s = session.Call(cuda.cuMemsetD32_v2(*log, 0, error_log_bytes / 4), "clearing the error log"); !s)
              return s.error();
          }
        }
        busy += *seconds;
        bytes_moved += Traffic(step.kernel) * static_cast<double>(result.bytes_tested);
        ++done_steps;
        if (progress) {
          progress({.pattern = std::string(pattern_name),
                    .pass_fraction = static_cast<double>(done_steps) / static_cast<double>(total_steps),
                    .pass = pass,
                    .gb_per_s = GbPerSecond(Traffic(step.kernel) * static_cast<double>(result.bytes_tested), *seconds)});
        }
      }
      const double gb_per_s = GbPerSecond(bytes_moved, busy);
      found->gb_per_s = found->gb_per_s == 0 ? gb_per_s : std::min(found->gb_per_s, gb_per_s);
    }
    result.passes = pass;
    if (SteadyClock::now() - started >= options.duration) break;
  }
  return result;
}

}  // namespace gpudoctor
