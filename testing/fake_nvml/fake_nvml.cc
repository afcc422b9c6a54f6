// The fake NVML library's exported entry points.
//
// Each function follows NVML's contract (argument checks, buffer sizes,
// NVML_ERROR_* codes) and answers from the scenario that runtime.h loaded,
// at the current scenario time. Built twice: libgpudoctor_fake_nvml.so with
// every entry point, and, with GPUDOCTOR_FAKE_NVML_LEGACY, a library that
// lacks the versioned ones (nvmlInit_v2, ...), as old drivers did.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <unordered_set>

#include "common/text.h"
#include "nvml/nvml_api.h"
#include "nvml_calls.h"
#include "nvml_codes.h"
#include "runtime.h"
#include "xid_mailbox.h"

// Declaring every entry point from the list makes the compiler check that
// each definition below has NVML's exact signature.
#define GPUDOCTOR_FAKE_NVML_EXPORT extern "C" __attribute__((visibility("default")))
#define GPUDOCTOR_FAKE_NVML_DECLARE(name, ret, params) GPUDOCTOR_FAKE_NVML_EXPORT ret name params;
GPUDOCTOR_NVML_FUNCTIONS(GPUDOCTOR_FAKE_NVML_DECLARE)
#undef GPUDOCTOR_FAKE_NVML_DECLARE
GPUDOCTOR_FAKE_NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t result);

#if defined(GPUDOCTOR_FAKE_NVML_LEGACY)
#define GPUDOCTOR_FAKE_NVML_VERSIONED 0
#else
#define GPUDOCTOR_FAKE_NVML_VERSIONED 1
#endif

using gpudoctor::fake_nvml::GpuField;
using gpudoctor::fake_nvml::GpuSpec;
using gpudoctor::fake_nvml::LoadedScenario;
using gpudoctor::fake_nvml::NvmlCall;

// An event set: the Xid events it has yet to hand out.
struct nvmlEventSet_st {
  explicit nvmlEventSet_st(const LoadedScenario& loaded) : loaded(&loaded), mailbox(loaded.scenario) {}
  const LoadedScenario* loaded;
  std::mutex mutex;
  gpudoctor::fake_nvml::XidMailbox mailbox;  // guarded by mutex
};

// A GPM sample: which GPU it was taken of, and when, in scenario time.
struct nvmlGpmSample_st {
  bool taken = false;
  uint32_t gpu = 0;
  double t = 0;
};

