// The fake CUDA driver: libcuda's entry points (the list of
// src/diag/cuda_api.h) over host memory, driven by the same scenario file as
// the fake NVML library (GPUDOCTOR_SCENARIO; its GPUs, and its [cuda] table for
// memory and faults, docs/scenarios.md). Kernels are the memtest's own
// per-word work (src/diag/kernels/memtest_patterns.h) and the burn's
// per-thread work (burn_math.h) run on the CPU, so the diagnostics are tested
// end to end without a GPU. cuModuleLoadData takes the real PTX and
// cuModuleGetFunction finds only the entry points it declares. The library
// also answers as cuBLAS (cublasGemmEx on the same fake devices), so the
// burn's cuBLAS path is tested too.
#include <sys/mman.h>

#include <toml++/toml.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "diag/cuda_api.h"
#include "diag/cublas.h"
#include "diag/kernels/burn_math.h"
#include "diag/kernels/memtest_patterns.h"
#include "model/pcie_link.h"
#include "common/result.h"
#include "scenario.h"

#define FAKE_CUDA_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using namespace gpudoctor;
using namespace gpudoctor::fake_nvml;
namespace mt = gpudoctor::memtest;

struct StuckBit {
  uint64_t offset = 0;  // byte offset from the start of the device's memory
  unsigned bit = 0;
  bool value = false;
};

struct FakeDevice {
  std::string name, pci_bus_id;
  int sms = 4;
  uint64_t memory_bytes = 64ull << 20;
  uint64_t free_bytes = 0;  // 0: all of it
  std::vector<StuckBit> stuck_bits;
  double flip_rate = 0;
  uint64_t hang_at_launch = 0, lost_at_launch = 0;
  // The burn: a product takes gemm_ms times slow_factor; one entry of every
  // product may come out wrong by `wrong_delta`.
  double gemm_ms = 1, slow_factor = 1;
  double memory_gbps = 3000;  // what the memory kernels, memsets and device copies move per second
  bool wrong_product = false;
  uint64_t wrong_row = 0, wrong_col = 0;
  double wrong_delta = 0;
  // Copies of 1 MiB or more over the link run at this rate (0: as fast as memcpy).
  double pcie_gbps = 0, p2p_gbps = 0;
  bool corrupt_copies = false;

  char* memory = nullptr;  // the device's memory, mapped when first used
  uint64_t used = 0;       // bump allocator; everything freed resets it
  uint64_t allocations = 0;
  uint64_t launches = 0;
  bool lost = false;
  std::mt19937_64 random{7};
};

enum Kind : int {
  kMemtestFill, kMemtestCheck, kMemtestCheckInvert, kBurnFillF64, kBurnFillF32, kBurnFillBf16, kBurnExpected1,
  kBurnExpected2, kBurnSumsF64, kBurnSumsF32, kBurnGemmF64, kBurnGemmF32, kBurnGemmBf16, kKindCount
};

struct Function {
  Kind kind;
};

struct State {
  bool loaded = false;
  CUresult init_error = CUDA_SUCCESS;
  std::vector<FakeDevice> devices;
  int current = -1;
  bool peer_access = true;
  // A loaded host: every kernel launch and product also waits this long on
  // the wall clock (never on the device's clock, so rates stay the scenario's).
  std::chrono::milliseconds launch_delay{0};
  // What cuDriverGetVersion answers ([cuda] driver_version, CUDA 12.8's by default), and the newest PTX ISA
  // cuModuleLoadData reads ([cuda] ptx_isa_max, "major.minor"; none: any), as an older driver would refuse more.
  int driver_version = 12080;
  int ptx_isa_max = 0;  // major * 10 + minor
};

std::mutex g_mutex;
State g_state;

// The GPU's clock, as events read it: it advances only by the modelled time
// of the work the fake models (a product, a memory kernel, a memset, a copy),
// never by the CPU time the fake needed or by the machine's load, so every
// rate a test measures is the scenario's figure.
std::chrono::steady_clock::duration g_device_clock{};

std::chrono::steady_clock::time_point DeviceNow() { return std::chrono::steady_clock::time_point{} + g_device_clock; }

// Modelled work takes `modelled` on the device's clock.
void TakesModelled(std::chrono::duration<double> modelled) {
  g_device_clock += std::chrono::duration_cast<std::chrono::steady_clock::duration>(modelled);
}

