// Tests of the built fake NVML libraries through dlopen, the way gpudoctor
// loads NVML.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nvml/nvml_api.h"
#include "scenario.h"

namespace gpudoctor::fake_nvml {
namespace {

using ::testing::HasSubstr;

const char* const kFullLibrary = "libgpudoctor_fake_nvml.so";
const char* const kLegacyLibrary = "libgpudoctor_fake_nvml_legacy.so";

// The versioned entry points the legacy library leaves out.
const std::set<std::string> kVersionedSymbols = {"nvmlInit_v2",
                                                 "nvmlDeviceGetCount_v2",
                                                 "nvmlDeviceGetHandleByIndex_v2",
                                                 "nvmlDeviceGetPciInfo_v3",
                                                 "nvmlDeviceGetPciInfo_v2",
                                                 "nvmlSystemGetCudaDriverVersion_v2",
                                                 "nvmlDeviceGetFanSpeed_v2",
                                                 "nvmlDeviceGetComputeRunningProcesses_v3",
                                                 "nvmlDeviceGetComputeRunningProcesses_v2",
                                                 "nvmlEventSetWait_v2",
                                                 "nvmlDeviceGetCurrentClocksEventReasons",
                                                 "nvmlDeviceGetGpuFabricInfoV",
                                                 "nvmlDeviceGetMemoryInfo_v2"};

// One loaded library with every entry point resolved (null when missing).
struct Nvml {
  explicit Nvml(const char* file) {
    std::string path = std::string(GPUDOCTOR_BINARY_DIR) + "/bin/" + file;
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      ADD_FAILURE() << dlerror();
      return;
    }
#define GPUDOCTOR_RESOLVE(name, ret, params) name = reinterpret_cast<ret(*) params>(dlsym(handle, #name));
    GPUDOCTOR_NVML_FUNCTIONS(GPUDOCTOR_RESOLVE)
#undef GPUDOCTOR_RESOLVE
    nvmlErrorString = reinterpret_cast<const char* (*)(nvmlReturn_t)>(dlsym(handle, "nvmlErrorString"));
  }
  // Kept loaded: a library with threads asleep inside cannot be unloaded.
  void* handle = nullptr;
#define GPUDOCTOR_POINTER(name, ret, params) ret(*name) params = nullptr;
  GPUDOCTOR_NVML_FUNCTIONS(GPUDOCTOR_POINTER)
#undef GPUDOCTOR_POINTER
  const char* (*nvmlErrorString)(nvmlReturn_t) = nullptr;
};

Nvml& Full() {
  static Nvml* nvml = new Nvml(kFullLibrary);
  return *nvml;
}
Nvml& Legacy() {
  static Nvml* nvml = new Nvml(kLegacyLibrary);
  return *nvml;
}

class FakeNvmlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name :
         {"GPUDOCTOR_SCENARIO", "GPUDOCTOR_FAKE_NOW", "GPUDOCTOR_FAKE_EPOCH_MS", "GPUDOCTOR_FAKE_TIME_SCALE"})
      unsetenv(name);
  }
  void TearDown() override {
    while (Full().nvmlShutdown() == NVML_SUCCESS) {
    }
    while (Legacy().nvmlShutdown() == NVML_SUCCESS) {
    }
  }

  std::string WriteScenario(std::string_view text) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name =
        std::string(info->test_suite_name()) + "." + info->name() + "." + std::to_string(files_++) + ".toml";
    for (char& c : name)
      if (c == '/') c = '_';
    std::string path = ::testing::TempDir() + name;
    std::ofstream(path) << text;
    return path;
  }

  // Loads `text` as the scenario with time pinned at `now` and initialises.
  nvmlReturn_t Init(std::string_view text, const char* now = "0s", Nvml& nvml = Full()) {
    Shutdown(nvml);
    setenv("GPUDOCTOR_SCENARIO", WriteScenario(text).c_str(), 1);
    if (now != nullptr) setenv("GPUDOCTOR_FAKE_NOW", now, 1);
    return nvml.nvmlInit_v2 != nullptr ? nvml.nvmlInit_v2() : nvml.nvmlInit();
  }
  // Moves pinned time: takes effect at the next first initialisation.
  void PinTime(const char* now) {
    Shutdown(Full());
    setenv("GPUDOCTOR_FAKE_NOW", now, 1);
    ASSERT_EQ(Full().nvmlInit_v2(), NVML_SUCCESS);
  }
  void Shutdown(Nvml& nvml) {
    while (nvml.nvmlShutdown() == NVML_SUCCESS) {
    }
  }

  nvmlDevice_t Gpu(unsigned index, Nvml& nvml = Full()) {
    nvmlDevice_t device = nullptr;
    auto lookup = nvml.nvmlDeviceGetHandleByIndex_v2 != nullptr ? nvml.nvmlDeviceGetHandleByIndex_v2
                                                                : nvml.nvmlDeviceGetHandleByIndex;
    EXPECT_EQ(lookup(index, &device), NVML_SUCCESS);
    return device;
  }
  unsigned Temperature(unsigned index) {
    unsigned value = 0;
    EXPECT_EQ(Full().nvmlDeviceGetTemperature(Gpu(index), NVML_TEMPERATURE_GPU, &value), NVML_SUCCESS);
    return value;
  }

  Nvml& nvml = Full();
  int files_ = 0;
};

TEST_F(FakeNvmlTest, ExportsEveryEntryPointAndOnlyThose) {
#define GPUDOCTOR_CHECK(name, ret, params) EXPECT_NE(reinterpret_cast<void*>(Full().name), nullptr) << #name;
  GPUDOCTOR_NVML_FUNCTIONS(GPUDOCTOR_CHECK)
#undef GPUDOCTOR_CHECK
  ASSERT_NE(nvml.nvmlErrorString, nullptr);
  EXPECT_STREQ(nvml.nvmlErrorString(NVML_ERROR_GPU_IS_LOST), "GPU is lost");
  EXPECT_EQ(dlsym(nvml.handle, "_ZN9gpudoctor13ParseDurationESt17basic_string_viewIcSt11char_traitsIcEE"), nullptr);
}

