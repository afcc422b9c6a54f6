// The subset of NVML's C API that gpudoctor calls, declared by us.
//
// NVIDIA's header is not vendored. These declarations follow NVML's public,
// stable ABI: type layouts and numeric constants are those the library
// exports. Only src/nvml and the fake NVML library include this file.
//
// GPUDOCTOR_NVML_FUNCTIONS is the single list of entry points. The loader
// expands it into function-pointer members resolved with dlsym; the fake NVML
// library defines each one. Where NVML has versioned symbols the newest comes
// first and the loader falls back in list order.
#pragma once

#include <cstdint>

extern "C" {

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;
typedef int nvmlEnableState_t;

enum : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_UNKNOWN = 999,
};

enum : int { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };
enum : int { NVML_TEMPERATURE_GPU = 0 };
enum : int {
  NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0,
  NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1,
  NVML_TEMPERATURE_THRESHOLD_MEM_MAX = 2,
  NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3,
};
enum : int { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
enum : int { NVML_MEMORY_ERROR_TYPE_CORRECTED = 0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1 };
enum : int { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 };
enum : int { NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1 };
enum : int {
  NVML_NVLINK_ERROR_DL_REPLAY = 0,
  NVML_NVLINK_ERROR_DL_RECOVERY = 1,
  NVML_NVLINK_ERROR_DL_CRC_FLIT = 2,
  NVML_NVLINK_ERROR_DL_CRC_DATA = 3,
};
constexpr unsigned NVML_NVLINK_MAX_LINKS = 18;
constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x8ULL;
constexpr unsigned NVML_FI_DEV_MEMORY_TEMP = 82;
enum : int { NVML_VALUE_TYPE_DOUBLE = 0, NVML_VALUE_TYPE_UNSIGNED_INT = 1, NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
             NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3, NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4 };

// nvmlPciInfo_t as returned by the _v2 and _v3 entry points.
typedef struct {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

// The layout the original, unversioned nvmlDeviceGetPciInfo fills.
typedef struct {
  char busId[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  unsigned int reserved0, reserved1, reserved2, reserved3;
} nvmlPciInfoV1_t;

typedef struct {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

// Process record of the _v2 and _v3 process queries.
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

// Process record of the original process query.
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfoV1_t;

typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

// GPU fabric registration on NVSwitch systems (HGX): the fabric manager
// registers every GPU with the NVLink fabric before CUDA can use it.
typedef unsigned char nvmlGpuFabricState_t;
enum : unsigned char {
  NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0,
  NVML_GPU_FABRIC_STATE_NOT_STARTED = 1,
  NVML_GPU_FABRIC_STATE_IN_PROGRESS = 2,
  NVML_GPU_FABRIC_STATE_COMPLETED = 3,
};
constexpr unsigned NVML_GPU_FABRIC_UUID_LEN = 16;

// What nvmlDeviceGetGpuFabricInfo fills.
typedef struct {
  unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
  nvmlReturn_t status;  // of the registration
  unsigned int cliqueId;
  nvmlGpuFabricState_t state;
} nvmlGpuFabricInfo_t;

// Version 2 of what nvmlDeviceGetGpuFabricInfoV fills, which adds the health
// mask. The caller sets `version`; drivers that know later versions accept it.
typedef struct {
  unsigned int version;
  unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
  nvmlReturn_t status;
  unsigned int cliqueId;
  nvmlGpuFabricState_t state;
  unsigned int healthMask;
} nvmlGpuFabricInfo_v2_t;
// NVML_STRUCT_VERSION(GpuFabricInfo, 2): the struct's size and, in the top byte, its version.
constexpr unsigned int nvmlGpuFabricInfo_v2 = static_cast<unsigned int>(sizeof(nvmlGpuFabricInfo_v2_t)) | (2u << 24);

typedef union {
  double dVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
} nvmlValue_t;

typedef struct {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;

// Memory with the share the driver and firmware keep for themselves: what
// nvmlDeviceGetMemoryInfo_v2 fills. `used` includes `reserved`.
typedef struct {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
// NVML_STRUCT_VERSION(Memory, 2).
constexpr unsigned int nvmlMemory_v2 = static_cast<unsigned int>(sizeof(nvmlMemory_v2_t)) | (2u << 24);

// GPU Performance Monitoring (GPM, Hopper and newer): counters sampled into
// opaque buffers; nvmlGpmMetricsGet turns two samples of one GPU into rates
// over the time between them. Activities are percentages (0-100), PCIe and
// NVLink throughput MiB per second.
typedef struct nvmlGpmSample_st* nvmlGpmSample_t;
enum : unsigned int {
  NVML_GPM_METRIC_GRAPHICS_UTIL = 1,
  NVML_GPM_METRIC_SM_UTIL = 2,
  NVML_GPM_METRIC_SM_OCCUPANCY = 3,
  NVML_GPM_METRIC_INTEGER_UTIL = 4,
  NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5,
  NVML_GPM_METRIC_DFMA_TENSOR_UTIL = 6,
  NVML_GPM_METRIC_HMMA_TENSOR_UTIL = 7,
  NVML_GPM_METRIC_IMMA_TENSOR_UTIL = 9,
  NVML_GPM_METRIC_DRAM_BW_UTIL = 10,
  NVML_GPM_METRIC_FP64_UTIL = 11,
  NVML_GPM_METRIC_FP32_UTIL = 12,
  NVML_GPM_METRIC_FP16_UTIL = 13,
  NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20,
  NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21,
  NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC = 60,
  NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC = 61,
};
// The metrics array's length. Headers have grown it (98, then 333) without
// changing the struct's version: the library reads `numMetrics` entries, so
// the largest length any header used is safe with every driver.
constexpr unsigned int kNvmlGpmMetricSlots = 333;
constexpr unsigned int NVML_GPM_METRICS_GET_VERSION = 1;
constexpr unsigned int NVML_GPM_SUPPORT_VERSION = 1;

typedef struct {
  unsigned int metricId;    // in
  nvmlReturn_t nvmlReturn;  // out: this metric's own status; `value` is valid only on NVML_SUCCESS
  double value;             // out
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;  // out, owned by the library; may be null
} nvmlGpmMetric_t;

typedef struct {
  unsigned int version;  // NVML_GPM_METRICS_GET_VERSION
  unsigned int numMetrics;
  nvmlGpmSample_t sample1;  // the earlier sample
  nvmlGpmSample_t sample2;
  nvmlGpmMetric_t metrics[kNvmlGpmMetricSlots];
} nvmlGpmMetricsGet_t;

typedef struct {
  unsigned int version;  // NVML_GPM_SUPPORT_VERSION
  unsigned int isSupportedDevice;
} nvmlGpmSupport_t;

}  // extern "C"

// X(name, return, parameter list). Fallbacks for versioned entry points are
// listed right after the preferred symbol.
#define GPUDOCTOR_NVML_FUNCTIONS(X)                                                                     \
  X(nvmlInit_v2, nvmlReturn_t, (void))                                                                   \
  X(nvmlInit, nvmlReturn_t, (void))                                                                      \
  X(nvmlShutdown, nvmlReturn_t, (void))                                                                  \
  X(nvmlSystemGetDriverVersion, nvmlReturn_t, (char* version, unsigned int length))                      \
  X(nvmlSystemGetNVMLVersion, nvmlReturn_t, (char* version, unsigned int length))                        \
  X(nvmlSystemGetCudaDriverVersion_v2, nvmlReturn_t, (int* version))                                     \
  X(nvmlSystemGetCudaDriverVersion, nvmlReturn_t, (int* version))                                        \
  X(nvmlSystemGetProcessName, nvmlReturn_t, (unsigned int pid, char* name, unsigned int length))         \
  X(nvmlDeviceGetCount_v2, nvmlReturn_t, (unsigned int* count))                                          \
  X(nvmlDeviceGetCount, nvmlReturn_t, (unsigned int* count))                                             \
  X(nvmlDeviceGetHandleByIndex_v2, nvmlReturn_t, (unsigned int index, nvmlDevice_t* device))             \
  X(nvmlDeviceGetHandleByIndex, nvmlReturn_t, (unsigned int index, nvmlDevice_t* device))                \
  X(nvmlDeviceGetName, nvmlReturn_t, (nvmlDevice_t device, char* name, unsigned int length))             \
  X(nvmlDeviceGetUUID, nvmlReturn_t, (nvmlDevice_t device, char* uuid, unsigned int length))             \
  X(nvmlDeviceGetSerial, nvmlReturn_t, (nvmlDevice_t device, char* serial, unsigned int length))         \
  X(nvmlDeviceGetBoardPartNumber, nvmlReturn_t, (nvmlDevice_t device, char* part, unsigned int length))  \
  X(nvmlDeviceGetVbiosVersion, nvmlReturn_t, (nvmlDevice_t device, char* version, unsigned int length))  \
  X(nvmlDeviceGetPersistenceMode, nvmlReturn_t, (nvmlDevice_t device, nvmlEnableState_t * mode))         \
  X(nvmlDeviceValidateInforom, nvmlReturn_t, (nvmlDevice_t device))                                        \
  X(nvmlDeviceGetPciInfo_v3, nvmlReturn_t, (nvmlDevice_t device, nvmlPciInfo_t * pci))                   \
  X(nvmlDeviceGetPciInfo_v2, nvmlReturn_t, (nvmlDevice_t device, nvmlPciInfo_t * pci))                   \
  X(nvmlDeviceGetPciInfo, nvmlReturn_t, (nvmlDevice_t device, nvmlPciInfoV1_t * pci))                    \
  X(nvmlDeviceGetCurrPcieLinkGeneration, nvmlReturn_t, (nvmlDevice_t device, unsigned int* generation))  \
  X(nvmlDeviceGetMaxPcieLinkGeneration, nvmlReturn_t, (nvmlDevice_t device, unsigned int* generation))   \
  X(nvmlDeviceGetCurrPcieLinkWidth, nvmlReturn_t, (nvmlDevice_t device, unsigned int* width))            \
  X(nvmlDeviceGetMaxPcieLinkWidth, nvmlReturn_t, (nvmlDevice_t device, unsigned int* width))             \
  X(nvmlDeviceGetPcieReplayCounter, nvmlReturn_t, (nvmlDevice_t device, unsigned int* value))            \
  X(nvmlDeviceGetTemperature, nvmlReturn_t, (nvmlDevice_t device, int sensor, unsigned int* temp))       \
  X(nvmlDeviceGetTemperatureThreshold, nvmlReturn_t,                                                     \
    (nvmlDevice_t device, int threshold, unsigned int* temp))                                            \
  X(nvmlDeviceGetFieldValues, nvmlReturn_t, (nvmlDevice_t device, int count, nvmlFieldValue_t* values))  \
  X(nvmlDeviceGetNumFans, nvmlReturn_t, (nvmlDevice_t device, unsigned int* count))                      \
  X(nvmlDeviceGetFanSpeed_v2, nvmlReturn_t, (nvmlDevice_t device, unsigned int fan, unsigned int* speed)) \
  X(nvmlDeviceGetFanSpeed, nvmlReturn_t, (nvmlDevice_t device, unsigned int* speed))                     \
  X(nvmlDeviceGetPowerUsage, nvmlReturn_t, (nvmlDevice_t device, unsigned int* milliwatts))              \
  X(nvmlDeviceGetEnforcedPowerLimit, nvmlReturn_t, (nvmlDevice_t device, unsigned int* milliwatts))      \
  X(nvmlDeviceGetPowerManagementDefaultLimit, nvmlReturn_t, (nvmlDevice_t device, unsigned int* milliwatts)) \
  X(nvmlDeviceGetTotalEnergyConsumption, nvmlReturn_t, (nvmlDevice_t device, unsigned long long* millijoules)) \
  X(nvmlDeviceGetClockInfo, nvmlReturn_t, (nvmlDevice_t device, int type, unsigned int* mhz))            \
  X(nvmlDeviceGetCurrentClocksEventReasons, nvmlReturn_t,                                                \
    (nvmlDevice_t device, unsigned long long* reasons))                                                  \
  X(nvmlDeviceGetCurrentClocksThrottleReasons, nvmlReturn_t,                                             \
    (nvmlDevice_t device, unsigned long long* reasons))                                                  \
  X(nvmlDeviceGetUtilizationRates, nvmlReturn_t, (nvmlDevice_t device, nvmlUtilization_t * utilization)) \
  X(nvmlDeviceGetMemoryInfo_v2, nvmlReturn_t, (nvmlDevice_t device, nvmlMemory_v2_t * memory))          \
  X(nvmlDeviceGetMemoryInfo, nvmlReturn_t, (nvmlDevice_t device, nvmlMemory_t * memory))                 \
  X(nvmlDeviceGetEncoderUtilization, nvmlReturn_t,                                                       \
    (nvmlDevice_t device, unsigned int* utilization, unsigned int* sampling_period_us))                  \
  X(nvmlDeviceGetDecoderUtilization, nvmlReturn_t,                                                       \
    (nvmlDevice_t device, unsigned int* utilization, unsigned int* sampling_period_us))                  \
  X(nvmlDeviceGetComputeRunningProcesses_v3, nvmlReturn_t,                                               \
    (nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos))                                \
  X(nvmlDeviceGetComputeRunningProcesses_v2, nvmlReturn_t,                                               \
    (nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos))                                \
  X(nvmlDeviceGetComputeRunningProcesses, nvmlReturn_t,                                                  \
    (nvmlDevice_t device, unsigned int* count, nvmlProcessInfoV1_t* infos))                              \
  X(nvmlDeviceGetEccMode, nvmlReturn_t,                                                                  \
    (nvmlDevice_t device, nvmlEnableState_t * current, nvmlEnableState_t * pending))                     \
  X(nvmlDeviceGetTotalEccErrors, nvmlReturn_t,                                                           \
    (nvmlDevice_t device, int error_type, int counter_type, unsigned long long* count))                  \
  X(nvmlDeviceGetRetiredPages, nvmlReturn_t,                                                             \
    (nvmlDevice_t device, int cause, unsigned int* page_count, unsigned long long* addresses))           \
  X(nvmlDeviceGetRetiredPagesPendingStatus, nvmlReturn_t, (nvmlDevice_t device, nvmlEnableState_t * pending)) \
  X(nvmlDeviceGetRemappedRows, nvmlReturn_t,                                                             \
    (nvmlDevice_t device, unsigned int* correctable, unsigned int* uncorrectable, unsigned int* pending, \
     unsigned int* failure))                                                                             \
  X(nvmlDeviceGetGpuFabricInfoV, nvmlReturn_t, (nvmlDevice_t device, nvmlGpuFabricInfo_v2_t * info))      \
  X(nvmlDeviceGetGpuFabricInfo, nvmlReturn_t, (nvmlDevice_t device, nvmlGpuFabricInfo_t * info))            \
  X(nvmlDeviceGetNvLinkState, nvmlReturn_t, (nvmlDevice_t device, unsigned int link, nvmlEnableState_t * active)) \
  X(nvmlDeviceGetNvLinkErrorCounter, nvmlReturn_t,                                                       \
    (nvmlDevice_t device, unsigned int link, int counter, unsigned long long* value))                    \
  X(nvmlEventSetCreate, nvmlReturn_t, (nvmlEventSet_t * set))                                            \
  X(nvmlDeviceRegisterEvents, nvmlReturn_t,                                                              \
    (nvmlDevice_t device, unsigned long long event_types, nvmlEventSet_t set))                           \
  X(nvmlEventSetWait_v2, nvmlReturn_t, (nvmlEventSet_t set, nvmlEventData_t * data, unsigned int timeout_ms)) \
  X(nvmlEventSetWait, nvmlReturn_t, (nvmlEventSet_t set, nvmlEventData_t * data, unsigned int timeout_ms)) \
  X(nvmlEventSetFree, nvmlReturn_t, (nvmlEventSet_t set))                                                \
  X(nvmlGpmQueryDeviceSupport, nvmlReturn_t, (nvmlDevice_t device, nvmlGpmSupport_t * support))          \
  X(nvmlGpmSampleAlloc, nvmlReturn_t, (nvmlGpmSample_t * sample))                                        \
  X(nvmlGpmSampleFree, nvmlReturn_t, (nvmlGpmSample_t sample))                                           \
  X(nvmlGpmSampleGet, nvmlReturn_t, (nvmlDevice_t device, nvmlGpmSample_t sample))                       \
  X(nvmlGpmMetricsGet, nvmlReturn_t, (nvmlGpmMetricsGet_t * metrics))
