// The fake NVML library's process-wide state: the loaded scenario, scenario
// time, and the faults injected into each call before it answers.
//
//   nvmlReturn_t status = Initialize(NvmlCall::nvmlInit_v2);  // reads $GPUDOCTOR_SCENARIO
//   const LoadedScenario* loaded = ActiveScenario();
//   double t;
//   if (InjectFaults(*loaded, NvmlCall::nvmlDeviceGetTemperature, /*gpu=*/3, &t) == NVML_SUCCESS) ...
//
// Thread-safe. Parsed scenarios are never freed, so a handle stays valid
// memory after nvmlShutdown; calls then answer NVML_ERROR_UNINITIALIZED.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nvml/nvml_api.h"
#include "nvml_calls.h"
#include "scenario.h"
#include "scenario_clock.h"

// What an nvmlDevice_t points to.
struct nvmlDevice_st {
  const gpudoctor::fake_nvml::GpuSpec* gpu = nullptr;
  unsigned int pci_domain = 0, pci_bus = 0, pci_device = 0, pci_function = 0;
};

namespace gpudoctor::fake_nvml {

struct LoadedScenario {
  std::string path;
  std::string text;
  Scenario scenario;
  std::vector<nvmlDevice_st> devices;  // one per GPU, by index

  // The device a handle names, or nullptr when it is not one of ours.
  const nvmlDevice_st* Find(nvmlDevice_t handle) const;
};

// nvmlInit and nvmlInit_v2. Reference-counted like NVML: every successful
// call needs an nvmlShutdown.
nvmlReturn_t Initialize(NvmlCall call);
nvmlReturn_t Shutdown();

// nullptr until nvmlInit succeeds and after the last nvmlShutdown.
const LoadedScenario* ActiveScenario();

ScenarioClock CurrentClock();
inline double ScenarioNow() { return CurrentClock().SecondsAt(std::chrono::system_clock::now()); }

// Blocks or fails `call` as the scenario's [[hang]] and [[call_error]]
// entries say. `gpu` is the GPU the call acts on (nullopt for calls that act
// on none). On NVML_SUCCESS, *t is the scenario time to answer for, read
// after any finite hang.
nvmlReturn_t InjectFaults(const LoadedScenario& loaded, NvmlCall call, std::optional<uint32_t> gpu, double* t);

}  // namespace gpudoctor::fake_nvml