// Memory work of `bytes` moved at the device's memory rate.
std::chrono::duration<double> MemoryTime(double bytes, double gbps) {
  return std::chrono::duration<double>(gbps > 0 ? bytes / (gbps * 1e9) : 0.0);
}
Function g_functions[kKindCount] = {{kMemtestFill},    {kMemtestCheck},  {kMemtestCheckInvert}, {kBurnFillF64},
                                    {kBurnFillF32},    {kBurnFillBf16},  {kBurnExpected1},      {kBurnExpected2},
                                    {kBurnSumsF64},    {kBurnSumsF32},   {kBurnGemmF64},        {kBurnGemmF32},
                                    {kBurnGemmBf16}};
constexpr const char* kKernelNames[kKindCount] = {
    "gd_memtest_fill",    "gd_memtest_check",   "gd_memtest_check_invert", "gd_burn_fill_f64", "gd_burn_fill_f32",
    "gd_burn_fill_bf16",  "gd_burn_expected_1", "gd_burn_expected_2",      "gd_burn_sums_f64", "gd_burn_sums_f32",
    "gd_burn_gemm_f64",   "gd_burn_gemm_f32",   "gd_burn_gemm_bf16"};

// A key of [cuda] or [[cuda.fault]] that is not known is a mistake in the
// scenario: said on stderr, and cuInit fails.
Status CheckKeys(const toml::table* cuda, const char* path) {
  if (cuda == nullptr) return {};
  static const std::set<std::string> kCuda = {"memory_mib", "sms",      "gemm_ms",     "memory_gbps",    "pcie_gbps",
                                              "p2p_gbps",   "peer_access", "fault", "launch_delay_ms",
                                              "driver_version", "ptx_isa_max"};
  static const std::set<std::string> kFault = {"gpu",           "stuck_bits",     "flip_rate",   "hang_at_launch",
                                               "lost_at_launch", "free_mib",      "wrong_product", "slow_factor",
                                               "memory_gbps",    "pcie_gbps",     "corrupt_copies", "seed"};
  auto check = [&](const toml::table& table, const std::set<std::string>& known, const char* where) -> Status {
    for (const auto& [key, value] : table) {
      if (known.count(std::string(key.str())) == 0) {
        std::fprintf(stderr, "scenario %s: %ld: unknown key \"%s\" in %s\n", path,
                     static_cast<long>(value.source().begin.line), std::string(key.str()).c_str(), where);
        return Error{"unknown key"};
      }
    }
    return {};
  };
  if (Status s = check(*cuda, kCuda, "[cuda]"); !s) return s;
  if (const toml::array* faults = (*cuda)["fault"].as_array()) {
    for (const toml::node& node : *faults)
      if (const toml::table* fault = node.as_table())
        if (Status s = check(*fault, kFault, "[[cuda.fault]]"); !s) return s;
  }
  return {};
}