namespace {

constexpr unsigned long long kBytesPerMib = 1ULL << 20;
constexpr unsigned int kNoInstance = 0xFFFFFFFF;  // gpuInstanceId / computeInstanceId outside MIG

// ---------------------------------------------------------------------------
// Call plumbing.

// Answers a call about one GPU: NVML's own checks, then the scenario's
// faults, then a GPU that has fallen off the bus, then `answer(device, t)`.
template <typename Answer>
nvmlReturn_t OnGpu(NvmlCall call, nvmlDevice_t handle, Answer&& answer) {
  const LoadedScenario* loaded = gpudoctor::fake_nvml::ActiveScenario();
  if (loaded == nullptr) return NVML_ERROR_UNINITIALIZED;
  const nvmlDevice_st* device = loaded->Find(handle);
  if (device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  double t = 0;
  if (nvmlReturn_t fault = InjectFaults(*loaded, call, device->gpu->index, &t); fault != NVML_SUCCESS) return fault;
  if (device->gpu->LostAt(t)) return NVML_ERROR_GPU_IS_LOST;
  return answer(*device, t);
}

// Answers a call that acts on no GPU, after the scenario's faults.
template <typename Answer>
nvmlReturn_t OnSystem(NvmlCall call, Answer&& answer) {
  const LoadedScenario* loaded = gpudoctor::fake_nvml::ActiveScenario();
  if (loaded == nullptr) return NVML_ERROR_UNINITIALIZED;
  double t = 0;
  if (nvmlReturn_t fault = InjectFaults(*loaded, call, std::nullopt, &t); fault != NVML_SUCCESS) return fault;
  return answer(*loaded, t);
}

// NVML's integer readings are the whole part of a scenario value (a counter
// rising 1 a minute reads 0 until the minute is up); unit conversions (W to
// mW, MiB to bytes) round to the nearest unit instead.
unsigned int ToUnsigned(double value) {
  if (!(value > 0)) return 0;
  if (value >= 4294967295.0) return 0xFFFFFFFFu;
  return static_cast<unsigned int>(value);
}

unsigned long long ToUnsignedLong(double value) {
  if (!(value > 0)) return 0;
  if (value >= 1.8e19) return ~0ULL;
  return static_cast<unsigned long long>(value);
}

nvmlEnableState_t ToEnableState(double flag) { return flag != 0 ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED; }

nvmlReturn_t CopyText(std::string_view text, char* out, unsigned int length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (text.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, text.data(), text.size());
  out[text.size()] = '\0';
  return NVML_SUCCESS;
}

nvmlReturn_t ReadText(NvmlCall call, nvmlDevice_t handle, GpuField field, char* out, unsigned int length) {
  return OnGpu(call, handle, [&](const nvmlDevice_st& device, double) -> nvmlReturn_t {
    if (!device.gpu->Supported(field)) return NVML_ERROR_NOT_SUPPORTED;
    return CopyText(device.gpu->Text(field), out, length);
  });
}

// One number field as an unsigned int.
nvmlReturn_t ReadUnsigned(NvmlCall call, nvmlDevice_t handle, GpuField field, unsigned int* out) {
  return OnGpu(call, handle, [&](const nvmlDevice_st& device, double t) -> nvmlReturn_t {
    if (!device.gpu->Supported(field)) return NVML_ERROR_NOT_SUPPORTED;
    if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *out = ToUnsigned(device.gpu->Number(field, t));
    return NVML_SUCCESS;
  });
}

// A field in watts, as NVML's milliwatts.
nvmlReturn_t ReadMilliwatts(NvmlCall call, nvmlDevice_t handle, GpuField field, unsigned int* out) {
  return OnGpu(call, handle, [&](const nvmlDevice_st& device, double t) -> nvmlReturn_t {
    if (!device.gpu->Supported(field)) return NVML_ERROR_NOT_SUPPORTED;
    if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *out = ToUnsigned(std::round(device.gpu->Number(field, t) * 1000));
    return NVML_SUCCESS;
  });
}

nvmlReturn_t ReadFlag(NvmlCall call, nvmlDevice_t handle, GpuField field, nvmlEnableState_t* out) {
  return OnGpu(call, handle, [&](const nvmlDevice_st& device, double t) -> nvmlReturn_t {
    if (!device.gpu->Supported(field)) return NVML_ERROR_NOT_SUPPORTED;
    if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *out = ToEnableState(device.gpu->Number(field, t));
    return NVML_SUCCESS;
  });
}

// The fabric fields every version of nvmlDeviceGetGpuFabricInfo fills. The
// cluster UUID is written as hex digits in the scenario (dashes allowed).
template <typename Info>
nvmlReturn_t FillFabricInfo(NvmlCall call, nvmlDevice_t handle, Info* info, unsigned int* health_mask) {
  return OnGpu(call, handle, [&](const nvmlDevice_st& device, double t) -> nvmlReturn_t {
    const GpuSpec& gpu = *device.gpu;
    if (!gpu.Supported(GpuField::kFabricState)) return NVML_ERROR_NOT_SUPPORTED;
    if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    std::memset(info->clusterUuid, 0, sizeof info->clusterUuid);
    size_t nibble = 0;
    for (char c : gpu.Text(GpuField::kFabricClusterUuid)) {
      auto digit = gpudoctor::ParseInt<unsigned>(std::string_view(&c, 1), 16);
      if (!digit || nibble >= 2 * sizeof info->clusterUuid) continue;
      info->clusterUuid[nibble / 2] |= static_cast<unsigned char>(nibble % 2 == 0 ? *digit << 4 : *digit);
      ++nibble;
    }
    info->status = static_cast<nvmlReturn_t>(ToUnsigned(gpu.Number(GpuField::kFabricStatus, t)));
    info->cliqueId = ToUnsigned(gpu.Number(GpuField::kFabricCliqueId, t));
    info->state = static_cast<nvmlGpuFabricState_t>(ToUnsigned(gpu.Number(GpuField::kFabricState, t)));
    if (health_mask != nullptr) *health_mask = ToUnsigned(gpu.Number(GpuField::kFabricHealthMask, t));
    return NVML_SUCCESS;
  });
}

// ---------------------------------------------------------------------------
// Shared bodies of versioned entry points.

nvmlReturn_t GetCount(NvmlCall call, unsigned int* count) {
  return OnSystem(call, [&](const LoadedScenario& loaded, double) -> nvmlReturn_t {
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *count = static_cast<unsigned int>(loaded.devices.size());
    return NVML_SUCCESS;
  });
}

// Real NVML hands out handles for lost GPUs too; only later calls fail.
nvmlReturn_t GetHandleByIndex(NvmlCall call, unsigned int index, nvmlDevice_t* handle) {
  const LoadedScenario* loaded = gpudoctor::fake_nvml::ActiveScenario();
  if (loaded == nullptr) return NVML_ERROR_UNINITIALIZED;
  if (index >= loaded->devices.size() || handle == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  double t = 0;
  if (nvmlReturn_t fault = InjectFaults(*loaded, call, index, &t); fault != NVML_SUCCESS) return fault;
  *handle = const_cast<nvmlDevice_t>(&loaded->devices[index]);
  return NVML_SUCCESS;
}

nvmlReturn_t GetCudaDriverVersion(NvmlCall call, int* version) {
  return OnSystem(call, [&](const LoadedScenario& loaded, double) -> nvmlReturn_t {
    if (version == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *version = loaded.scenario.cuda_driver_version;
    return NVML_SUCCESS;
  });
}

// Fills either PCI layout: `Info` is nvmlPciInfo_t or nvmlPciInfoV1_t.
template <typename Info>
nvmlReturn_t GetPciInfo(NvmlCall call, nvmlDevice_t handle, Info* pci) {
  return OnGpu(call, handle, [&](const nvmlDevice_st& device, double) -> nvmlReturn_t {
    if (!device.gpu->Supported(GpuField::kPciBusId)) return NVML_ERROR_NOT_SUPPORTED;
    if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *pci = Info{};
    pci->domain = device.pci_domain;
    pci->bus = device.pci_bus;
    pci->device = device.pci_device;
    pci->pciDeviceId = device.gpu->pci_device_id;
    pci->pciSubSystemId = device.gpu->pci_subsystem_id;
    if constexpr (requires { pci->busIdLegacy; }) {
      std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X", device.pci_domain, device.pci_bus,
                    device.pci_device, device.pci_function);
      std::snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.%X", device.pci_domain, device.pci_bus,
                    device.pci_device, device.pci_function);
    } else {
      std::snprintf(pci->busId, sizeof pci->busId, "%04X:%02X:%02X.%X", device.pci_domain, device.pci_bus,
                    device.pci_device, device.pci_function);
    }
    return NVML_SUCCESS;
  });
}

nvmlReturn_t GetFanSpeed(NvmlCall call, nvmlDevice_t handle, unsigned int fan, unsigned int* speed) {
  return OnGpu(call, handle, [&](const nvmlDevice_st& device, double t) -> nvmlReturn_t {
    const GpuSpec& gpu = *device.gpu;
    if (!gpu.Supported(GpuField::kFanSpeedsPercent) || gpu.fan_speeds_percent.empty()) return NVML_ERROR_NOT_SUPPORTED;
    if (speed == nullptr || fan >= gpu.fan_speeds_percent.size()) return NVML_ERROR_INVALID_ARGUMENT;
    *speed = ToUnsigned(gpu.fan_speeds_percent[fan].At(t));
    return NVML_SUCCESS;
  });
}

nvmlReturn_t GetClocksEventReasons(NvmlCall call, nvmlDevice_t handle, unsigned long long* reasons) {
  return OnGpu(call, handle, [&](const nvmlDevice_st& device, double t) -> nvmlReturn_t {
    if (!device.gpu->Supported(GpuField::kClockEventReasons)) return NVML_ERROR_NOT_SUPPORTED;
    if (reasons == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *reasons = ToUnsignedLong(device.gpu->Number(GpuField::kClockEventReasons, t));
    return NVML_SUCCESS;
  });
}

// Fills either process layout: `Info` is nvmlProcessInfo_t or nvmlProcessInfoV1_t.
template <typename Info>
nvmlReturn_t GetComputeProcesses(NvmlCall call, nvmlDevice_t handle, unsigned int* count, Info* infos) {
  return OnGpu(call, handle, [&](const nvmlDevice_st& device, double t) -> nvmlReturn_t {
    const GpuSpec& gpu = *device.gpu;
    if (!gpu.Supported(GpuField::kProcesses)) return NVML_ERROR_NOT_SUPPORTED;
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    auto running = static_cast<unsigned int>(std::count_if(gpu.processes.begin(), gpu.processes.end(),
                                                           [&](const auto& process) { return process.RunningAt(t); }));
    if (*count < running) {
      *count = running;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (running > 0 && infos == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int filled = 0;
    for (const auto& process : gpu.processes) {
      if (!process.RunningAt(t)) continue;
      Info& info = infos[filled++];
      info = Info{};
      info.pid = process.pid;
      info.usedGpuMemory = ToUnsignedLong(std::round(process.used_memory_mib.At(t) * kBytesPerMib));
      if constexpr (requires { info.gpuInstanceId; }) {
        info.gpuInstanceId = kNoInstance;
        info.computeInstanceId = kNoInstance;
      }
    }
    *count = running;
    return NVML_SUCCESS;
  });
}

// Hands out the next due Xid event, waiting up to timeout_ms of real time.
nvmlReturn_t WaitForEvent(NvmlCall call, nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeout_ms);

}  // namespace

// ---------------------------------------------------------------------------
// Library and system.

#if GPUDOCTOR_FAKE_NVML_VERSIONED
nvmlReturn_t nvmlInit_v2(void) { return gpudoctor::fake_nvml::Initialize(NvmlCall::nvmlInit_v2); }
#endif
nvmlReturn_t nvmlInit(void) { return gpudoctor::fake_nvml::Initialize(NvmlCall::nvmlInit); }
nvmlReturn_t nvmlShutdown(void) { return gpudoctor::fake_nvml::Shutdown(); }

const char* nvmlErrorString(nvmlReturn_t result) { return gpudoctor::fake_nvml::NvmlCodeDescription(result); }

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  return OnSystem(NvmlCall::nvmlSystemGetDriverVersion, [&](const LoadedScenario& loaded, double) -> nvmlReturn_t {
    return CopyText(loaded.scenario.driver_version, version, length);
  });
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  return OnSystem(NvmlCall::nvmlSystemGetNVMLVersion, [&](const LoadedScenario& loaded, double) -> nvmlReturn_t {
    return CopyText(loaded.scenario.nvml_version, version, length);
  });
}

#if GPUDOCTOR_FAKE_NVML_VERSIONED
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) {
  return GetCudaDriverVersion(NvmlCall::nvmlSystemGetCudaDriverVersion_v2, version);
}
#endif
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* version) {
  return GetCudaDriverVersion(NvmlCall::nvmlSystemGetCudaDriverVersion, version);
}

// Names the process from any GPU's process list; NVML truncates to fit.
nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char* name, unsigned int length) {
  return OnSystem(NvmlCall::nvmlSystemGetProcessName, [&](const LoadedScenario& loaded, double) -> nvmlReturn_t {
    if (name == nullptr || length == 0) return NVML_ERROR_INVALID_ARGUMENT;
    for (const GpuSpec& gpu : loaded.scenario.gpus) {
      for (const auto& process : gpu.processes) {
        if (process.pid != pid) continue;
        size_t size = std::min<size_t>(process.name.size(), length - 1);
        std::memcpy(name, process.name.data(), size);
        name[size] = '\0';
        return NVML_SUCCESS;
      }
    }
    return NVML_ERROR_NOT_FOUND;
  });
}

