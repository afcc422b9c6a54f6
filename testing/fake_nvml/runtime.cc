#include "runtime.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include "common/input_file.h"

namespace gpudoctor::fake_nvml {
namespace {

std::mutex g_init_mutex;
int g_init_count = 0;                                   // guarded by g_init_mutex
std::vector<std::unique_ptr<LoadedScenario>> g_loaded;  // guarded; never shrinks, so pointers stay valid
std::optional<WallTime> g_first_init;                   // guarded

std::atomic<const LoadedScenario*> g_active{nullptr};
// The clock, as plain atomics so that every call reads it without a lock.
// Written only by an nvmlInit that is about to publish g_active.
std::atomic<int64_t> g_epoch_ms{0};
std::atomic<double> g_time_scale{1.0};
std::atomic<double> g_pinned_seconds{std::numeric_limits<double>::quiet_NaN()};

// The library's messages go to stderr, one line each, as NVML has no other
// way to explain a failed nvmlInit.
void Report(const std::string& message) { std::fprintf(stderr, "%s\n", message.c_str()); }

Result<std::string> ReadScenarioFile(const std::string& path) {
  auto text = ReadInputFile(path, kMaxScenarioFileBytes);
  if (!text) return Error{"cannot read scenario " + text.error().message};
  return text;
}

// "0000:1b:00.0" into its numbers; the scenario parser has normalised it.
void SetPciAddress(const std::string& bus_id, nvmlDevice_st& device) {
  std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &device.pci_domain, &device.pci_bus, &device.pci_device,
              &device.pci_function);
}

// The scenario at `path`, parsed once per distinct file content.
Result<const LoadedScenario*> LoadScenario(const std::string& path) {
  auto text = ReadScenarioFile(path);
  if (!text) return text.error();
  for (const auto& loaded : g_loaded)
    if (loaded->path == path && loaded->text == *text) return loaded.get();
  auto scenario = ParseScenario(*text, path);
  if (!scenario) return scenario.error();
  auto loaded = std::make_unique<LoadedScenario>();
  loaded->path = path;
  loaded->text = std::move(*text);
  loaded->scenario = std::move(*scenario);
  for (const GpuSpec& gpu : loaded->scenario.gpus) {
    nvmlDevice_st device;
    device.gpu = &gpu;
    SetPciAddress(gpu.Text(GpuField::kPciBusId), device);
    loaded->devices.push_back(device);
  }
  g_loaded.push_back(std::move(loaded));
  return g_loaded.back().get();
}

void SetClock(const ScenarioClock& clock) {
  g_epoch_ms.store(clock.epoch_ms(), std::memory_order_relaxed);
  g_time_scale.store(clock.time_scale(), std::memory_order_relaxed);
  g_pinned_seconds.store(clock.pinned_seconds().value_or(std::numeric_limits<double>::quiet_NaN()),
                         std::memory_order_relaxed);
}

// Reads the scenario and the clock settings for a first nvmlInit.
Result<const LoadedScenario*> PrepareFirstInit() {
  const char* path = std::getenv("GPUDOCTOR_SCENARIO");
  if (path == nullptr || *path == '\0')
    return Error{"fake NVML: GPUDOCTOR_SCENARIO is not set; it must name a scenario file (see docs/scenarios.md)"};
  auto loaded = LoadScenario(path);
  if (!loaded) return loaded.error();
  if (!g_first_init) g_first_init = std::chrono::system_clock::now();
  auto clock = MakeScenarioClock(ClockOverrides::FromEnvironment(), (*loaded)->scenario.time_scale, *g_first_init);
  if (!clock) return Error{"fake NVML: " + clock.error().message};
  // Starting at `start` is the same as an epoch that far in the past.
  const double start = (*loaded)->scenario.start;
  SetClock(ScenarioClock(clock->epoch_ms() - static_cast<int64_t>(start * 1000.0 / clock->time_scale()),
                         clock->time_scale(), clock->pinned_seconds()));
  return *loaded;
}

[[noreturn]] void BlockForever() {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(24));
}

bool Matches(const CallSet& calls, const std::optional<uint32_t>& fault_gpu, NvmlCall call,
             const std::optional<uint32_t>& gpu) {
  if (!calls.test(Index(call))) return false;
  return !fault_gpu || fault_gpu == gpu;
}

}  // namespace

const nvmlDevice_st* LoadedScenario::Find(nvmlDevice_t handle) const {
  auto address = reinterpret_cast<std::uintptr_t>(handle);
  auto begin = reinterpret_cast<std::uintptr_t>(devices.data());
  auto end = begin + devices.size() * sizeof(nvmlDevice_st);
  if (address < begin || address >= end || (address - begin) % sizeof(nvmlDevice_st) != 0) return nullptr;
  return &devices[(address - begin) / sizeof(nvmlDevice_st)];
}

nvmlReturn_t Initialize(NvmlCall call) {
  std::lock_guard lock(g_init_mutex);
  const LoadedScenario* loaded = g_active.load(std::memory_order_acquire);
  if (g_init_count == 0) {
    auto prepared = PrepareFirstInit();
    if (!prepared) {
      Report(prepared.error().message);
      return NVML_ERROR_UNKNOWN;
    }
    loaded = *prepared;
  }
  double t = 0;
  if (nvmlReturn_t fault = InjectFaults(*loaded, call, std::nullopt, &t); fault != NVML_SUCCESS) return fault;
  if (g_init_count == 0)
    for (const InitFailure& failure : loaded->scenario.init_failures)
      if (failure.window.Contains(t)) return failure.error;
  if (g_init_count++ == 0) g_active.store(loaded, std::memory_order_release);
  return NVML_SUCCESS;
}

nvmlReturn_t Shutdown() {
  std::lock_guard lock(g_init_mutex);
  const LoadedScenario* loaded = g_active.load(std::memory_order_acquire);
  if (g_init_count == 0 || loaded == nullptr) return NVML_ERROR_UNINITIALIZED;
  double t = 0;
  if (nvmlReturn_t fault = InjectFaults(*loaded, NvmlCall::nvmlShutdown, std::nullopt, &t); fault != NVML_SUCCESS)
    return fault;
  if (--g_init_count == 0) g_active.store(nullptr, std::memory_order_release);
  return NVML_SUCCESS;
}

const LoadedScenario* ActiveScenario() { return g_active.load(std::memory_order_acquire); }

ScenarioClock CurrentClock() {
  double pinned = g_pinned_seconds.load(std::memory_order_relaxed);
  return ScenarioClock(g_epoch_ms.load(std::memory_order_relaxed), g_time_scale.load(std::memory_order_relaxed),
                       std::isnan(pinned) ? std::nullopt : std::optional<double>(pinned));
}

nvmlReturn_t InjectFaults(const LoadedScenario& loaded, NvmlCall call, std::optional<uint32_t> gpu, double* t) {
  *t = ScenarioNow();
  for (const HangFault& hang : loaded.scenario.hangs) {
    if (!Matches(hang.calls, hang.gpu, call, gpu) || !hang.window.Contains(*t)) continue;
    if (!hang.seconds) BlockForever();
    // Real seconds, not scaled: hang protection works in wall-clock time.
    std::this_thread::sleep_for(std::chrono::duration<double>(*hang.seconds));
    *t = ScenarioNow();
  }
  for (const CallErrorFault& fault : loaded.scenario.call_errors)
    if (Matches(fault.calls, fault.gpu, call, gpu) && fault.window.Contains(*t)) return fault.error;
  return NVML_SUCCESS;
}

}  // namespace gpudoctor::fake_nvml