CUresult Load() {
  if (g_state.loaded) return g_state.init_error;
  g_state.loaded = true;
  const char* path = std::getenv("GPUDOCTOR_SCENARIO");
  if (path == nullptr || *path == '\0') return g_state.init_error = CUDA_ERROR_NO_DEVICE;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto scenario = ParseScenario(text.str(), path);
  if (!scenario) return g_state.init_error = CUDA_ERROR_NOT_INITIALIZED;
  toml::table root;
  try {
    root = toml::parse(text.str());
  } catch (const toml::parse_error&) {
    return g_state.init_error = CUDA_ERROR_NOT_INITIALIZED;
  }
  const toml::table* cuda = root["cuda"].as_table();
  if (Status known = CheckKeys(cuda, path); !known) return g_state.init_error = CUDA_ERROR_NOT_INITIALIZED;
  const uint64_t memory_mib = cuda ? (*cuda)["memory_mib"].value_or<int64_t>(64) : 64;
  const int sms = cuda ? static_cast<int>((*cuda)["sms"].value_or<int64_t>(4)) : 4;
  const double gemm_ms = cuda ? (*cuda)["gemm_ms"].value_or(1.0) : 1.0;
  const double memory_gbps = cuda ? (*cuda)["memory_gbps"].value_or(3000.0) : 3000.0;
  const double pcie_gbps = cuda ? (*cuda)["pcie_gbps"].value_or(0.0) : 0.0;
  const double p2p_gbps = cuda ? (*cuda)["p2p_gbps"].value_or(0.0) : 0.0;
  g_state.peer_access = cuda ? (*cuda)["peer_access"].value_or(true) : true;
  g_state.launch_delay = std::chrono::milliseconds(cuda ? (*cuda)["launch_delay_ms"].value_or<int64_t>(0) : 0);
  g_state.driver_version = cuda ? static_cast<int>((*cuda)["driver_version"].value_or<int64_t>(12080)) : 12080;
  if (const auto isa = cuda ? (*cuda)["ptx_isa_max"].value<std::string>() : std::nullopt) {
    int major = 0, minor = 0;
    if (std::sscanf(isa->c_str(), "%d.%d", &major, &minor) == 2) g_state.ptx_isa_max = major * 10 + minor;
  }
  for (const GpuSpec& gpu : scenario->gpus) {
    FakeDevice device;
    device.name = gpu.Text(GpuField::kName);
    device.pci_bus_id = gpu.Text(GpuField::kPciBusId);
    device.sms = sms;
    device.memory_bytes = memory_mib << 20;
    device.gemm_ms = gemm_ms;
    device.memory_gbps = memory_gbps;
    // Unless the scenario says otherwise, a link carries 88% of what its generation and width allow, as
    // healthy ones do, and peers copy over NVLink-class bandwidth.
    const auto link = PcieLinkGbPerSecond(static_cast<uint32_t>(gpu.Number(GpuField::kPcieGenerationMax, 0)),
                                          static_cast<uint32_t>(gpu.Number(GpuField::kPcieWidthMax, 0)));
    device.pcie_gbps = pcie_gbps > 0 ? pcie_gbps : link ? 0.88 * *link : 25.0;
    device.p2p_gbps = p2p_gbps > 0 ? p2p_gbps : 150;
    g_state.devices.push_back(std::move(device));
  }
  if (const toml::array* faults = cuda ? (*cuda)["fault"].as_array() : nullptr) {
    for (const toml::node& node : *faults) {
      const toml::table* fault = node.as_table();
      if (fault == nullptr) continue;
      const auto index = static_cast<size_t>((*fault)["gpu"].value_or<int64_t>(0));
      if (index >= g_state.devices.size()) continue;
      FakeDevice& device = g_state.devices[index];
      device.free_bytes = static_cast<uint64_t>((*fault)["free_mib"].value_or(0.0) * (1 << 20));
      device.flip_rate = (*fault)["flip_rate"].value_or(0.0);
      device.hang_at_launch = static_cast<uint64_t>((*fault)["hang_at_launch"].value_or<int64_t>(0));
      device.lost_at_launch = static_cast<uint64_t>((*fault)["lost_at_launch"].value_or<int64_t>(0));
      device.random.seed(static_cast<uint64_t>((*fault)["seed"].value_or<int64_t>(7)));
      device.slow_factor = (*fault)["slow_factor"].value_or(1.0);
      device.memory_gbps = (*fault)["memory_gbps"].value_or(device.memory_gbps);
      device.pcie_gbps = (*fault)["pcie_gbps"].value_or(device.pcie_gbps);
      device.corrupt_copies = (*fault)["corrupt_copies"].value_or(false);
      if (const toml::table* wrong = (*fault)["wrong_product"].as_table()) {
        device.wrong_product = true;
        device.wrong_row = static_cast<uint64_t>((*wrong)["row"].value_or<int64_t>(0));
        device.wrong_col = static_cast<uint64_t>((*wrong)["col"].value_or<int64_t>(0));
        device.wrong_delta = (*wrong)["delta"].value_or(1.0);
      }
      if (const toml::array* stuck = (*fault)["stuck_bits"].as_array()) {
        for (const toml::node& item : *stuck) {
          const toml::table* bit = item.as_table();
          if (bit == nullptr) continue;
          device.stuck_bits.push_back({static_cast<uint64_t>((*bit)["offset"].value_or<int64_t>(0)),
                                       static_cast<unsigned>((*bit)["bit"].value_or<int64_t>(0)) % 32,
                                       (*bit)["value"].value_or<int64_t>(1) != 0});
        }
      }
    }
  }
  return CUDA_SUCCESS;
}

FakeDevice* Current() {
  if (g_state.current < 0 || static_cast<size_t>(g_state.current) >= g_state.devices.size()) return nullptr;
  return &g_state.devices[static_cast<size_t>(g_state.current)];
}