// ---------------------------------------------------------------------------
// Devices and identity.

#if GPUDOCTOR_FAKE_NVML_VERSIONED
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) { return GetCount(NvmlCall::nvmlDeviceGetCount_v2, count); }
#endif
nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) { return GetCount(NvmlCall::nvmlDeviceGetCount, count); }

#if GPUDOCTOR_FAKE_NVML_VERSIONED
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  return GetHandleByIndex(NvmlCall::nvmlDeviceGetHandleByIndex_v2, index, device);
}
#endif
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return GetHandleByIndex(NvmlCall::nvmlDeviceGetHandleByIndex, index, device);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  return ReadText(NvmlCall::nvmlDeviceGetName, device, GpuField::kName, name, length);
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  return ReadText(NvmlCall::nvmlDeviceGetUUID, device, GpuField::kUuid, uuid, length);
}
nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char* serial, unsigned int length) {
  return ReadText(NvmlCall::nvmlDeviceGetSerial, device, GpuField::kSerial, serial, length);
}
nvmlReturn_t nvmlDeviceGetBoardPartNumber(nvmlDevice_t device, char* part, unsigned int length) {
  return ReadText(NvmlCall::nvmlDeviceGetBoardPartNumber, device, GpuField::kBoardPartNumber, part, length);
}
nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char* version, unsigned int length) {
  return ReadText(NvmlCall::nvmlDeviceGetVbiosVersion, device, GpuField::kVbiosVersion, version, length);
}
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t* mode) {
  return ReadFlag(NvmlCall::nvmlDeviceGetPersistenceMode, device, GpuField::kPersistenceMode, mode);
}