TEST_F(FakeNvmlTest, LegacyLibraryLacksVersionedSymbolsButOldOnesWork) {
  Nvml& legacy = Legacy();
#define GPUDOCTOR_CHECK(name, ret, params)                    \
  if (kVersionedSymbols.count(#name))                         \
    EXPECT_EQ(dlsym(legacy.handle, #name), nullptr) << #name; \
  else                                                        \
    EXPECT_NE(reinterpret_cast<void*>(legacy.name), nullptr) << #name;
  GPUDOCTOR_NVML_FUNCTIONS(GPUDOCTOR_CHECK)
#undef GPUDOCTOR_CHECK

  ASSERT_EQ(Init(R"(
[defaults]
fan_speeds_percent = [55, 60]
processes = [{ pid = 4242, name = "python3", used_memory_mib = 2048 }]
clock_event_reasons = ["sw_power_cap"]
)",
                 "0s", legacy),
            NVML_SUCCESS);
  unsigned count = 0;
  ASSERT_EQ(legacy.nvmlDeviceGetCount(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 8u);
  nvmlDevice_t gpu = Gpu(2, legacy);
  nvmlPciInfoV1_t pci{};
  ASSERT_EQ(legacy.nvmlDeviceGetPciInfo(gpu, &pci), NVML_SUCCESS);
  EXPECT_STREQ(pci.busId, "0000:52:00.0");
  EXPECT_EQ(pci.bus, 0x52u);
  EXPECT_EQ(pci.pciDeviceId, kH100PciDeviceId);
  unsigned fan = 0;
  ASSERT_EQ(legacy.nvmlDeviceGetFanSpeed(gpu, &fan), NVML_SUCCESS);
  EXPECT_EQ(fan, 55u);  // fan 0
  unsigned long long reasons = 0;
  ASSERT_EQ(legacy.nvmlDeviceGetCurrentClocksThrottleReasons(gpu, &reasons), NVML_SUCCESS);
  EXPECT_EQ(reasons, 0x4u);
  int cuda = 0;
  ASSERT_EQ(legacy.nvmlSystemGetCudaDriverVersion(&cuda), NVML_SUCCESS);
  EXPECT_EQ(cuda, 12040);
  nvmlProcessInfoV1_t processes[4];
  unsigned process_count = 4;
  ASSERT_EQ(legacy.nvmlDeviceGetComputeRunningProcesses(gpu, &process_count, processes), NVML_SUCCESS);
  ASSERT_EQ(process_count, 1u);
  EXPECT_EQ(processes[0].pid, 4242u);
  EXPECT_EQ(processes[0].usedGpuMemory, 2048ULL << 20);
}

TEST_F(FakeNvmlTest, CallsBeforeInitAnswerUninitialized) {
  unsigned count = 0;
  EXPECT_EQ(nvml.nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
  nvmlDevice_t device = nullptr;
  EXPECT_EQ(nvml.nvmlDeviceGetHandleByIndex_v2(0, &device), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(nvml.nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
}

TEST_F(FakeNvmlTest, DefaultsDescribeAHealthyIdleH100Server) {
  ASSERT_EQ(Init(""), NVML_SUCCESS);
  char text[96];
  ASSERT_EQ(nvml.nvmlSystemGetDriverVersion(text, sizeof text), NVML_SUCCESS);
  EXPECT_STREQ(text, "550.54.15");
  ASSERT_EQ(nvml.nvmlSystemGetNVMLVersion(text, sizeof text), NVML_SUCCESS);
  EXPECT_STREQ(text, "12.550.54.15");
  EXPECT_EQ(nvml.nvmlSystemGetDriverVersion(text, 4), NVML_ERROR_INSUFFICIENT_SIZE);
  int cuda = 0;
  ASSERT_EQ(nvml.nvmlSystemGetCudaDriverVersion_v2(&cuda), NVML_SUCCESS);
  EXPECT_EQ(cuda, 12040);
  unsigned count = 0;
  ASSERT_EQ(nvml.nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  ASSERT_EQ(count, 8u);
  nvmlDevice_t beyond = nullptr;
  EXPECT_EQ(nvml.nvmlDeviceGetHandleByIndex_v2(8, &beyond), NVML_ERROR_INVALID_ARGUMENT);

  std::set<std::string> uuids, serials, buses;
  for (unsigned index = 0; index < count; ++index) {
    nvmlDevice_t gpu = Gpu(index);
    ASSERT_EQ(nvml.nvmlDeviceGetName(gpu, text, sizeof text), NVML_SUCCESS);
    EXPECT_STREQ(text, "NVIDIA H100 80GB HBM3");
    ASSERT_EQ(nvml.nvmlDeviceGetUUID(gpu, text, sizeof text), NVML_SUCCESS);
    uuids.insert(text);
    ASSERT_EQ(nvml.nvmlDeviceGetSerial(gpu, text, sizeof text), NVML_SUCCESS);
    serials.insert(text);
    nvmlPciInfo_t pci{};
    ASSERT_EQ(nvml.nvmlDeviceGetPciInfo_v3(gpu, &pci), NVML_SUCCESS);
    buses.insert(pci.busId);
  }
  EXPECT_EQ(uuids.size(), 8u);
  EXPECT_EQ(serials.size(), 8u);
  EXPECT_EQ(buses.size(), 8u);

  nvmlDevice_t gpu = Gpu(0);
  nvmlPciInfo_t pci{};
  ASSERT_EQ(nvml.nvmlDeviceGetPciInfo_v3(gpu, &pci), NVML_SUCCESS);
  EXPECT_STREQ(pci.busId, "00000000:1B:00.0");
  EXPECT_STREQ(pci.busIdLegacy, "0000:1B:00.0");
  EXPECT_EQ(pci.domain, 0u);
  EXPECT_EQ(pci.bus, 0x1bu);
  ASSERT_EQ(nvml.nvmlDeviceGetBoardPartNumber(gpu, text, sizeof text), NVML_SUCCESS);
  EXPECT_STREQ(text, "692-2G520-0200-000");
  ASSERT_EQ(nvml.nvmlDeviceGetVbiosVersion(gpu, text, sizeof text), NVML_SUCCESS);
  nvmlEnableState_t state = NVML_FEATURE_DISABLED, pending = NVML_FEATURE_DISABLED;
  ASSERT_EQ(nvml.nvmlDeviceGetPersistenceMode(gpu, &state), NVML_SUCCESS);
  EXPECT_EQ(state, NVML_FEATURE_ENABLED);

  unsigned value = 0;
  ASSERT_EQ(nvml.nvmlDeviceGetCurrPcieLinkGeneration(gpu, &value), NVML_SUCCESS);
  EXPECT_EQ(value, 5u);
  ASSERT_EQ(nvml.nvmlDeviceGetMaxPcieLinkWidth(gpu, &value), NVML_SUCCESS);
  EXPECT_EQ(value, 16u);
  ASSERT_EQ(nvml.nvmlDeviceGetPcieReplayCounter(gpu, &value), NVML_SUCCESS);
  EXPECT_EQ(value, 0u);
  EXPECT_EQ(Temperature(0), 34u);
  EXPECT_EQ(nvml.nvmlDeviceGetTemperature(gpu, 1, &value), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(nvml.nvmlDeviceGetTemperatureThreshold(gpu, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &value), NVML_SUCCESS);
  EXPECT_EQ(value, 89u);
  ASSERT_EQ(nvml.nvmlDeviceGetTemperatureThreshold(gpu, NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, &value), NVML_SUCCESS);
  EXPECT_EQ(value, 92u);
  ASSERT_EQ(nvml.nvmlDeviceGetTemperatureThreshold(gpu, NVML_TEMPERATURE_THRESHOLD_GPU_MAX, &value), NVML_SUCCESS);
  EXPECT_EQ(value, 87u);
  nvmlFieldValue_t field{};
  field.fieldId = NVML_FI_DEV_MEMORY_TEMP;
  ASSERT_EQ(nvml.nvmlDeviceGetFieldValues(gpu, 1, &field), NVML_SUCCESS);
  EXPECT_EQ(field.nvmlReturn, NVML_SUCCESS);
  EXPECT_EQ(field.value.uiVal, 42u);
  // No GPU fans on an SXM board.
  ASSERT_EQ(nvml.nvmlDeviceGetNumFans(gpu, &value), NVML_SUCCESS);
  EXPECT_EQ(value, 0u);
  EXPECT_EQ(nvml.nvmlDeviceGetFanSpeed_v2(gpu, 0, &value), NVML_ERROR_NOT_SUPPORTED);
  ASSERT_EQ(nvml.nvmlDeviceGetPowerUsage(gpu, &value), NVML_SUCCESS);
  EXPECT_EQ(value, 72000u);
  ASSERT_EQ(nvml.nvmlDeviceGetEnforcedPowerLimit(gpu, &value), NVML_SUCCESS);
  EXPECT_EQ(value, 700000u);
  ASSERT_EQ(nvml.nvmlDeviceGetPowerManagementDefaultLimit(gpu, &value), NVML_SUCCESS);
  EXPECT_EQ(value, 700000u);
  ASSERT_EQ(nvml.nvmlDeviceGetClockInfo(gpu, NVML_CLOCK_SM, &value), NVML_SUCCESS);
  EXPECT_EQ(value, 345u);
  ASSERT_EQ(nvml.nvmlDeviceGetClockInfo(gpu, NVML_CLOCK_MEM, &value), NVML_SUCCESS);
  EXPECT_EQ(value, 2619u);
  unsigned long long reasons = 0;
  ASSERT_EQ(nvml.nvmlDeviceGetCurrentClocksEventReasons(gpu, &reasons), NVML_SUCCESS);
  EXPECT_EQ(reasons, 0x1u);  // gpu_idle
  nvmlUtilization_t utilization{1, 1};
  ASSERT_EQ(nvml.nvmlDeviceGetUtilizationRates(gpu, &utilization), NVML_SUCCESS);
  EXPECT_EQ(utilization.gpu, 0u);
  nvmlMemory_t memory{};
  ASSERT_EQ(nvml.nvmlDeviceGetMemoryInfo(gpu, &memory), NVML_SUCCESS);
  EXPECT_EQ(memory.total, 81559ULL << 20);
  EXPECT_EQ(memory.used, 0u);
  EXPECT_EQ(memory.free, memory.total);
  unsigned processes = 0;
  EXPECT_EQ(nvml.nvmlDeviceGetComputeRunningProcesses_v3(gpu, &processes, nullptr), NVML_SUCCESS);
  EXPECT_EQ(processes, 0u);

  ASSERT_EQ(nvml.nvmlDeviceGetEccMode(gpu, &state, &pending), NVML_SUCCESS);
  EXPECT_EQ(state, NVML_FEATURE_ENABLED);
  unsigned long long errors = 99;
  ASSERT_EQ(nvml.nvmlDeviceGetTotalEccErrors(gpu, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &errors),
            NVML_SUCCESS);
  EXPECT_EQ(errors, 0u);
  unsigned pages = 0;
  EXPECT_EQ(nvml.nvmlDeviceGetRetiredPages(gpu, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, &pages, nullptr),
            NVML_ERROR_NOT_SUPPORTED);
  unsigned correctable = 9, uncorrectable = 9, remap_pending = 9, failure = 9;
  ASSERT_EQ(nvml.nvmlDeviceGetRemappedRows(gpu, &correctable, &uncorrectable, &remap_pending, &failure), NVML_SUCCESS);
  EXPECT_EQ(correctable + uncorrectable + remap_pending + failure, 0u);
  for (unsigned link = 0; link < 18; ++link) {
    ASSERT_EQ(nvml.nvmlDeviceGetNvLinkState(gpu, link, &state), NVML_SUCCESS);
    EXPECT_EQ(state, NVML_FEATURE_ENABLED);
  }
  EXPECT_EQ(nvml.nvmlDeviceGetNvLinkState(gpu, 18, &state), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(nvml.nvmlDeviceGetNvLinkErrorCounter(gpu, 4, NVML_NVLINK_ERROR_DL_CRC_FLIT, &errors), NVML_SUCCESS);
  EXPECT_EQ(errors, 0u);
}

TEST_F(FakeNvmlTest, DefaultPowerLimitIsSetNotSupportedOrFails) {
  ASSERT_EQ(Init(R"(
gpu_count = 3
[defaults]
power_limit_w = 300
power_default_limit_w = 350
[gpu.1]
not_supported = ["power_default_limit_w"]
[[call_error]]
call = "nvmlDeviceGetPowerManagementDefaultLimit"
gpu = 2
error = "unknown"
)"),
            NVML_SUCCESS);
  unsigned milliwatts = 0;
  ASSERT_EQ(nvml.nvmlDeviceGetPowerManagementDefaultLimit(Gpu(0), &milliwatts), NVML_SUCCESS);
  EXPECT_EQ(milliwatts, 350000u);
  ASSERT_EQ(nvml.nvmlDeviceGetEnforcedPowerLimit(Gpu(0), &milliwatts), NVML_SUCCESS);
  EXPECT_EQ(milliwatts, 300000u);  // the two limits are separate readings
  EXPECT_EQ(nvml.nvmlDeviceGetPowerManagementDefaultLimit(Gpu(1), &milliwatts), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(nvml.nvmlDeviceGetPowerManagementDefaultLimit(Gpu(2), &milliwatts), NVML_ERROR_UNKNOWN);
  EXPECT_EQ(nvml.nvmlDeviceGetPowerManagementDefaultLimit(Gpu(0), nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(FakeNvmlTest, OverridesAndNotSupported) {
  ASSERT_EQ(Init(R"(
driver_version = "535.129.03"
cuda_driver_version = 12020
gpu_count = 3
[defaults]
name = "NVIDIA A100-SXM4-80GB"
temperature_c = 55
power_draw_w = 312.4
not_supported = ["memory_temperature_c", "fan_speeds_percent"]
[gpu.1]
temperature_c = 77
uuid = "GPU-11111111-2222-3333-4444-555555555555"
ecc_enabled = false
nvlink_count = 12
not_supported = ["power_draw_w", "processes", "nvlink"]
)"),
            NVML_SUCCESS);
  char text[96];
  ASSERT_EQ(nvml.nvmlSystemGetDriverVersion(text, sizeof text), NVML_SUCCESS);
  EXPECT_STREQ(text, "535.129.03");
  unsigned count = 0;
  ASSERT_EQ(nvml.nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 3u);
  EXPECT_EQ(Temperature(0), 55u);
  EXPECT_EQ(Temperature(1), 77u);
  ASSERT_EQ(nvml.nvmlDeviceGetName(Gpu(1), text, sizeof text), NVML_SUCCESS);
  EXPECT_STREQ(text, "NVIDIA A100-SXM4-80GB");
  ASSERT_EQ(nvml.nvmlDeviceGetUUID(Gpu(1), text, sizeof text), NVML_SUCCESS);
  EXPECT_STREQ(text, "GPU-11111111-2222-3333-4444-555555555555");

  unsigned value = 0;
  ASSERT_EQ(nvml.nvmlDeviceGetPowerUsage(Gpu(0), &value), NVML_SUCCESS);
  EXPECT_EQ(value, 312400u);
  // GPU 1 replaces the defaults' list: memory temperature is back.
  EXPECT_EQ(nvml.nvmlDeviceGetPowerUsage(Gpu(1), &value), NVML_ERROR_NOT_SUPPORTED);
  nvmlFieldValue_t fields[2]{};
  fields[0].fieldId = NVML_FI_DEV_MEMORY_TEMP;
  fields[1].fieldId = 12345;
  ASSERT_EQ(nvml.nvmlDeviceGetFieldValues(Gpu(0), 2, fields), NVML_SUCCESS);
  EXPECT_EQ(fields[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(fields[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
  ASSERT_EQ(nvml.nvmlDeviceGetFieldValues(Gpu(1), 1, fields), NVML_SUCCESS);
  EXPECT_EQ(fields[0].nvmlReturn, NVML_SUCCESS);
  EXPECT_EQ(nvml.nvmlDeviceGetNumFans(Gpu(0), &value), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(nvml.nvmlDeviceGetFanSpeed_v2(Gpu(0), 0, &value), NVML_ERROR_NOT_SUPPORTED);
  unsigned processes = 0;
  EXPECT_EQ(nvml.nvmlDeviceGetComputeRunningProcesses_v3(Gpu(1), &processes, nullptr), NVML_ERROR_NOT_SUPPORTED);
  nvmlEnableState_t state;
  EXPECT_EQ(nvml.nvmlDeviceGetNvLinkState(Gpu(1), 0, &state), NVML_ERROR_NOT_SUPPORTED);
  // ECC off: its counters are not available.
  nvmlEnableState_t current, pending;
  ASSERT_EQ(nvml.nvmlDeviceGetEccMode(Gpu(1), &current, &pending), NVML_SUCCESS);
  EXPECT_EQ(current, NVML_FEATURE_DISABLED);
  unsigned long long errors = 0;
  EXPECT_EQ(nvml.nvmlDeviceGetTotalEccErrors(Gpu(1), NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &errors),
            NVML_ERROR_NOT_SUPPORTED);
  // Links past GPU 2's twelve... GPU 2 keeps the default 18.
  EXPECT_EQ(nvml.nvmlDeviceGetNvLinkState(Gpu(2), 17, &state), NVML_SUCCESS);
}

TEST_F(FakeNvmlTest, TimelineValuesArePureFunctionsOfPinnedTime) {
  std::string scenario = R"(
gpu_count = 2
[defaults]
fan_speeds_percent = [40]
processes = [{ pid = 31337, name = "train.py", used_memory_mib = 10000 }]
[[timeline]]
at = "1m"
gpu = 1
field = "temperature_c"
to = 94
over = "10m"
[[timeline]]
at = "6m"
gpu = 1
field = "clock_event_reasons"
set = ["hw_thermal_slowdown"]
[[timeline]]
at = "0s"
gpu = 0
field = "pcie_replay_count"
rate = 12
per = "1m"
[[timeline]]
at = "2m"
gpu = 0
field = "ecc_volatile_uncorrected"
set = 2
[[timeline]]
at = "0s"
gpu = 0
field = "processes.used_memory_mib"
pid = 31337
to = 70000
over = "1h"
[[timeline]]
at = "3m"
gpu = 1
field = "fan_speeds_percent"
set = 0
)";
  ASSERT_EQ(Init(scenario, "0s"), NVML_SUCCESS);
  EXPECT_EQ(Temperature(1), 34u);
  PinTime("6m");
  EXPECT_EQ(Temperature(1), 64u);
  PinTime("30m");
  EXPECT_EQ(Temperature(1), 94u);
  EXPECT_EQ(Temperature(0), 34u);
  unsigned long long reasons = 0;
  ASSERT_EQ(nvml.nvmlDeviceGetCurrentClocksEventReasons(Gpu(1), &reasons), NVML_SUCCESS);
  EXPECT_EQ(reasons, 0x40u);
  unsigned replays = 0;
  ASSERT_EQ(nvml.nvmlDeviceGetPcieReplayCounter(Gpu(0), &replays), NVML_SUCCESS);
  EXPECT_EQ(replays, 360u);
  unsigned long long errors = 0;
  ASSERT_EQ(nvml.nvmlDeviceGetTotalEccErrors(Gpu(0), NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &errors),
            NVML_SUCCESS);
  EXPECT_EQ(errors, 2u);
  unsigned fan = 99;
  ASSERT_EQ(nvml.nvmlDeviceGetFanSpeed_v2(Gpu(1), 0, &fan), NVML_SUCCESS);
  EXPECT_EQ(fan, 0u);
  ASSERT_EQ(nvml.nvmlDeviceGetFanSpeed_v2(Gpu(0), 0, &fan), NVML_SUCCESS);
  EXPECT_EQ(fan, 40u);
  EXPECT_EQ(nvml.nvmlDeviceGetFanSpeed_v2(Gpu(0), 1, &fan), NVML_ERROR_INVALID_ARGUMENT);

  // Process memory half-way through its ramp, and the GPU's used memory with it.
  nvmlProcessInfo_t info[2];
  unsigned count = 2;
  ASSERT_EQ(nvml.nvmlDeviceGetComputeRunningProcesses_v3(Gpu(0), &count, info), NVML_SUCCESS);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(info[0].usedGpuMemory, 40000ULL << 20);
  EXPECT_EQ(info[0].gpuInstanceId, 0xFFFFFFFFu);
  nvmlMemory_t memory{};
  ASSERT_EQ(nvml.nvmlDeviceGetMemoryInfo(Gpu(0), &memory), NVML_SUCCESS);
  EXPECT_EQ(memory.used, 40000ULL << 20);
  EXPECT_EQ(memory.free, (81559ULL - 40000) << 20);
  char name[5];
  ASSERT_EQ(nvml.nvmlSystemGetProcessName(31337, name, sizeof name), NVML_SUCCESS);
  EXPECT_STREQ(name, "trai");  // truncated to fit
  EXPECT_EQ(nvml.nvmlSystemGetProcessName(1, name, sizeof name), NVML_ERROR_NOT_FOUND);
}

TEST_F(FakeNvmlTest, ProcessListsFollowNvmlBufferRules) {
  ASSERT_EQ(Init(R"(
gpu_count = 1
[defaults]
processes = [
  { pid = 10, name = "a", used_memory_mib = 1 },
  { pid = 11, name = "b", used_memory_mib = 2 },
  { pid = 12, name = "c", used_memory_mib = 3, start = "1h" },
]
)"),
            NVML_SUCCESS);
  unsigned count = 0;
  EXPECT_EQ(nvml.nvmlDeviceGetComputeRunningProcesses_v3(Gpu(0), &count, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 2u);  // the one starting in an hour is not running yet
  nvmlProcessInfo_t info[1];
  count = 1;
  EXPECT_EQ(nvml.nvmlDeviceGetComputeRunningProcesses_v2(Gpu(0), &count, info), NVML_ERROR_INSUFFICIENT_SIZE);
  nvmlProcessInfo_t enough[2];
  count = 2;
  ASSERT_EQ(nvml.nvmlDeviceGetComputeRunningProcesses_v2(Gpu(0), &count, enough), NVML_SUCCESS);
  EXPECT_EQ(enough[1].pid, 11u);
  nvmlMemory_t memory{};
  ASSERT_EQ(nvml.nvmlDeviceGetMemoryInfo(Gpu(0), &memory), NVML_SUCCESS);
  EXPECT_EQ(memory.used, 3ULL << 20);
}

TEST_F(FakeNvmlTest, LostGpuFailsEveryCallButKeepsItsHandle) {
  std::string scenario = R"(
[[gpu_lost]]
gpu = 3
at = "2m"
)";
  ASSERT_EQ(Init(scenario, "1m"), NVML_SUCCESS);
  EXPECT_EQ(Temperature(3), 34u);
  ASSERT_EQ(Init(scenario, "2m"), NVML_SUCCESS);
  nvmlDevice_t lost = Gpu(3);
  ASSERT_NE(lost, nullptr);
  unsigned value = 0;
  EXPECT_EQ(nvml.nvmlDeviceGetTemperature(lost, NVML_TEMPERATURE_GPU, &value), NVML_ERROR_GPU_IS_LOST);
  char text[96];
  EXPECT_EQ(nvml.nvmlDeviceGetUUID(lost, text, sizeof text), NVML_ERROR_GPU_IS_LOST);
  nvmlPciInfo_t pci;
  EXPECT_EQ(nvml.nvmlDeviceGetPciInfo_v3(lost, &pci), NVML_ERROR_GPU_IS_LOST);
  nvmlMemory_t memory;
  EXPECT_EQ(nvml.nvmlDeviceGetMemoryInfo(lost, &memory), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(Temperature(2), 34u);
  unsigned count = 0;
  ASSERT_EQ(nvml.nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 8u);
}

TEST_F(FakeNvmlTest, InitFailuresAndCallErrors) {
  EXPECT_EQ(Init("[[init_failure]]\nerror = \"lib_rm_version_mismatch\"\n"), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
  unsigned count = 0;
  EXPECT_EQ(nvml.nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(Init("[[init_failure]]\nerror = \"NVML_ERROR_DRIVER_NOT_LOADED\"\n"), NVML_ERROR_DRIVER_NOT_LOADED);

  // A driver reload: init fails only inside the window.
  std::string reload = "[[init_failure]]\nerror = \"driver_not_loaded\"\nfrom = \"5m\"\nuntil = \"6m\"\n";
  EXPECT_EQ(Init(reload, "4m"), NVML_SUCCESS);
  EXPECT_EQ(Init(reload, "330s"), NVML_ERROR_DRIVER_NOT_LOADED);
  EXPECT_EQ(Init(reload, "6m"), NVML_SUCCESS);

  std::string errors = R"(
[[call_error]]
call = "nvmlDeviceGetPowerUsage"
gpu = 2
error = "unknown"
[[call_error]]
call = "nvmlDeviceGetCount"
error = 14
from = "1h"
)";
  ASSERT_EQ(Init(errors, "0s"), NVML_SUCCESS);
  unsigned power = 0;
  EXPECT_EQ(nvml.nvmlDeviceGetPowerUsage(Gpu(2), &power), NVML_ERROR_UNKNOWN);
  EXPECT_EQ(nvml.nvmlDeviceGetPowerUsage(Gpu(1), &power), NVML_SUCCESS);
  EXPECT_EQ(nvml.nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  ASSERT_EQ(Init(errors, "2h"), NVML_SUCCESS);
  EXPECT_EQ(nvml.nvmlDeviceGetCount_v2(&count), NVML_ERROR_CORRUPTED_INFOROM);
  EXPECT_EQ(nvml.nvmlDeviceGetCount(&count), NVML_ERROR_CORRUPTED_INFOROM);

  ASSERT_EQ(Init("[[call_error]]\ncall = \"nvmlInit_v2\"\nerror = \"no_permission\"\n"), NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(nvml.nvmlInit(), NVML_SUCCESS);  // only the _v2 symbol was named
}

TEST_F(FakeNvmlTest, InitIsReferenceCounted) {
  ASSERT_EQ(Init(""), NVML_SUCCESS);
  ASSERT_EQ(nvml.nvmlInit_v2(), NVML_SUCCESS);
  EXPECT_EQ(nvml.nvmlShutdown(), NVML_SUCCESS);
  unsigned count = 0;
  EXPECT_EQ(nvml.nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  EXPECT_EQ(nvml.nvmlShutdown(), NVML_SUCCESS);
  EXPECT_EQ(nvml.nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
}

TEST_F(FakeNvmlTest, FiniteHangBlocksOnlyTheNamedCallOnTheNamedGpu) {
  ASSERT_EQ(Init(R"(
[[hang]]
call = "nvmlDeviceGetTemperature"
gpu = 5
duration = "500ms"
)"),
            NVML_SUCCESS);
  auto timed = [&](unsigned index) {
    auto start = std::chrono::steady_clock::now();
    Temperature(index);
    return std::chrono::steady_clock::now() - start;
  };
  EXPECT_LT(timed(4), std::chrono::milliseconds(200));
  EXPECT_GE(timed(5), std::chrono::milliseconds(500));
  unsigned power = 0;
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(nvml.nvmlDeviceGetPowerUsage(Gpu(5), &power), NVML_SUCCESS);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
}

TEST_F(FakeNvmlTest, XidEventsArriveThroughTheEventApi) {
  ASSERT_EQ(Init(R"(
xid_lookback = "10m"
[[xid]]
gpu = 3
at = "2m"
xid = 79
[[xid]]
gpu = 1
at = "3m"
xid = 48
[[xid]]
gpu = 3
at = "20m"
xid = 31
)",
                 "5m"),
            NVML_SUCCESS);
  nvmlEventSet_t set = nullptr;
  ASSERT_EQ(nvml.nvmlEventSetCreate(&set), NVML_SUCCESS);
  EXPECT_EQ(nvml.nvmlDeviceRegisterEvents(Gpu(3), 0x1, set), NVML_ERROR_NOT_SUPPORTED);
  ASSERT_EQ(nvml.nvmlDeviceRegisterEvents(Gpu(3), nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
  nvmlEventData_t data{};
  ASSERT_EQ(nvml.nvmlEventSetWait_v2(set, &data, 0), NVML_SUCCESS);
  EXPECT_EQ(data.device, Gpu(3));
  EXPECT_EQ(data.eventType, nvmlEventTypeXidCriticalError);
  EXPECT_EQ(data.eventData, 79u);
  // Delivered once; GPU 1 is not registered; the 20m event is in the future.
  EXPECT_EQ(nvml.nvmlEventSetWait_v2(set, &data, 50), NVML_ERROR_TIMEOUT);
  ASSERT_EQ(nvml.nvmlDeviceRegisterEvents(Gpu(1), nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
  ASSERT_EQ(nvml.nvmlEventSetWait(set, &data, 0), NVML_SUCCESS);
  EXPECT_EQ(data.eventData, 48u);
  EXPECT_EQ(nvml.nvmlEventSetFree(set), NVML_SUCCESS);
  EXPECT_EQ(nvml.nvmlEventSetFree(set), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(FakeNvmlTest, XidEventsArriveAsScenarioTimePasses) {
  // 1000x: the event at scenario second 30 comes 30 ms after the epoch.
  auto now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  setenv("GPUDOCTOR_FAKE_EPOCH_MS", std::to_string(now_ms).c_str(), 1);
  setenv("GPUDOCTOR_FAKE_TIME_SCALE", "1000", 1);
  ASSERT_EQ(Init("[[xid]]\ngpu = 0\nat = \"30s\"\nxid = 94\n", nullptr), NVML_SUCCESS);
  nvmlEventSet_t set = nullptr;
  ASSERT_EQ(nvml.nvmlEventSetCreate(&set), NVML_SUCCESS);
  ASSERT_EQ(nvml.nvmlDeviceRegisterEvents(Gpu(0), nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
  nvmlEventData_t data{};
  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(nvml.nvmlEventSetWait_v2(set, &data, 10000), NVML_SUCCESS);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(data.eventData, 94u);
  EXPECT_EQ(nvml.nvmlEventSetFree(set), NVML_SUCCESS);
}

TEST_F(FakeNvmlTest, ScenarioProblemsFailInitWithOneClearLine) {
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(nvml.nvmlInit_v2(), NVML_ERROR_UNKNOWN);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("GPUDOCTOR_SCENARIO is not set"));

  setenv("GPUDOCTOR_SCENARIO", "/nonexistent/scenario.toml", 1);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(nvml.nvmlInit_v2(), NVML_ERROR_UNKNOWN);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("cannot read scenario /nonexistent/scenario.toml"));

  std::string bad = WriteScenario("gpu_count = 2\n\n[defaults]\ntemprature_c = 80\n");
  setenv("GPUDOCTOR_SCENARIO", bad.c_str(), 1);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(nvml.nvmlInit_v2(), NVML_ERROR_UNKNOWN);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "scenario " + bad + ": 4: unknown key \"temprature_c\" in [defaults]\n");

  std::string broken = WriteScenario("gpu_count = 2\nname = \"unterminated\n");
  setenv("GPUDOCTOR_SCENARIO", broken.c_str(), 1);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(nvml.nvmlInit_v2(), NVML_ERROR_UNKNOWN);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("scenario " + broken + ": 2: "));

  setenv("GPUDOCTOR_SCENARIO", WriteScenario("").c_str(), 1);
  setenv("GPUDOCTOR_FAKE_NOW", "later", 1);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(nvml.nvmlInit_v2(), NVML_ERROR_UNKNOWN);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("GPUDOCTOR_FAKE_NOW=\"later\""));
}

TEST_F(FakeNvmlTest, ConcurrentCallsFromOneThreadPerGpu) {
  ASSERT_EQ(Init(R"(
[[timeline]]
at = 0
field = "temperature_c"
to = 90
over = "1h"
)",
                 nullptr),
            NVML_SUCCESS);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (unsigned index = 0; index < 8; ++index) {
    threads.emplace_back([&, index] {
      nvmlDevice_t gpu = nullptr;
      if (nvml.nvmlDeviceGetHandleByIndex_v2(index, &gpu) != NVML_SUCCESS) ++failures;
      for (int i = 0; i < 2000; ++i) {
        unsigned value = 0;
        nvmlMemory_t memory;
        if (nvml.nvmlDeviceGetTemperature(gpu, NVML_TEMPERATURE_GPU, &value) != NVML_SUCCESS) ++failures;
        if (nvml.nvmlDeviceGetMemoryInfo(gpu, &memory) != NVML_SUCCESS) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(FakeNvmlTest, ForeverHangReallyBlocks) {
  ASSERT_EQ(Init(R"(
[[hang]]
call = "nvmlDeviceGetTemperature"
gpu = 5
)"),
            NVML_SUCCESS);
  nvmlDevice_t gpu = Gpu(5);
  std::atomic<bool> returned{false};
  // Left blocked for the rest of the process, as a wedged driver call would be.
  std::thread([&nvml = nvml, gpu, &returned] {
    unsigned value = 0;
    nvml.nvmlDeviceGetTemperature(gpu, NVML_TEMPERATURE_GPU, &value);
    returned = true;
  }).detach();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(returned.load());
  unsigned power = 0;
  EXPECT_EQ(nvml.nvmlDeviceGetPowerUsage(gpu, &power), NVML_SUCCESS);
  EXPECT_EQ(Temperature(4), 34u);
}

// Loads one of examples/ with time pinned at `now`.
nvmlReturn_t InitExample(const char* file, const char* now) {
  while (Full().nvmlShutdown() == NVML_SUCCESS) {
  }
  setenv("GPUDOCTOR_SCENARIO", (std::string(GPUDOCTOR_SOURCE_DIR) + "/examples/" + file).c_str(), 1);
  setenv("GPUDOCTOR_FAKE_NOW", now, 1);
  return Full().nvmlInit_v2();
}

TEST_F(FakeNvmlTest, FabricRegistrationOfAnHgxBoard) {
  ASSERT_EQ(InitExample("hgx-fabric-fault.toml", "30s"), NVML_SUCCESS);
  nvmlGpuFabricInfo_v2_t info{};
  info.version = nvmlGpuFabricInfo_v2;
  ASSERT_EQ(nvml.nvmlDeviceGetGpuFabricInfoV(Gpu(3), &info), NVML_SUCCESS);
  EXPECT_EQ(info.state, NVML_GPU_FABRIC_STATE_COMPLETED);
  EXPECT_EQ(info.status, NVML_SUCCESS);
  EXPECT_EQ(info.cliqueId, 32766u);
  EXPECT_EQ(info.healthMask, 0xaau);
  EXPECT_EQ(info.clusterUuid[0], 0x5e);
  EXPECT_EQ(info.clusterUuid[15], 0x70);

  ASSERT_EQ(InitExample("hgx-fabric-fault.toml", "5m"), NVML_SUCCESS);
  ASSERT_EQ(nvml.nvmlDeviceGetGpuFabricInfoV(Gpu(3), &info), NVML_SUCCESS);
  EXPECT_EQ(info.healthMask, 0x99u);
  nvmlGpuFabricInfo_t original{};
  ASSERT_EQ(nvml.nvmlDeviceGetGpuFabricInfo(Gpu(5), &original), NVML_SUCCESS);
  EXPECT_EQ(original.status, NVML_ERROR_NOT_READY);

  info.version = 1;  // a version this library does not know
  EXPECT_EQ(nvml.nvmlDeviceGetGpuFabricInfoV(Gpu(3), &info), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
}

// GPM answers the scenario's values, in NVML's units, for two samples of one
// GPU; a metric the GPU lacks says so in its own slot.
TEST_F(FakeNvmlTest, GpmMetricsAreTheScenariosValuesBetweenTwoSamples) {
  ASSERT_EQ(InitExample("hopper-gpm.toml", "2m"), NVML_SUCCESS);
  nvmlGpmSupport_t support{};
  support.version = NVML_GPM_SUPPORT_VERSION;
  ASSERT_EQ(nvml.nvmlGpmQueryDeviceSupport(Gpu(7), &support), NVML_SUCCESS);
  EXPECT_EQ(support.isSupportedDevice, 1u);
  support.version = 2;
  EXPECT_EQ(nvml.nvmlGpmQueryDeviceSupport(Gpu(7), &support), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);

  nvmlGpmSample_t first = nullptr, second = nullptr;
  ASSERT_EQ(nvml.nvmlGpmSampleAlloc(&first), NVML_SUCCESS);
  ASSERT_EQ(nvml.nvmlGpmSampleAlloc(&second), NVML_SUCCESS);
  auto request = std::make_unique<nvmlGpmMetricsGet_t>();
  request->version = NVML_GPM_METRICS_GET_VERSION;
  request->numMetrics = 4;
  request->sample1 = first;
  request->sample2 = second;
  const unsigned metrics[] = {NVML_GPM_METRIC_SM_UTIL, NVML_GPM_METRIC_FP64_UTIL, NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC,
                              NVML_GPM_METRIC_INTEGER_UTIL};
  for (unsigned i = 0; i < 4; ++i) request->metrics[i].metricId = metrics[i];
  EXPECT_EQ(nvml.nvmlGpmMetricsGet(request.get()), NVML_ERROR_INVALID_ARGUMENT);  // no sample taken yet
  ASSERT_EQ(nvml.nvmlGpmSampleGet(Gpu(7), first), NVML_SUCCESS);
  ASSERT_EQ(nvml.nvmlGpmSampleGet(Gpu(3), second), NVML_SUCCESS);
  EXPECT_EQ(nvml.nvmlGpmMetricsGet(request.get()), NVML_ERROR_INVALID_ARGUMENT);  // two GPUs' samples
  ASSERT_EQ(nvml.nvmlGpmSampleGet(Gpu(7), second), NVML_SUCCESS);
  ASSERT_EQ(nvml.nvmlGpmMetricsGet(request.get()), NVML_SUCCESS);
  EXPECT_EQ(request->metrics[0].nvmlReturn, NVML_SUCCESS);
  EXPECT_DOUBLE_EQ(request->metrics[0].value, 88);  // [defaults]
  EXPECT_EQ(request->metrics[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);  // GPU 7 lists it in not_supported
  EXPECT_EQ(request->metrics[2].nvmlReturn, NVML_SUCCESS);
  EXPECT_DOUBLE_EQ(request->metrics[2].value, 61500);
  EXPECT_EQ(request->metrics[3].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);  // a metric the fake does not model
  request->version = 2;
  EXPECT_EQ(nvml.nvmlGpmMetricsGet(request.get()), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  EXPECT_EQ(nvml.nvmlGpmSampleFree(first), NVML_SUCCESS);
  EXPECT_EQ(nvml.nvmlGpmSampleFree(second), NVML_SUCCESS);

  // Without GPM the GPU says so, and refuses samples.
  ASSERT_EQ(InitExample("healthy-8xh100.toml", "0s"), NVML_SUCCESS);
  support.version = NVML_GPM_SUPPORT_VERSION;
  ASSERT_EQ(nvml.nvmlGpmQueryDeviceSupport(Gpu(0), &support), NVML_SUCCESS);
  EXPECT_EQ(support.isSupportedDevice, 0u);
  ASSERT_EQ(nvml.nvmlGpmSampleAlloc(&first), NVML_SUCCESS);
  EXPECT_EQ(nvml.nvmlGpmSampleGet(Gpu(0), first), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(nvml.nvmlGpmSampleFree(first), NVML_SUCCESS);
}

TEST_F(FakeNvmlTest, EnergyEncoderDecoderAndReservedMemory) {
  ASSERT_EQ(InitExample("hopper-gpm.toml", "10m"), NVML_SUCCESS);
  unsigned long long millijoules = 0;
  ASSERT_EQ(nvml.nvmlDeviceGetTotalEnergyConsumption(Gpu(2), &millijoules), NVML_SUCCESS);
  EXPECT_EQ(millijoules, 598ULL * 1000 * 600);  // the base draw since scenario time 0
  unsigned percent = 0, period = 0;
  ASSERT_EQ(nvml.nvmlDeviceGetDecoderUtilization(Gpu(5), &percent, &period), NVML_SUCCESS);
  EXPECT_EQ(percent, 11u);
  EXPECT_GT(period, 0u);
  ASSERT_EQ(nvml.nvmlDeviceGetEncoderUtilization(Gpu(5), &percent, &period), NVML_SUCCESS);
  EXPECT_EQ(percent, 0u);
  nvmlMemory_v2_t memory{};
  EXPECT_EQ(nvml.nvmlDeviceGetMemoryInfo_v2(Gpu(6), &memory), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  memory.version = nvmlMemory_v2;
  ASSERT_EQ(nvml.nvmlDeviceGetMemoryInfo_v2(Gpu(6), &memory), NVML_SUCCESS);
  EXPECT_EQ(memory.reserved, 600ULL << 20);
  EXPECT_EQ(memory.used, (70112ULL + 600) << 20);  // this version's used includes the reserved share
  EXPECT_EQ(memory.free, memory.total - memory.used);

  // A scenario may put the counter on its own timeline instead.
  ASSERT_EQ(Init(R"(
gpu_count = 1
[defaults]
total_energy_mj = 5000
)",
                 "1h"),
            NVML_SUCCESS);
  ASSERT_EQ(nvml.nvmlDeviceGetTotalEnergyConsumption(Gpu(0), &millijoules), NVML_SUCCESS);
  EXPECT_EQ(millijoules, 5000u);
}

TEST_F(FakeNvmlTest, FabricStateOfAServerWithoutNvSwitchIsNotSupported) {
  ASSERT_EQ(InitExample("healthy-8xh100.toml", "0s"), NVML_SUCCESS);
  nvmlGpuFabricInfo_v2_t info{};
  info.version = nvmlGpuFabricInfo_v2;
  ASSERT_EQ(nvml.nvmlDeviceGetGpuFabricInfoV(Gpu(0), &info), NVML_SUCCESS);
  EXPECT_EQ(info.state, NVML_GPU_FABRIC_STATE_NOT_SUPPORTED);
}

TEST_F(FakeNvmlTest, ExamplesShowWhatTheirHeadersSay) {
  unsigned value = 0;
  unsigned long long counter = 0;
  nvmlEnableState_t state;

  ASSERT_EQ(InitExample("overheating.toml", "12m"), NVML_SUCCESS);
  EXPECT_EQ(Temperature(4), 93u);
  ASSERT_EQ(nvml.nvmlDeviceGetCurrentClocksEventReasons(Gpu(4), &counter), NVML_SUCCESS);
  EXPECT_EQ(counter, 0x60u);  // sw and hw thermal slowdown
  EXPECT_EQ(Temperature(3), 66u);

  ASSERT_EQ(InitExample("fan-failure.toml", "12m"), NVML_SUCCESS);
  ASSERT_EQ(nvml.nvmlDeviceGetFanSpeed_v2(Gpu(1), 0, &value), NVML_SUCCESS);
  EXPECT_EQ(value, 0u);
  EXPECT_GE(Temperature(1), 95u);
  ASSERT_EQ(nvml.nvmlDeviceGetFanSpeed_v2(Gpu(2), 0, &value), NVML_SUCCESS);
  EXPECT_EQ(value, 85u);

  ASSERT_EQ(InitExample("ecc-dbe-row-remap.toml", "5m"), NVML_SUCCESS);
  ASSERT_EQ(nvml.nvmlDeviceGetTotalEccErrors(Gpu(6), NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &counter),
            NVML_SUCCESS);
  EXPECT_EQ(counter, 2u);
  unsigned correctable, uncorrectable, pending, failure;
  ASSERT_EQ(nvml.nvmlDeviceGetRemappedRows(Gpu(6), &correctable, &uncorrectable, &pending, &failure), NVML_SUCCESS);
  EXPECT_EQ(uncorrectable, 1u);
  EXPECT_EQ(pending, 1u);
  nvmlEventSet_t set;
  ASSERT_EQ(nvml.nvmlEventSetCreate(&set), NVML_SUCCESS);
  ASSERT_EQ(nvml.nvmlDeviceRegisterEvents(Gpu(6), nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
  nvmlEventData_t event;
  ASSERT_EQ(nvml.nvmlEventSetWait_v2(set, &event, 0), NVML_SUCCESS);
  EXPECT_EQ(event.eventData, 48u);
  ASSERT_EQ(nvml.nvmlEventSetWait_v2(set, &event, 0), NVML_SUCCESS);
  EXPECT_EQ(event.eventData, 63u);
  nvml.nvmlEventSetFree(set);

  ASSERT_EQ(InitExample("gpu-fallen-off-bus.toml", "1m"), NVML_SUCCESS);
  EXPECT_EQ(Temperature(3), 63u);
  ASSERT_EQ(InitExample("gpu-fallen-off-bus.toml", "5m"), NVML_SUCCESS);
  EXPECT_EQ(nvml.nvmlDeviceGetTemperature(Gpu(3), NVML_TEMPERATURE_GPU, &value), NVML_ERROR_GPU_IS_LOST);

  ASSERT_EQ(InitExample("pcie-downtrained.toml", "3m"), NVML_SUCCESS);
  ASSERT_EQ(nvml.nvmlDeviceGetCurrPcieLinkGeneration(Gpu(2), &value), NVML_SUCCESS);
  EXPECT_EQ(value, 3u);
  ASSERT_EQ(nvml.nvmlDeviceGetCurrPcieLinkWidth(Gpu(2), &value), NVML_SUCCESS);
  EXPECT_EQ(value, 8u);
  ASSERT_EQ(nvml.nvmlDeviceGetPcieReplayCounter(Gpu(2), &value), NVML_SUCCESS);
  EXPECT_EQ(value, 1287u + 120);

  ASSERT_EQ(InitExample("nvlink-errors.toml", "10m"), NVML_SUCCESS);
  ASSERT_EQ(nvml.nvmlDeviceGetNvLinkState(Gpu(1), 7, &state), NVML_SUCCESS);
  EXPECT_EQ(state, NVML_FEATURE_DISABLED);
  ASSERT_EQ(nvml.nvmlDeviceGetNvLinkErrorCounter(Gpu(1), 6, NVML_NVLINK_ERROR_DL_CRC_FLIT, &counter), NVML_SUCCESS);
  EXPECT_EQ(counter, 1520u + 2000);

  ASSERT_EQ(InitExample("memory-leak.toml", "58m"), NVML_SUCCESS);
  nvmlMemory_t memory;
  ASSERT_EQ(nvml.nvmlDeviceGetMemoryInfo(Gpu(2), &memory), NVML_SUCCESS);
  EXPECT_EQ(memory.used, 80900ULL << 20);
  ASSERT_EQ(InitExample("memory-leak.toml", "11m"), NVML_SUCCESS);
  ASSERT_EQ(nvml.nvmlDeviceGetMemoryInfo(Gpu(2), &memory), NVML_SUCCESS);
  EXPECT_EQ(memory.used, 32000ULL << 20);  // half-way through the first clean-up

  ASSERT_EQ(InitExample("cooling-failure.toml", "20m"), NVML_SUCCESS);
  for (unsigned index = 0; index < 8; ++index) {
    EXPECT_GE(Temperature(index), 93u);
    ASSERT_EQ(nvml.nvmlDeviceGetFanSpeed_v2(Gpu(index), 0, &value), NVML_SUCCESS);
    EXPECT_EQ(value, 100u);
  }
}

// Every example initialises, or fails with the init error it demonstrates.
TEST_F(FakeNvmlTest, EveryExampleScenarioLoads) {
  std::filesystem::path examples = std::filesystem::path(GPUDOCTOR_SOURCE_DIR) / "examples";
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(examples)) {
    if (entry.path().extension() != ".toml") continue;
    SCOPED_TRACE(entry.path().string());
    std::ifstream in(entry.path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto scenario = ParseScenario(text, entry.path().string());
    ASSERT_TRUE(scenario.ok()) << scenario.error().message;
    nvmlReturn_t expected = NVML_SUCCESS;
    for (const InitFailure& failure : scenario->init_failures)
      if (failure.window.Contains(0)) expected = failure.error;
    Shutdown(nvml);
    setenv("GPUDOCTOR_SCENARIO", entry.path().c_str(), 1);
    setenv("GPUDOCTOR_FAKE_NOW", "0s", 1);
    ASSERT_EQ(nvml.nvmlInit_v2(), expected);
    if (expected == NVML_SUCCESS) {
      unsigned count = 0;
      ASSERT_EQ(nvml.nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
      EXPECT_EQ(count, scenario->gpus.size());
    }
    ++checked;
  }
  EXPECT_GE(checked, 14);
}

}  // namespace
}  // namespace gpudoctor::fake_nvml