FakeDevice* Owner(CUdeviceptr pointer) {
  for (FakeDevice& device : g_state.devices) {
    const auto base = reinterpret_cast<CUdeviceptr>(device.memory);
    if (device.memory != nullptr && pointer >= base && pointer < base + device.memory_bytes) return &device;
  }
  return nullptr;
}

// What faulty memory does to words just written in [begin, end).
void Damage(FakeDevice& device, CUdeviceptr begin, CUdeviceptr end) {
  const auto base = reinterpret_cast<CUdeviceptr>(device.memory);
  for (const StuckBit& stuck : device.stuck_bits) {
    const CUdeviceptr address = base + stuck.offset / 4 * 4;
    if (address < begin || address >= end) continue;
    auto* word = reinterpret_cast<mt::Word*>(address);
    if (stuck.value) *word |= 1u << stuck.bit;
    else *word &= ~(1u << stuck.bit);
  }
  if (device.flip_rate > 0) {
    const uint64_t words = (end - begin) / 4;
    std::poisson_distribution<uint64_t> flips(device.flip_rate * static_cast<double>(words));
    for (uint64_t n = flips(device.random); n > 0; --n) {
      auto* word = reinterpret_cast<mt::Word*>(begin) + device.random() % words;
      *word ^= 1u << (device.random() % 32);
    }
  }
}

template <typename T>
T& Param(void** params, int i) {
  return *static_cast<T*>(params[i]);
}

void RunMemtestKernel(FakeDevice& device, Kind kind, void** params) {
  auto* base = Param<mt::Word*>(params, 0);
  const mt::Index words = Param<mt::Index>(params, 1);
  const mt::Pattern pattern = Param<mt::Pattern>(params, 2);
  const auto address = reinterpret_cast<mt::Index>(base);
  if (kind == kMemtestFill) {
    for (mt::Index i = 0; i < words; ++i) base[i] = mt::Expected(pattern, address, i);
  } else {
    auto* log = Param<mt::ErrorLog*>(params, 3);
    for (mt::Index i = 0; i < words; ++i) {
      const mt::Word expected = mt::Expected(pattern, address, i);
      const mt::Word actual = base[i];
      if (actual != expected) mt::Record(log, log->count++, address + i * sizeof(mt::Word), expected, actual);
      if (kind == kMemtestCheckInvert) base[i] = ~expected;
    }
  }
  if (kind != kMemtestCheck) Damage(device, address, address + words * sizeof(mt::Word));
}

// What a product on this device does besides being right: it takes its time,
// and a faulty device gets one entry wrong.
template <typename T>
void AfterProduct(FakeDevice& device, T* c, uint64_t n) {
  if (device.wrong_product && device.wrong_row < n && device.wrong_col < n)
    c[device.wrong_row + device.wrong_col * n] += static_cast<T>(device.wrong_delta);
  TakesModelled(std::chrono::duration<double, std::milli>(device.gemm_ms * device.slow_factor));
}

// C = A B, column-major n x n, entries loaded as Acc. Each column of C is
// built from A's columns, read in order: the entries are small integers, so
// the sums are exact in any order and the CPU's caches decide the speed.
template <typename Stored, typename Acc, typename Load>
void Product(FakeDevice& device, const Stored* a, const Stored* b, Acc* c, uint64_t n, Load load) {
  std::vector<Acc> a_column(n);
  for (uint64_t col = 0; col < n; ++col) {
    Acc* c_column = c + col * n;
    std::fill(c_column, c_column + n, Acc(0));
    for (uint64_t k = 0; k < n; ++k) {
      const Acc b_entry = load(b[k + col * n]);
      if (b_entry == Acc(0)) continue;
      const Stored* a_k = a + k * n;
      for (uint64_t row = 0; row < n; ++row) c_column[row] += load(a_k[row]) * b_entry;
    }
  }
  AfterProduct(device, c, n);
}

// What a loaded host does to every launch: its wall time grows.
void LoadedHostDelay(std::chrono::milliseconds delay) {
  if (delay.count() > 0) std::this_thread::sleep_for(delay);
}