// A corrupted infoROM is NVML's CORRUPTED_INFOROM, not a value.
nvmlReturn_t nvmlDeviceValidateInforom(nvmlDevice_t device) {
  return OnGpu(NvmlCall::nvmlDeviceValidateInforom, device, [&](const nvmlDevice_st& dev, double t) -> nvmlReturn_t {
    if (!dev.gpu->Supported(GpuField::kInforomValid)) return NVML_ERROR_NOT_SUPPORTED;
    return dev.gpu->Number(GpuField::kInforomValid, t) != 0 ? NVML_SUCCESS : NVML_ERROR_CORRUPTED_INFOROM;
  });
}

// ---------------------------------------------------------------------------
// PCIe.

#if GPUDOCTOR_FAKE_NVML_VERSIONED
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return GetPciInfo(NvmlCall::nvmlDeviceGetPciInfo_v3, device, pci);
}
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return GetPciInfo(NvmlCall::nvmlDeviceGetPciInfo_v2, device, pci);
}
#endif
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfoV1_t* pci) {
  return GetPciInfo(NvmlCall::nvmlDeviceGetPciInfo, device, pci);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int* generation) {
  return ReadUnsigned(NvmlCall::nvmlDeviceGetCurrPcieLinkGeneration, device, GpuField::kPcieGenerationCurrent,
                      generation);
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int* generation) {
  return ReadUnsigned(NvmlCall::nvmlDeviceGetMaxPcieLinkGeneration, device, GpuField::kPcieGenerationMax, generation);
}
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int* width) {
  return ReadUnsigned(NvmlCall::nvmlDeviceGetCurrPcieLinkWidth, device, GpuField::kPcieWidthCurrent, width);
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int* width) {
  return ReadUnsigned(NvmlCall::nvmlDeviceGetMaxPcieLinkWidth, device, GpuField::kPcieWidthMax, width);
}
nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int* value) {
  return ReadUnsigned(NvmlCall::nvmlDeviceGetPcieReplayCounter, device, GpuField::kPcieReplayCount, value);
}

// ---------------------------------------------------------------------------
// Thermal, power, clocks.

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int* temp) {
  if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  return ReadUnsigned(NvmlCall::nvmlDeviceGetTemperature, device, GpuField::kTemperatureC, temp);
}

nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, int threshold, unsigned int* temp) {
  GpuField field;
  switch (threshold) {
    case NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: field = GpuField::kTemperatureShutdownC; break;
    case NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: field = GpuField::kTemperatureSlowdownC; break;
    case NVML_TEMPERATURE_THRESHOLD_MEM_MAX: field = GpuField::kMemoryTemperatureMaxC; break;
    case NVML_TEMPERATURE_THRESHOLD_GPU_MAX: field = GpuField::kTemperatureMaxOperatingC; break;
    default: return NVML_ERROR_INVALID_ARGUMENT;
  }
  return ReadUnsigned(NvmlCall::nvmlDeviceGetTemperatureThreshold, device, field, temp);
}

