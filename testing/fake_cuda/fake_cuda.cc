// The fake CUDA driver: libcuda's entry points (the list of
// src/diag/cuda_api.h) over host memory, driven by the same scenario file as
// the fake NVML library (GPUDOCTOR_SCENARIO; its GPUs, and its [cuda] table for
// memory and faults, docs/scenarios.md). Kernels are the memtest's own
// per-word work (src/diag/kernels/memtest_patterns.h) run on the CPU, so the
// diagnostics are tested end to end without a GPU. cuModuleLoadData takes the
// real PTX and cuModuleGetFunction finds only the entry points it declares.
#include <sys/mman.h>

#include <toml++/toml.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "diag/cuda_api.h"
#include "diag/kernels/memtest_patterns.h"
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

  char* memory = nullptr;  // the device's memory, mapped when first used
  uint64_t used = 0;       // bump allocator; everything freed resets it
  uint64_t allocations = 0;
  uint64_t launches = 0;
  bool lost = false;
  std::mt19937_64 random{7};
};

struct Function {
  int kind;  // 0 fill, 1 check, 2 check_invert
};

struct State {
  bool loaded = false;
  CUresult init_error = CUDA_SUCCESS;
  std::vector<FakeDevice> devices;
  int current = -1;
};

std::mutex g_mutex;
State g_state;
Function g_functions[3] = {{0}, {1}, {2}};
constexpr const char* kKernelNames[3] = {"gd_memtest_fill", "gd_memtest_check", "gd_memtest_check_invert"};

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
  const uint64_t memory_mib = cuda ? (*cuda)["memory_mib"].value_or<int64_t>(64) : 64;
  const int sms = cuda ? static_cast<int>((*cuda)["sms"].value_or<int64_t>(4)) : 4;
  for (const GpuSpec& gpu : scenario->gpus) {
    FakeDevice device;
    device.name = gpu.Text(GpuField::kName);
    device.pci_bus_id = gpu.Text(GpuField::kPciBusId);
    device.sms = sms;
    device.memory_bytes = memory_mib << 20;
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

[[noreturn]] void HangForever() {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(24));
}

}  // namespace

FAKE_CUDA_EXPORT CUresult cuInit(unsigned int) {
  std::lock_guard lock(g_mutex);
  return Load();
}

FAKE_CUDA_EXPORT CUresult cuDriverGetVersion(int* version) {
  *version = 12080;
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
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemcpyDtoH_v2(void* host, CUdeviceptr source, size_t bytes) {
  std::lock_guard lock(g_mutex);
  FakeDevice* device = Owner(source);
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device->lost) return CUDA_ERROR_UNKNOWN;
  std::memcpy(host, reinterpret_cast<const void*>(source), bytes);
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr destination, const void* host, size_t bytes) {
  std::lock_guard lock(g_mutex);
  FakeDevice* device = Owner(destination);
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device->lost) return CUDA_ERROR_UNKNOWN;
  std::memcpy(reinterpret_cast<void*>(destination), host, bytes);
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr destination, CUdeviceptr source, size_t bytes) {
  std::lock_guard lock(g_mutex);
  FakeDevice* device = Owner(destination);
  if (device == nullptr || Owner(source) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device->lost) return CUDA_ERROR_UNKNOWN;
  std::memmove(reinterpret_cast<void*>(destination), reinterpret_cast<const void*>(source), bytes);
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  const char* text = static_cast<const char*>(image);
  // Real PTX, as clang wrote it: a version and a target before any entry.
  if (text == nullptr || std::strstr(text, ".version ") == nullptr || std::strstr(text, ".target ") == nullptr)
    return CUDA_ERROR_INVALID_PTX;
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
  for (int i = 0; i < 3; ++i) {
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
  const int kind = reinterpret_cast<const Function*>(function)->kind;
  auto* base = *static_cast<mt::Word**>(params[0]);
  const mt::Index words = *static_cast<mt::Index*>(params[1]);
  const mt::Pattern pattern = *static_cast<mt::Pattern*>(params[2]);
  const auto address = reinterpret_cast<mt::Index>(base);
  if (kind == 0) {
    for (mt::Index i = 0; i < words; ++i) base[i] = mt::Expected(pattern, address, i);
  } else {
    auto* log = *static_cast<mt::ErrorLog**>(params[3]);
    for (mt::Index i = 0; i < words; ++i) {
      const mt::Word expected = mt::Expected(pattern, address, i);
      const mt::Word actual = base[i];
      if (actual != expected) mt::Record(log, log->count++, i, expected, actual);
      if (kind == 2) base[i] = ~expected;
    }
  }
  if (kind != 1) Damage(*device, address, address + words * sizeof(mt::Word));
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuEventCreate(CUevent* event, unsigned int) {
  *event = reinterpret_cast<CUevent>(new std::chrono::steady_clock::time_point());
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT CUresult cuEventRecord(CUevent event, CUstream) {
  *reinterpret_cast<std::chrono::steady_clock::time_point*>(event) = std::chrono::steady_clock::now();
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