void RunBurnKernel(FakeDevice& device, Kind kind, void** params) {
  namespace bn = gpudoctor::burn;
  using bn::Index;
  using bn::Sum;
  auto same = [](auto v) { return v; };
  auto bf16 = [](unsigned short v) { return bn::Bf16Value(v); };
  switch (kind) {
    case kBurnFillF64:
    case kBurnFillF32:
    case kBurnFillBf16: {
      const Index n = Param<Index>(params, 1);
      const unsigned seed = Param<unsigned>(params, 2);
      for (Index t = 0; t < n * n; ++t) {
        if (kind == kBurnFillF64) bn::FillThread(Param<double*>(params, 0), n, seed, t);
        else if (kind == kBurnFillF32) bn::FillThread(Param<float*>(params, 0), n, seed, t);
        else bn::FillBf16Thread(Param<unsigned short*>(params, 0), n, seed, t);
      }
      break;
    }
    case kBurnExpected1: {
      const Index n = Param<Index>(params, 0);
      for (Index k = 0; k < n; ++k)
        bn::ExpectedStep1Thread(n, Param<unsigned>(params, 1), Param<Sum*>(params, 2), Param<Sum*>(params, 3), k);
      break;
    }
    case kBurnExpected2: {
      const Index n = Param<Index>(params, 0);
      for (Index i = 0; i < n; ++i)
        bn::ExpectedStep2Thread(n, Param<unsigned>(params, 1), Param<const Sum*>(params, 2),
                                Param<const Sum*>(params, 3), Param<Sum*>(params, 4), Param<Sum*>(params, 5), i);
      break;
    }
    case kBurnSumsF64:
    case kBurnSumsF32: {
      const Index n = Param<Index>(params, 1);
      const Index threads = n * ((n + bn::kSegment - 1) / bn::kSegment);
      for (Index t = 0; t < threads; ++t) {
        if (kind == kBurnSumsF64)
          bn::SumsThread(Param<const double*>(params, 0), n, Param<Sum*>(params, 2), Param<Sum*>(params, 3),
                         Param<unsigned*>(params, 4), t);
        else
          bn::SumsThread(Param<const float*>(params, 0), n, Param<Sum*>(params, 2), Param<Sum*>(params, 3),
                         Param<unsigned*>(params, 4), t);
      }
      break;
    }
    case kBurnGemmF64:
      Product(device, Param<const double*>(params, 0), Param<const double*>(params, 1), Param<double*>(params, 2),
              Param<Index>(params, 3), same);
      break;
    case kBurnGemmF32:
      Product(device, Param<const float*>(params, 0), Param<const float*>(params, 1), Param<float*>(params, 2),
              Param<Index>(params, 3), same);
      break;
    case kBurnGemmBf16:
      Product(device, Param<const unsigned short*>(params, 0), Param<const unsigned short*>(params, 1),
              Param<float*>(params, 2), Param<Index>(params, 3), bf16);
      break;
    default: break;
  }
}

// A bulk copy (1 MiB or more) over the link takes the time its rate allows,
// and a corrupting link changes a byte of it.
void OverTheLink(FakeDevice& device, void* destination, size_t bytes, double gbps) {
  if (bytes < (1u << 20)) return;  // control traffic (error counts, sums) is left alone
  if (device.corrupt_copies) ++static_cast<unsigned char*>(destination)[bytes / 2];
  if (gbps <= 0) return;
  TakesModelled(std::chrono::duration<double>(static_cast<double>(bytes) / (gbps * 1e9)));
}

[[noreturn]] void HangForever() {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(24));
}

}  // namespace

FAKE_CUDA_EXPORT CUresult cuInit(unsigned int) {
  std::lock_guard lock(g_mutex);
  return Load();
}