// Only NVML_FI_DEV_MEMORY_TEMP is known; other field ids answer
// NOT_SUPPORTED in their own slot, as NVML does for fields a GPU lacks.
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, nvmlFieldValue_t* values) {
  return OnGpu(NvmlCall::nvmlDeviceGetFieldValues, device, [&](const nvmlDevice_st& dev, double t) -> nvmlReturn_t {
    if (count < 0 || (count > 0 && values == nullptr)) return NVML_ERROR_INVALID_ARGUMENT;
    long long now_us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    for (nvmlFieldValue_t& value : std::span(values, static_cast<size_t>(count))) {
      value.timestamp = now_us;
      value.latencyUsec = 0;
      if (value.fieldId == NVML_FI_DEV_MEMORY_TEMP && dev.gpu->Supported(GpuField::kMemoryTemperatureC)) {
        value.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        value.value.uiVal = ToUnsigned(dev.gpu->Number(GpuField::kMemoryTemperatureC, t));
        value.nvmlReturn = NVML_SUCCESS;
      } else {
        value.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
      }
    }
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetNumFans(nvmlDevice_t device, unsigned int* count) {
  return OnGpu(NvmlCall::nvmlDeviceGetNumFans, device, [&](const nvmlDevice_st& dev, double) -> nvmlReturn_t {
    if (!dev.gpu->Supported(GpuField::kFanSpeedsPercent)) return NVML_ERROR_NOT_SUPPORTED;
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *count = static_cast<unsigned int>(dev.gpu->fan_speeds_percent.size());
    return NVML_SUCCESS;
  });
}

#if GPUDOCTOR_FAKE_NVML_VERSIONED
nvmlReturn_t nvmlDeviceGetFanSpeed_v2(nvmlDevice_t device, unsigned int fan, unsigned int* speed) {
  return GetFanSpeed(NvmlCall::nvmlDeviceGetFanSpeed_v2, device, fan, speed);
}
#endif
nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int* speed) {
  return GetFanSpeed(NvmlCall::nvmlDeviceGetFanSpeed, device, 0, speed);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* milliwatts) {
  return ReadMilliwatts(NvmlCall::nvmlDeviceGetPowerUsage, device, GpuField::kPowerDrawW, milliwatts);
}
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* milliwatts) {
  return ReadMilliwatts(NvmlCall::nvmlDeviceGetEnforcedPowerLimit, device, GpuField::kPowerLimitW, milliwatts);
}
nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device, unsigned int* milliwatts) {
  return ReadMilliwatts(NvmlCall::nvmlDeviceGetPowerManagementDefaultLimit, device, GpuField::kPowerDefaultLimitW,
                        milliwatts);
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* millijoules) {
  return OnGpu(NvmlCall::nvmlDeviceGetTotalEnergyConsumption, device,
               [&](const nvmlDevice_st& dev, double t) -> nvmlReturn_t {
                 if (!dev.gpu->Supported(GpuField::kTotalEnergyMj)) return NVML_ERROR_NOT_SUPPORTED;
                 if (millijoules == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
                 *millijoules = ToUnsignedLong(dev.gpu->Number(GpuField::kTotalEnergyMj, t));
                 return NVML_SUCCESS;
               });
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int* mhz) {
  switch (type) {
    case NVML_CLOCK_GRAPHICS:
    case NVML_CLOCK_SM: return ReadUnsigned(NvmlCall::nvmlDeviceGetClockInfo, device, GpuField::kSmClockMhz, mhz);
    case NVML_CLOCK_MEM: return ReadUnsigned(NvmlCall::nvmlDeviceGetClockInfo, device, GpuField::kMemoryClockMhz, mhz);
    default: return NVML_ERROR_INVALID_ARGUMENT;
  }
}

#if GPUDOCTOR_FAKE_NVML_VERSIONED
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long* reasons) {
  return GetClocksEventReasons(NvmlCall::nvmlDeviceGetCurrentClocksEventReasons, device, reasons);
}
#endif
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long* reasons) {
  return GetClocksEventReasons(NvmlCall::nvmlDeviceGetCurrentClocksThrottleReasons, device, reasons);
}

// ---------------------------------------------------------------------------
// Use.

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  return OnGpu(
      NvmlCall::nvmlDeviceGetUtilizationRates, device, [&](const nvmlDevice_st& dev, double t) -> nvmlReturn_t {
        const GpuSpec& gpu = *dev.gpu;
        if (!gpu.Supported(GpuField::kUtilizationGpuPercent) || !gpu.Supported(GpuField::kUtilizationMemoryPercent))
          return NVML_ERROR_NOT_SUPPORTED;
        if (utilization == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
        utilization->gpu = ToUnsigned(gpu.Number(GpuField::kUtilizationGpuPercent, t));
        utilization->memory = ToUnsigned(gpu.Number(GpuField::kUtilizationMemoryPercent, t));
        return NVML_SUCCESS;
      });
}

#if GPUDOCTOR_FAKE_NVML_VERSIONED
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  return OnGpu(NvmlCall::nvmlDeviceGetMemoryInfo_v2, device, [&](const nvmlDevice_st& dev, double t) -> nvmlReturn_t {
    const GpuSpec& gpu = *dev.gpu;
    if (!gpu.Supported(GpuField::kMemoryTotalMib) || !gpu.Supported(GpuField::kMemoryUsedMib) ||
        !gpu.Supported(GpuField::kMemoryReservedMib))
      return NVML_ERROR_NOT_SUPPORTED;
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    auto bytes = [&](GpuField field) { return ToUnsignedLong(std::round(gpu.Number(field, t) * kBytesPerMib)); };
    memory->total = bytes(GpuField::kMemoryTotalMib);
    memory->reserved = std::min(memory->total, bytes(GpuField::kMemoryReservedMib));
    // This version's `used` includes the reserved share.
    memory->used = std::min(memory->total, bytes(GpuField::kMemoryUsedMib) + memory->reserved);
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
  });
}
#endif

// An engine's utilization, with the driver's sampling period (167 ms on H100).
nvmlReturn_t GetEngineUtilization(NvmlCall call, nvmlDevice_t handle, GpuField field, unsigned int* utilization,
                                  unsigned int* period_us) {
  return OnGpu(call, handle, [&](const nvmlDevice_st& dev, double t) -> nvmlReturn_t {
    if (!dev.gpu->Supported(field)) return NVML_ERROR_NOT_SUPPORTED;
    if (utilization == nullptr || period_us == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *utilization = ToUnsigned(dev.gpu->Number(field, t));
    *period_us = 167000;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int* utilization,
                                             unsigned int* sampling_period_us) {
  return GetEngineUtilization(NvmlCall::nvmlDeviceGetEncoderUtilization, device, GpuField::kEncoderUtilizationPercent,
                              utilization, sampling_period_us);
}

nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int* utilization,
                                             unsigned int* sampling_period_us) {
  return GetEngineUtilization(NvmlCall::nvmlDeviceGetDecoderUtilization, device, GpuField::kDecoderUtilizationPercent,
                              utilization, sampling_period_us);
}

// Used memory is capped at the total: a GPU cannot hand out more than it has.
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  return OnGpu(NvmlCall::nvmlDeviceGetMemoryInfo, device, [&](const nvmlDevice_st& dev, double t) -> nvmlReturn_t {
    const GpuSpec& gpu = *dev.gpu;
    if (!gpu.Supported(GpuField::kMemoryTotalMib) || !gpu.Supported(GpuField::kMemoryUsedMib))
      return NVML_ERROR_NOT_SUPPORTED;
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = ToUnsignedLong(std::round(gpu.Number(GpuField::kMemoryTotalMib, t) * kBytesPerMib));
    memory->used =
        std::min(memory->total, ToUnsignedLong(std::round(gpu.Number(GpuField::kMemoryUsedMib, t) * kBytesPerMib)));
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
  });
}

#if GPUDOCTOR_FAKE_NVML_VERSIONED
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  return GetComputeProcesses(NvmlCall::nvmlDeviceGetComputeRunningProcesses_v3, device, count, infos);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  return GetComputeProcesses(NvmlCall::nvmlDeviceGetComputeRunningProcesses_v2, device, count, infos);
}
#endif
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* count,
                                                  nvmlProcessInfoV1_t* infos) {
  return GetComputeProcesses(NvmlCall::nvmlDeviceGetComputeRunningProcesses, device, count, infos);
}

// ---------------------------------------------------------------------------
// Memory errors.

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t* current, nvmlEnableState_t* pending) {
  return OnGpu(NvmlCall::nvmlDeviceGetEccMode, device, [&](const nvmlDevice_st& dev, double t) -> nvmlReturn_t {
    if (!dev.gpu->Supported(GpuField::kEccEnabled)) return NVML_ERROR_NOT_SUPPORTED;
    if (current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *current = *pending = ToEnableState(dev.gpu->Number(GpuField::kEccEnabled, t));
    return NVML_SUCCESS;
  });
}

// Counters exist only while ECC is on, as with real GPUs.
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int error_type, int counter_type,
                                         unsigned long long* count) {
  bool corrected = error_type == NVML_MEMORY_ERROR_TYPE_CORRECTED;
  bool uncorrected = error_type == NVML_MEMORY_ERROR_TYPE_UNCORRECTED;
  bool is_volatile = counter_type == NVML_VOLATILE_ECC;
  if ((!corrected && !uncorrected) || (!is_volatile && counter_type != NVML_AGGREGATE_ECC))
    return NVML_ERROR_INVALID_ARGUMENT;
  GpuField field = is_volatile ? (corrected ? GpuField::kEccVolatileCorrected : GpuField::kEccVolatileUncorrected)
                               : (corrected ? GpuField::kEccAggregateCorrected : GpuField::kEccAggregateUncorrected);
  return OnGpu(NvmlCall::nvmlDeviceGetTotalEccErrors, device, [&](const nvmlDevice_st& dev, double t) -> nvmlReturn_t {
    const GpuSpec& gpu = *dev.gpu;
    if (!gpu.Supported(field) || !gpu.Supported(GpuField::kEccEnabled) || gpu.Number(GpuField::kEccEnabled, t) == 0)
      return NVML_ERROR_NOT_SUPPORTED;
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *count = ToUnsignedLong(gpu.Number(field, t));
    return NVML_SUCCESS;
  });
}