FAKE_CUDA_EXPORT CUresult cuDriverGetVersion(int* version) {
  std::lock_guard lock(g_mutex);
  Load();  // needs no cuInit, as the real driver's
  *version = g_state.driver_version;
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuGetErrorName(CUresult error, const char** name) {
  switch (error) {
    case CUDA_SUCCESS: *name = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *name = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case CUDA_ERROR_NO_DEVICE: *name = "CUDA_ERROR_NO_DEVICE"; break;
    case CUDA_ERROR_INVALID_DEVICE: *name = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_INVALID_PTX: *name = "CUDA_ERROR_INVALID_PTX"; break;
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION: *name = "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"; break;
    case CUDA_ERROR_NOT_FOUND: *name = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *name = "CUDA_ERROR_LAUNCH_FAILED"; break;
    case CUDA_ERROR_UNKNOWN: *name = "CUDA_ERROR_UNKNOWN"; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuGetErrorString(CUresult error, const char** text) {
  switch (error) {
    case CUDA_ERROR_OUT_OF_MEMORY: *text = "out of memory"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *text = "initialization error"; break;
    case CUDA_ERROR_NO_DEVICE: *text = "no CUDA-capable device is detected"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *text = "unspecified launch failure"; break;
    case CUDA_ERROR_UNKNOWN: *text = "unknown error"; break;
    default: return cuGetErrorName(error, text);
  }
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuDeviceGetCount(int* count) {
  std::lock_guard lock(g_mutex);
  if (CUresult status = Load(); status != CUDA_SUCCESS) return status;
  *count = static_cast<int>(g_state.devices.size());
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  std::lock_guard lock(g_mutex);
  if (ordinal < 0 || static_cast<size_t>(ordinal) >= g_state.devices.size()) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  std::lock_guard lock(g_mutex);
  if (static_cast<size_t>(device) >= g_state.devices.size() || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, static_cast<size_t>(length), "%s", g_state.devices[static_cast<size_t>(device)].name.c_str());
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  std::lock_guard lock(g_mutex);
  if (static_cast<size_t>(device) >= g_state.devices.size()) return CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = g_state.devices[static_cast<size_t>(device)].sms; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
    default: *value = 0;
  }
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuDeviceGetPCIBusId(char* bus_id, int length, CUdevice device) {
  std::lock_guard lock(g_mutex);
  if (static_cast<size_t>(device) >= g_state.devices.size() || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(bus_id, static_cast<size_t>(length), "%s",
                g_state.devices[static_cast<size_t>(device)].pci_bus_id.c_str());
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  std::lock_guard lock(g_mutex);
  if (static_cast<size_t>(device) >= g_state.devices.size()) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = g_state.devices[static_cast<size_t>(device)].memory_bytes;
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  std::lock_guard lock(g_mutex);
  if (static_cast<size_t>(device) >= g_state.devices.size()) return CUDA_ERROR_INVALID_DEVICE;
  *context = reinterpret_cast<CUcontext>(static_cast<uintptr_t>(device) + 1);
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice) { return CUDA_SUCCESS; }

FAKE_CUDA_EXPORT CUresult cuCtxSetCurrent(CUcontext context) {
  std::lock_guard lock(g_mutex);
  g_state.current = static_cast<int>(reinterpret_cast<uintptr_t>(context)) - 1;
  return Current() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_CUDA_EXPORT CUresult cuCtxSynchronize() {
  std::lock_guard lock(g_mutex);
  FakeDevice* device = Current();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return device->lost ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  std::lock_guard lock(g_mutex);
  FakeDevice* device = Current();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device->lost) return CUDA_ERROR_UNKNOWN;
  const uint64_t available = device->free_bytes ? device->free_bytes : device->memory_bytes;
  *total = device->memory_bytes;
  *free = available > device->used ? available - device->used : 0;
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes) {
  std::lock_guard lock(g_mutex);
  FakeDevice* device = Current();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device->lost) return CUDA_ERROR_UNKNOWN;
  const uint64_t available = device->free_bytes ? device->free_bytes : device->memory_bytes;
  const uint64_t rounded = (bytes + 255) / 256 * 256;
  if (bytes == 0 || device->used + rounded > available) return CUDA_ERROR_OUT_OF_MEMORY;
  if (device->memory == nullptr) {
    void* mapped = mmap(nullptr, device->memory_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                        -1, 0);
    if (mapped == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    device->memory = static_cast<char*>(mapped);
  }
  *pointer = reinterpret_cast<CUdeviceptr>(device->memory + device->used);
  device->used += rounded;
  ++device->allocations;
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemFree_v2(CUdeviceptr pointer) {
  std::lock_guard lock(g_mutex);
  FakeDevice* device = Owner(pointer);
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (--device->allocations == 0) device->used = 0;
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr pointer, unsigned int value, size_t count) {
  std::lock_guard lock(g_mutex);
  FakeDevice* device = Owner(pointer);
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device->lost) return CUDA_ERROR_UNKNOWN;
  auto* words = reinterpret_cast<unsigned int*>(pointer);
  for (size_t i = 0; i < count; ++i) words[i] = value;
  TakesModelled(MemoryTime(4.0 * static_cast<double>(count), device->memory_gbps));
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemcpyDtoH_v2(void* host, CUdeviceptr source, size_t bytes) {
  std::lock_guard lock(g_mutex);
  FakeDevice* device = Owner(source);
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device->lost) return CUDA_ERROR_UNKNOWN;
  std::memcpy(host, reinterpret_cast<const void*>(source), bytes);
  OverTheLink(*device, host, bytes, device->pcie_gbps);
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr destination, const void* host, size_t bytes) {
  std::lock_guard lock(g_mutex);
  FakeDevice* device = Owner(destination);
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device->lost) return CUDA_ERROR_UNKNOWN;
  std::memcpy(reinterpret_cast<void*>(destination), host, bytes);
  OverTheLink(*device, reinterpret_cast<void*>(destination), bytes, device->pcie_gbps);
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr destination, CUdeviceptr source, size_t bytes) {
  std::lock_guard lock(g_mutex);
  FakeDevice* device = Owner(destination);
  if (device == nullptr || Owner(source) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device->lost) return CUDA_ERROR_UNKNOWN;
  std::memmove(reinterpret_cast<void*>(destination), reinterpret_cast<const void*>(source), bytes);
  TakesModelled(MemoryTime(2.0 * static_cast<double>(bytes), device->memory_gbps));  // read and write
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  const char* text = static_cast<const char*>(image);
  // Real PTX, as clang wrote it: a version and a target before any entry.
  if (text == nullptr || std::strstr(text, ".version ") == nullptr || std::strstr(text, ".target ") == nullptr)
    return CUDA_ERROR_INVALID_PTX;
  int major = 0, minor = 0;
  if (g_state.ptx_isa_max > 0 && std::sscanf(std::strstr(text, ".version ") + 9, "%d.%d", &major, &minor) == 2 &&
      major * 10 + minor > g_state.ptx_isa_max)
    return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
  *module = reinterpret_cast<CUmodule>(const_cast<char*>(strdup(text)));
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuModuleUnload(CUmodule module) {
  std::free(module);
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  const std::string entry = std::string(".entry ") + name + "(";
  if (std::strstr(reinterpret_cast<const char*>(module), entry.c_str()) == nullptr) return CUDA_ERROR_NOT_FOUND;
  for (int i = 0; i < kKindCount; ++i) {
    if (std::strcmp(name, kKernelNames[i]) == 0) {
      *function = reinterpret_cast<CUfunction>(&g_functions[i]);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

FAKE_CUDA_EXPORT CUresult cuLaunchKernel(CUfunction function, unsigned int, unsigned int, unsigned int, unsigned int,
                                         unsigned int, unsigned int, unsigned int, CUstream, void** params, void**) {
  std::unique_lock lock(g_mutex);
  FakeDevice* device = Current();
  if (device == nullptr || function == nullptr || params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ++device->launches;
  if (device->lost_at_launch && device->launches >= device->lost_at_launch) device->lost = true;
  if (device->lost) return CUDA_ERROR_LAUNCH_FAILED;
  if (device->hang_at_launch && device->launches == device->hang_at_launch) {
    lock.unlock();
    HangForever();
  }
  const Kind kind = reinterpret_cast<const Function*>(function)->kind;
  if (kind <= kMemtestCheckInvert) {
    RunMemtestKernel(*device, kind, params);
    const double bytes = static_cast<double>(*static_cast<mt::Index*>(params[1]) * sizeof(mt::Word));
    TakesModelled(MemoryTime(kind == kMemtestCheckInvert ? 2 * bytes : bytes, device->memory_gbps));
  } else if (kind >= kBurnGemmF64) {
    RunBurnKernel(*device, kind, params);  // a product models its own time
  } else {
    RunBurnKernel(*device, kind, params);
    TakesModelled(std::chrono::duration<double>(0));  // fills and sums: small next to a product
  }
  const auto delay = g_state.launch_delay;
  lock.unlock();
  LoadedHostDelay(delay);
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuEventCreate(CUevent* event, unsigned int) {
  *event = reinterpret_cast<CUevent>(new std::chrono::steady_clock::time_point());
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuEventRecord(CUevent event, CUstream) {
  std::lock_guard lock(g_mutex);
  *reinterpret_cast<std::chrono::steady_clock::time_point*>(event) = DeviceNow();
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuEventSynchronize(CUevent) { return CUDA_SUCCESS; }

FAKE_CUDA_EXPORT CUresult cuEventElapsedTime(float* milliseconds, CUevent start, CUevent end) {
  const auto& a = *reinterpret_cast<std::chrono::steady_clock::time_point*>(start);
  const auto& b = *reinterpret_cast<std::chrono::steady_clock::time_point*>(end);
  *milliseconds = std::chrono::duration<float, std::milli>(b - a).count();
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuEventDestroy_v2(CUevent event) {
  delete reinterpret_cast<std::chrono::steady_clock::time_point*>(event);
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemHostAlloc(void** pointer, size_t bytes, unsigned int) {
  *pointer = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  return *pointer != nullptr ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

FAKE_CUDA_EXPORT CUresult cuMemFreeHost(void* pointer) {
  std::free(pointer);
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuDeviceCanAccessPeer(int* can_access, CUdevice device, CUdevice peer) {
  std::lock_guard lock(g_mutex);
  const size_t count = g_state.devices.size();
  if (static_cast<size_t>(device) >= count || static_cast<size_t>(peer) >= count) return CUDA_ERROR_INVALID_DEVICE;
  *can_access = g_state.peer_access && device != peer ? 1 : 0;
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int) {
  std::lock_guard lock(g_mutex);
  return peer != nullptr && g_state.peer_access ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
}

FAKE_CUDA_EXPORT CUresult cuMemcpyPeer(CUdeviceptr destination, CUcontext, CUdeviceptr source, CUcontext,
                                       size_t bytes) {
  std::lock_guard lock(g_mutex);
  FakeDevice* to = Owner(destination);
  FakeDevice* from = Owner(source);
  if (to == nullptr || from == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (to->lost || from->lost) return CUDA_ERROR_UNKNOWN;
  std::memcpy(reinterpret_cast<void*>(destination), reinterpret_cast<const void*>(source), bytes);
  const double gbps = g_state.peer_access ? from->p2p_gbps : std::min(from->pcie_gbps, to->pcie_gbps);
  OverTheLink(*from, reinterpret_cast<void*>(destination), bytes, gbps);
  return CUDA_SUCCESS;
}

// ---- cuBLAS, on the same devices ----

FAKE_CUDA_EXPORT cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  *handle = reinterpret_cast<cublasHandle_t>(new int(1));
  return 0;
}

FAKE_CUDA_EXPORT cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  delete reinterpret_cast<int*>(handle);
  return 0;
}

FAKE_CUDA_EXPORT cublasStatus_t cublasGetVersion_v2(cublasHandle_t, int* version) {
  *version = 120804;
  return 0;
}

FAKE_CUDA_EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t, int transa, int transb, int m, int n, int k,
                                             const void*, const void* a, int a_type, int lda, const void* b, int,
                                             int ldb, const void*, void* c, int c_type, int ldc, int, int) {
  std::unique_lock lock(g_mutex);
  FakeDevice* device = Current();
  // The fake does what the burn asks: square, untransposed, alpha 1 and beta 0.
  if (device == nullptr || transa != 0 || transb != 0 || m != n || n != k || lda != n || ldb != n || ldc != n)
    return 7;  // CUBLAS_STATUS_INVALID_VALUE
  if (device->lost) return 13;  // CUBLAS_STATUS_EXECUTION_FAILED
  const auto order = static_cast<uint64_t>(n);
  auto same = [](auto v) { return v; };
  if (a_type == cublas_type::kR64F && c_type == cublas_type::kR64F) {
    Product(*device, static_cast<const double*>(a), static_cast<const double*>(b), static_cast<double*>(c), order, same);
  } else if (a_type == cublas_type::kR32F && c_type == cublas_type::kR32F) {
    Product(*device, static_cast<const float*>(a), static_cast<const float*>(b), static_cast<float*>(c), order, same);
  } else if (a_type == cublas_type::kR16BF && c_type == cublas_type::kR32F) {
    Product(*device, static_cast<const unsigned short*>(a), static_cast<const unsigned short*>(b),
            static_cast<float*>(c), order, [](unsigned short v) { return gpudoctor::burn::Bf16Value(v); });
  } else {
    return 15;  // CUBLAS_STATUS_NOT_SUPPORTED
  }
  const auto delay = g_state.launch_delay;
  lock.unlock();
  LoadedHostDelay(delay);
  return 0;
}