// Page addresses are made up but stable: the same page count always lists
// the same addresses.
nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, int cause, unsigned int* page_count,
                                       unsigned long long* addresses) {
  GpuField field;
  switch (cause) {
    case NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS: field = GpuField::kRetiredPagesSbe; break;
    case NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR: field = GpuField::kRetiredPagesDbe; break;
    default: return NVML_ERROR_INVALID_ARGUMENT;
  }
  return OnGpu(NvmlCall::nvmlDeviceGetRetiredPages, device, [&](const nvmlDevice_st& dev, double t) -> nvmlReturn_t {
    if (!dev.gpu->Supported(field)) return NVML_ERROR_NOT_SUPPORTED;
    if (page_count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int pages = ToUnsigned(dev.gpu->Number(field, t));
    if (*page_count < pages) {
      *page_count = pages;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (pages > 0 && addresses == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int page = 0; page < pages; ++page)
      addresses[page] = 0x100000000ULL * static_cast<unsigned>(cause + 1) + 0x1000ULL * (page + 1);
    *page_count = pages;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, nvmlEnableState_t* pending) {
  return ReadFlag(NvmlCall::nvmlDeviceGetRetiredPagesPendingStatus, device, GpuField::kRetiredPagesPending, pending);
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* correctable, unsigned int* uncorrectable,
                                       unsigned int* pending, unsigned int* failure) {
  return OnGpu(NvmlCall::nvmlDeviceGetRemappedRows, device, [&](const nvmlDevice_st& dev, double t) -> nvmlReturn_t {
    const GpuSpec& gpu = *dev.gpu;
    for (GpuField field : {GpuField::kRemappedRowsCorrectable, GpuField::kRemappedRowsUncorrectable,
                           GpuField::kRemappedRowsPending, GpuField::kRemappedRowsFailure})
      if (!gpu.Supported(field)) return NVML_ERROR_NOT_SUPPORTED;
    if (correctable == nullptr || uncorrectable == nullptr || pending == nullptr || failure == nullptr)
      return NVML_ERROR_INVALID_ARGUMENT;
    *correctable = ToUnsigned(gpu.Number(GpuField::kRemappedRowsCorrectable, t));
    *uncorrectable = ToUnsigned(gpu.Number(GpuField::kRemappedRowsUncorrectable, t));
    *pending = gpu.Number(GpuField::kRemappedRowsPending, t) != 0;
    *failure = gpu.Number(GpuField::kRemappedRowsFailure, t) != 0;
    return NVML_SUCCESS;
  });
}

#if GPUDOCTOR_FAKE_NVML_VERSIONED
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfo_v2_t* info) {
  if (info != nullptr && info->version != nvmlGpuFabricInfo_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  return FillFabricInfo(NvmlCall::nvmlDeviceGetGpuFabricInfoV, device, info, info ? &info->healthMask : nullptr);
}
#endif
nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t* info) {
  return FillFabricInfo(NvmlCall::nvmlDeviceGetGpuFabricInfo, device, info, nullptr);
}

// ---------------------------------------------------------------------------
// NVLink. Links past the GPU's count answer NOT_SUPPORTED, which is how
// callers find the number of links.

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t* active) {
  if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  return OnGpu(NvmlCall::nvmlDeviceGetNvLinkState, device, [&](const nvmlDevice_st& dev, double t) -> nvmlReturn_t {
    if (!dev.gpu->Supported(GpuField::kNvLink) || link >= dev.gpu->nvlinks.size()) return NVML_ERROR_NOT_SUPPORTED;
    if (active == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *active = ToEnableState(dev.gpu->nvlinks[link].active.At(t));
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link, int counter,
                                             unsigned long long* value) {
  if (link >= NVML_NVLINK_MAX_LINKS || counter < NVML_NVLINK_ERROR_DL_REPLAY || counter > NVML_NVLINK_ERROR_DL_CRC_DATA)
    return NVML_ERROR_INVALID_ARGUMENT;
  return OnGpu(NvmlCall::nvmlDeviceGetNvLinkErrorCounter, device,
               [&](const nvmlDevice_st& dev, double t) -> nvmlReturn_t {
                 if (!dev.gpu->Supported(GpuField::kNvLink) || link >= dev.gpu->nvlinks.size())
                   return NVML_ERROR_NOT_SUPPORTED;
                 if (value == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
                 *value = ToUnsignedLong(dev.gpu->nvlinks[link].errors[static_cast<size_t>(counter)].At(t));
                 return NVML_SUCCESS;
               });
}

// ---------------------------------------------------------------------------
// Events. Only Xid critical errors are simulated.

namespace {

std::mutex g_event_sets_mutex;
std::unordered_set<nvmlEventSet_t> g_event_sets;  // guarded by g_event_sets_mutex

bool IsLiveEventSet(nvmlEventSet_t set) {
  std::lock_guard lock(g_event_sets_mutex);
  return g_event_sets.count(set) != 0;
}

// Scenario time moves only with the wall clock, so between events the wait
// sleeps; it wakes at least this often to see sets registered meanwhile.
constexpr std::chrono::milliseconds kLongestSleep{50};

nvmlReturn_t WaitForEvent(NvmlCall call, nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeout_ms) {
  return OnSystem(call, [&](const LoadedScenario& loaded, double) -> nvmlReturn_t {
    if (data == nullptr || !IsLiveEventSet(set) || set->loaded != &loaded) return NVML_ERROR_INVALID_ARGUMENT;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      auto clock = gpudoctor::fake_nvml::CurrentClock();
      auto wall_now = std::chrono::system_clock::now();
      double now = clock.SecondsAt(wall_now);
      std::optional<double> next;
      {
        std::lock_guard lock(set->mutex);
        if (auto xid = set->mailbox.Take(now)) {
          *data = nvmlEventData_t{};
          data->device = const_cast<nvmlDevice_t>(&loaded.devices[xid->gpu]);
          data->eventType = nvmlEventTypeXidCriticalError;
          data->eventData = xid->xid;
          data->gpuInstanceId = kNoInstance;
          data->computeInstanceId = kNoInstance;
          return NVML_SUCCESS;
        }
        next = set->mailbox.NextTime(now);
      }
      auto remaining = deadline - std::chrono::steady_clock::now();
      if (remaining <= std::chrono::steady_clock::duration::zero()) return NVML_ERROR_TIMEOUT;
      std::chrono::steady_clock::duration sleep =
          std::min<std::chrono::steady_clock::duration>(remaining, kLongestSleep);
      if (next)
        if (auto until = clock.RealSecondsUntil(*next, wall_now))
          sleep = std::min(sleep, std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::duration<double>(*until)) +
                                      std::chrono::milliseconds(1));
      std::this_thread::sleep_for(sleep);
    }
  });
}

}  // namespace

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  return OnSystem(NvmlCall::nvmlEventSetCreate, [&](const LoadedScenario& loaded, double) -> nvmlReturn_t {
    if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    auto* created = new nvmlEventSet_st(loaded);
    std::lock_guard lock(g_event_sets_mutex);
    g_event_sets.insert(created);
    *set = created;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long event_types, nvmlEventSet_t set) {
  return OnGpu(NvmlCall::nvmlDeviceRegisterEvents, device, [&](const nvmlDevice_st& dev, double t) -> nvmlReturn_t {
    if (!IsLiveEventSet(set) || set->loaded != gpudoctor::fake_nvml::ActiveScenario())
      return NVML_ERROR_INVALID_ARGUMENT;
    if ((event_types & nvmlEventTypeXidCriticalError) == 0) return NVML_ERROR_NOT_SUPPORTED;
    std::lock_guard lock(set->mutex);
    set->mailbox.Register(dev.gpu->index, t);
    return NVML_SUCCESS;
  });
}

#if GPUDOCTOR_FAKE_NVML_VERSIONED
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeout_ms) {
  return WaitForEvent(NvmlCall::nvmlEventSetWait_v2, set, data, timeout_ms);
}
#endif
nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeout_ms) {
  return WaitForEvent(NvmlCall::nvmlEventSetWait, set, data, timeout_ms);
}

// Frees the set even after nvmlShutdown, so a caller never leaks it.
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  {
    std::lock_guard lock(g_event_sets_mutex);
    if (g_event_sets.erase(set) == 0) return NVML_ERROR_INVALID_ARGUMENT;
  }
  delete set;
  return NVML_SUCCESS;
}

// ---------------------------------------------------------------------------
// GPU Performance Monitoring. A GPU has it when its scenario says
// gpm_supported; a metric listed in not_supported answers NOT_SUPPORTED in its
// own slot, as a metric a GPU (or a MIG instance) lacks does. Each metric is
// the scenario's value at the later sample's time, in NVML's units.

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t* support) {
  return OnGpu(NvmlCall::nvmlGpmQueryDeviceSupport, device, [&](const nvmlDevice_st& dev, double t) -> nvmlReturn_t {
    if (support == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (support->version != NVML_GPM_SUPPORT_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    support->isSupportedDevice = dev.gpu->Number(GpuField::kGpmSupported, t) != 0 ? 1 : 0;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* sample) {
  return OnSystem(NvmlCall::nvmlGpmSampleAlloc, [&](const LoadedScenario&, double) -> nvmlReturn_t {
    if (sample == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *sample = new nvmlGpmSample_st;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
  if (sample == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  delete sample;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample) {
  return OnGpu(NvmlCall::nvmlGpmSampleGet, device, [&](const nvmlDevice_st& dev, double t) -> nvmlReturn_t {
    if (dev.gpu->Number(GpuField::kGpmSupported, t) == 0) return NVML_ERROR_NOT_SUPPORTED;
    if (sample == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    sample->taken = true;
    sample->gpu = dev.gpu->index;
    sample->t = t;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* request) {
  return OnSystem(NvmlCall::nvmlGpmMetricsGet, [&](const LoadedScenario& loaded, double) -> nvmlReturn_t {
    if (request == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (request->version != NVML_GPM_METRICS_GET_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    const nvmlGpmSample_st* first = request->sample1;
    const nvmlGpmSample_st* second = request->sample2;
    if (request->numMetrics > kNvmlGpmMetricSlots || first == nullptr || second == nullptr || !first->taken ||
        !second->taken || first->gpu != second->gpu || first->gpu >= loaded.scenario.gpus.size())
      return NVML_ERROR_INVALID_ARGUMENT;
    const GpuSpec& gpu = loaded.scenario.gpus[first->gpu];
    if (gpu.LostAt(second->t)) return NVML_ERROR_GPU_IS_LOST;
    for (unsigned int i = 0; i < request->numMetrics; ++i) {
      nvmlGpmMetric_t& metric = request->metrics[i];
      std::optional<GpuField> field;
      switch (metric.metricId) {
        case NVML_GPM_METRIC_GRAPHICS_UTIL: field = GpuField::kGpmGraphicsUtilPercent; break;
        case NVML_GPM_METRIC_SM_UTIL: field = GpuField::kGpmSmUtilPercent; break;
        case NVML_GPM_METRIC_SM_OCCUPANCY: field = GpuField::kGpmSmOccupancyPercent; break;
        case NVML_GPM_METRIC_ANY_TENSOR_UTIL: field = GpuField::kGpmTensorUtilPercent; break;
        case NVML_GPM_METRIC_FP64_UTIL: field = GpuField::kGpmFp64UtilPercent; break;
        case NVML_GPM_METRIC_FP32_UTIL: field = GpuField::kGpmFp32UtilPercent; break;
        case NVML_GPM_METRIC_FP16_UTIL: field = GpuField::kGpmFp16UtilPercent; break;
        case NVML_GPM_METRIC_DRAM_BW_UTIL: field = GpuField::kGpmDramBwUtilPercent; break;
        case NVML_GPM_METRIC_PCIE_TX_PER_SEC: field = GpuField::kGpmPcieTxMibPerSecond; break;
        case NVML_GPM_METRIC_PCIE_RX_PER_SEC: field = GpuField::kGpmPcieRxMibPerSecond; break;
        case NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: field = GpuField::kGpmNvLinkTxMibPerSecond; break;
        case NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC: field = GpuField::kGpmNvLinkRxMibPerSecond; break;
        default: break;
      }
      metric.metricInfo = {};
      if (!field || !gpu.Supported(*field)) {
        metric.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        metric.value = 0;
        continue;
      }
      metric.nvmlReturn = NVML_SUCCESS;
      metric.value = gpu.Number(*field, second->t);
    }
    return NVML_SUCCESS;
  });
}
