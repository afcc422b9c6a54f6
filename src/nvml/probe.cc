#include "nvml/probe.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/text.h"
#include "nvml/nvml_library.h"
#include "nvml/probe_wire_writer.h"

namespace gpudoctor {
namespace {

#define GPUDOCTOR_CALL_NAME(name, ret, params) #name,
constexpr std::array kCallNames = {"", GPUDOCTOR_NVML_FUNCTIONS(GPUDOCTOR_CALL_NAME)};
#undef GPUDOCTOR_CALL_NAME

// The CallTracker id of an NVML entry point, looked up at compile time: a
// name that is not in GPUDOCTOR_NVML_FUNCTIONS does not compile.
struct NvmlCall {
  consteval NvmlCall(const char* name) {  // NOLINT(google-explicit-constructor): literals convert
    for (size_t i = 1; i < kCallNames.size(); ++i) {
      if (std::string_view(name) == kCallNames[i]) {
        id = static_cast<uint16_t>(i);
        return;
      }
    }
    throw "not an NVML entry point in GPUDOCTOR_NVML_FUNCTIONS";
  }
  uint16_t id = 0;
};

// Writes whole frames onto the output pipe; threads share it. While a batch
// is open, frames are gathered and written together when it ends, so a
// request normally costs the parent one wake-up instead of one per frame.
class FrameWriter {
 public:
  explicit FrameWriter(int fd) : fd_(fd) {}

  template <typename Message>
  void Write(const Message& message) {
    std::lock_guard lock(mutex_);
    AppendProbeFrame(batch_, message);
    if (!batching_) Flush();
  }
  // Writes a frame encoded elsewhere (GpuFrameEncoder).
  void WriteEncoded(std::string_view frame) {
    std::lock_guard lock(mutex_);
    batch_.append(frame);
    if (!batching_) Flush();
  }
  void BeginBatch() {
    std::lock_guard lock(mutex_);
    batching_ = true;
  }
  // Writes what was gathered; later frames go out as they come.
  void EndBatch() {
    std::lock_guard lock(mutex_);
    batching_ = false;
    Flush();
  }

 private:
  void Flush() {
    const char* data = batch_.data();
    size_t left = batch_.size();
    while (left > 0) {
      ssize_t n = ::write(fd_, data, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // parent went away; nothing useful left to do
      data += n;
      left -= static_cast<size_t>(n);
    }
    batch_.clear();  // keeps its capacity: the next request reuses it
  }

  int fd_;
  std::mutex mutex_;
  bool batching_ = false;
  std::string batch_;
};

// Marks which NVML call a thread is inside for as long as it lives, in a
// slot that is never null: a store before and after each call, nothing more.
class CallScope {
 public:
  CallScope(std::atomic<uint16_t>* slot, NvmlCall call) : slot_(slot) {
    slot_->store(call.id, std::memory_order_release);
  }
  ~CallScope() { slot_->store(0, std::memory_order_release); }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  std::atomic<uint16_t>* slot_;
};

#define TRACK(slot, name) CallScope scope_##name(slot, NvmlCall(#name))

// What the probe keeps of one GPU's GPM between requests: whether the GPU has
// GPM, and its latest sample with the time it was taken. GPM turns two samples
// into rates over the time between them; the probe serves request after
// request, so each request's sample is the next one's start and no request
// waits between two samples. The first look at a GPU only takes a sample.
struct GpmState {
  // Held while the GPU's GPM is read. A reader that finds it held (a thread
  // still in NVML for this GPU) leaves GPM out rather than wait.
  std::mutex mutex;
  bool support_known = false;
  bool supported = false;
  nvmlGpmSample_t previous = nullptr;
  nvmlGpmSample_t current = nullptr;
  bool has_previous = false;
  std::chrono::steady_clock::time_point previous_at;
  double nvlink_bytes = 0;  // sent and received since the probe started: each interval's rates times its length
};

// NVML refreshes GPM counters about every 100 ms; two samples closer than
// that give no rate.
constexpr auto kGpmMinimumInterval = std::chrono::milliseconds(100);
constexpr double kBytesPerMib = 1024.0 * 1024.0;

// Reads one GPU into a GPU frame, writing each field as it is read: no
// GpuSnapshot is built in the probe (nvml/probe_wire_writer.h). Fields are
// read in the order of kScalarGpuFields. Stops calling NVML once the GPU
// turns out to be lost: every further call would fail the same way, and a
// lost GPU is where drivers hang.
class GpuReader {
 public:
  // `slot` (never null) is where the call in progress is marked, and `pci`
  // (null for a GPU beyond the tracker) where the GPU's PCI id goes as soon
  // as it is known, so a GPU that hangs later can still be named by its bus.
  // `gpm` (null: GPM is not read) is what is kept of the GPU's GPM between requests.
  GpuReader(const NvmlLibrary& nvml, uint32_t index, std::atomic<uint16_t>* slot, SharedPciId* pci, GpmState* gpm)
      : nvml_(nvml), index_(index), slot_(slot), pci_(pci), gpm_(gpm) {}

  // Reads the GPU once and appends its frame to `out`.
  void Read(std::string& out) {
    GpuFrameEncoder gpu(out, index_);
    nvmlReturn_t rc;
    {
      CallScope scope(slot_, nvml_.nvmlDeviceGetHandleByIndex_v2 ? NvmlCall("nvmlDeviceGetHandleByIndex_v2")
                                                                 : NvmlCall("nvmlDeviceGetHandleByIndex"));
      rc = nvml_.HandleByIndex(index_, &device_);
    }
    if (rc != NVML_SUCCESS) {
      device_ = nullptr;
      AccessError error = AccessErrorForNvml(rc);
      if (error == AccessError::kNone || error == AccessError::kOther) error = AccessError::kUnknown;
      gpu.Finish(error, "cannot get a handle for GPU " + std::to_string(index_) + ": " + NvmlErrorMessage(rc));
      return;
    }
    ReadIdentity(gpu);
    ReadPcie(gpu);
    ReadThermal(gpu);
    ReadPower(gpu);
    ReadUse(gpu);
    ReadErrors(gpu);
    ReadFabric(gpu);
    ReadGpm(gpu);
    ReadProcesses(gpu);
    ReadNvLinks(gpu);
    gpu.Finish(lost_ ? AccessError::kGpuLost : AccessError::kNone, lost_message_);
  }

  // The handle Read() obtained; null when it could not get one.
  nvmlDevice_t device() const { return device_; }

 private:
  // Records a field from a return code; `value` is used on success. NVML's
  // "not supported" leaves the field out, which the frame reads as such.
  template <auto Member, typename V>
  void Record(GpuFrameEncoder& gpu, nvmlReturn_t rc, const V& value) {
    if (rc == NVML_SUCCESS) {
      gpu.Value<Member>(value);
    } else if (rc != NVML_ERROR_NOT_SUPPORTED && rc != NVML_ERROR_FUNCTION_NOT_FOUND) {
      NoteLost(rc);
      gpu.Failed<Member>(NvmlErrorMessage(rc));
    }
  }
  // Remembers that the GPU is lost, the first time NVML says so.
  void NoteLost(nvmlReturn_t rc) {
    if (rc == NVML_ERROR_GPU_IS_LOST && !lost_) {
      lost_ = true;
      lost_message_ = NvmlErrorMessage(rc);
    }
  }
  // Once the GPU is lost, every field read after that is an error saying so.
  template <auto Member>
  bool FailIfLost(GpuFrameEncoder& gpu) {
    if (lost_) gpu.Failed<Member>(lost_message_);
    return lost_;
  }

  // Calls fn(device, args..., &out) through an optional pointer, tracking
  // the call, and records the field from what it returns.
  template <auto Member, typename Out, typename Fn, typename... Args>
  void Call(GpuFrameEncoder& gpu, NvmlCall name, Fn fn, Args... args) {
    if (FailIfLost<Member>(gpu) || fn == nullptr) return;
    Out out{};
    nvmlReturn_t rc;
    {
      CallScope scope(slot_, name);
      rc = fn(device_, args..., &out);
    }
    Record<Member>(gpu, rc, out);
  }
  // The same for a value the reader needs before it records a field:
  // returns NVML's code, and the caller records the field.
  template <typename Out, typename Fn, typename... Args>
  nvmlReturn_t CallFor(Out* out, NvmlCall name, Fn fn, Args... args) {
    if (lost_) return NVML_ERROR_GPU_IS_LOST;
    if (fn == nullptr) return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t rc;
    {
      CallScope scope(slot_, name);
      rc = fn(device_, args..., out);
    }
    NoteLost(rc);
    return rc;
  }

  template <auto Member>
  void String(GpuFrameEncoder& gpu, NvmlCall name, nvmlReturn_t (*fn)(nvmlDevice_t, char*, unsigned int)) {
    if (FailIfLost<Member>(gpu) || fn == nullptr) return;
    char buffer[256];
    buffer[0] = '\0';
    nvmlReturn_t rc;
    {
      CallScope scope(slot_, name);
      rc = fn(device_, buffer, sizeof buffer);
    }
    Record<Member>(gpu, rc, std::string_view(buffer, strnlen(buffer, sizeof buffer)));
  }

  void ReadIdentity(GpuFrameEncoder& gpu) {
    String<&GpuSnapshot::name>(gpu, "nvmlDeviceGetName", nvml_.nvmlDeviceGetName);
    String<&GpuSnapshot::uuid>(gpu, "nvmlDeviceGetUUID", nvml_.nvmlDeviceGetUUID);
    String<&GpuSnapshot::serial>(gpu, "nvmlDeviceGetSerial", nvml_.nvmlDeviceGetSerial);
    String<&GpuSnapshot::board_part_number>(gpu, "nvmlDeviceGetBoardPartNumber", nvml_.nvmlDeviceGetBoardPartNumber);
    String<&GpuSnapshot::vbios_version>(gpu, "nvmlDeviceGetVbiosVersion", nvml_.nvmlDeviceGetVbiosVersion);
    Call<&GpuSnapshot::persistence_mode, nvmlEnableState_t>(gpu, "nvmlDeviceGetPersistenceMode",
                                                            nvml_.nvmlDeviceGetPersistenceMode);
    ReadInforom(gpu);
  }

  // NVML answers the infoROM checksum check with CORRUPTED_INFOROM when it fails.
  void ReadInforom(GpuFrameEncoder& gpu) {
    if (FailIfLost<&GpuSnapshot::inforom_valid>(gpu) || nvml_.nvmlDeviceValidateInforom == nullptr) return;
    nvmlReturn_t rc;
    {
      CallScope scope(slot_, "nvmlDeviceValidateInforom");
      rc = nvml_.nvmlDeviceValidateInforom(device_);
    }
    if (rc == NVML_ERROR_CORRUPTED_INFOROM) {
      gpu.Value<&GpuSnapshot::inforom_valid>(false);
    } else {
      Record<&GpuSnapshot::inforom_valid>(gpu, rc, true);
    }
  }

  void ReadPcie(GpuFrameEncoder& gpu) {
    if (!FailIfLost<&GpuSnapshot::pci_bus_id>(gpu)) {
      std::string bus_id;
      nvmlReturn_t rc;
      {
        CallScope scope(slot_, nvml_.nvmlDeviceGetPciInfo_v3   ? NvmlCall("nvmlDeviceGetPciInfo_v3")
                               : nvml_.nvmlDeviceGetPciInfo_v2 ? NvmlCall("nvmlDeviceGetPciInfo_v2")
                                                               : NvmlCall("nvmlDeviceGetPciInfo"));
        rc = nvml_.PciBusId(device_, &bus_id);
      }
      Record<&GpuSnapshot::pci_bus_id>(gpu, rc, bus_id);
      if (rc == NVML_SUCCESS && pci_) pci_->Store(bus_id);
    }
    Call<&GpuSnapshot::pcie_generation_current, unsigned>(gpu, "nvmlDeviceGetCurrPcieLinkGeneration",
                                                          nvml_.nvmlDeviceGetCurrPcieLinkGeneration);
    Call<&GpuSnapshot::pcie_generation_max, unsigned>(gpu, "nvmlDeviceGetMaxPcieLinkGeneration",
                                                      nvml_.nvmlDeviceGetMaxPcieLinkGeneration);
    Call<&GpuSnapshot::pcie_width_current, unsigned>(gpu, "nvmlDeviceGetCurrPcieLinkWidth",
                                                     nvml_.nvmlDeviceGetCurrPcieLinkWidth);
    Call<&GpuSnapshot::pcie_width_max, unsigned>(gpu, "nvmlDeviceGetMaxPcieLinkWidth", nvml_.nvmlDeviceGetMaxPcieLinkWidth);
    Call<&GpuSnapshot::pcie_replay_count, unsigned>(gpu, "nvmlDeviceGetPcieReplayCounter",
                                                    nvml_.nvmlDeviceGetPcieReplayCounter);
  }

  void ReadThermal(GpuFrameEncoder& gpu) {
    Call<&GpuSnapshot::temperature_c, unsigned>(gpu, "nvmlDeviceGetTemperature", nvml_.nvmlDeviceGetTemperature,
                                                int{NVML_TEMPERATURE_GPU});
    ReadMemoryTemperature(gpu);
    const auto threshold = nvml_.nvmlDeviceGetTemperatureThreshold;
    constexpr NvmlCall threshold_name("nvmlDeviceGetTemperatureThreshold");
    Call<&GpuSnapshot::temperature_slowdown_c, unsigned>(gpu, threshold_name, threshold,
                                                         int{NVML_TEMPERATURE_THRESHOLD_SLOWDOWN});
    Call<&GpuSnapshot::temperature_shutdown_c, unsigned>(gpu, threshold_name, threshold,
                                                         int{NVML_TEMPERATURE_THRESHOLD_SHUTDOWN});
    Call<&GpuSnapshot::temperature_max_operating_c, unsigned>(gpu, threshold_name, threshold,
                                                              int{NVML_TEMPERATURE_THRESHOLD_GPU_MAX});
    Call<&GpuSnapshot::memory_temperature_max_c, unsigned>(gpu, threshold_name, threshold,
                                                           int{NVML_TEMPERATURE_THRESHOLD_MEM_MAX});
    ReadFans(gpu);
  }

  void ReadMemoryTemperature(GpuFrameEncoder& gpu) {
    if (FailIfLost<&GpuSnapshot::memory_temperature_c>(gpu) || !nvml_.nvmlDeviceGetFieldValues) return;
    nvmlFieldValue_t value{};
    value.fieldId = NVML_FI_DEV_MEMORY_TEMP;
    nvmlReturn_t rc;
    {
      CallScope scope(slot_, "nvmlDeviceGetFieldValues");
      rc = nvml_.nvmlDeviceGetFieldValues(device_, 1, &value);
    }
    if (rc == NVML_SUCCESS) rc = value.nvmlReturn;
    uint32_t celsius = 0;
    if (rc == NVML_SUCCESS) {
      switch (value.valueType) {
        case NVML_VALUE_TYPE_DOUBLE: celsius = static_cast<uint32_t>(value.value.dVal); break;
        case NVML_VALUE_TYPE_UNSIGNED_LONG: celsius = static_cast<uint32_t>(value.value.ulVal); break;
        case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: celsius = static_cast<uint32_t>(value.value.ullVal); break;
        case NVML_VALUE_TYPE_SIGNED_LONG_LONG: celsius = static_cast<uint32_t>(value.value.sllVal); break;
        default: celsius = value.value.uiVal; break;
      }
      // Drivers report 0 when the memory has no sensor; that is "not supported", not 0 C.
      if (celsius == 0) rc = NVML_ERROR_NOT_SUPPORTED;
    }
    Record<&GpuSnapshot::memory_temperature_c>(gpu, rc, celsius);
  }

  void ReadFans(GpuFrameEncoder& gpu) {
    constexpr auto kFans = &GpuSnapshot::fan_speeds_percent;
    if (FailIfLost<kFans>(gpu)) return;
    unsigned fan_count = 0;
    nvmlReturn_t rc = CallFor(&fan_count, "nvmlDeviceGetNumFans", nvml_.nvmlDeviceGetNumFans);
    if (rc == NVML_SUCCESS && nvml_.nvmlDeviceGetFanSpeed_v2) {
      std::vector<uint32_t> speeds;
      for (unsigned fan = 0; fan < fan_count && fan < 64; ++fan) {
        unsigned speed = 0;
        rc = CallFor(&speed, "nvmlDeviceGetFanSpeed_v2", nvml_.nvmlDeviceGetFanSpeed_v2, fan);
        if (rc != NVML_SUCCESS) break;
        speeds.push_back(speed);
      }
      Record<kFans>(gpu, rc, speeds);
      return;
    }
    if (rc == NVML_SUCCESS && fan_count == 0) return;  // no fans: liquid or passive cooling
    unsigned speed = 0;
    rc = CallFor(&speed, "nvmlDeviceGetFanSpeed", nvml_.nvmlDeviceGetFanSpeed);
    Record<kFans>(gpu, rc, std::vector<uint32_t>{speed});
  }

  // NVML reports power in milliwatts; the model holds watts.
  template <auto Member>
  void Milliwatts(GpuFrameEncoder& gpu, NvmlCall name, nvmlReturn_t (*fn)(nvmlDevice_t, unsigned*)) {
    if (FailIfLost<Member>(gpu) || fn == nullptr) return;
    unsigned milliwatts = 0;
    nvmlReturn_t rc = CallFor(&milliwatts, name, fn);
    Record<Member>(gpu, rc, milliwatts / 1000.0);
  }

  void ReadPower(GpuFrameEncoder& gpu) {
    Milliwatts<&GpuSnapshot::power_draw_w>(gpu, "nvmlDeviceGetPowerUsage", nvml_.nvmlDeviceGetPowerUsage);
    Milliwatts<&GpuSnapshot::power_limit_w>(gpu, "nvmlDeviceGetEnforcedPowerLimit", nvml_.nvmlDeviceGetEnforcedPowerLimit);
    Milliwatts<&GpuSnapshot::power_default_limit_w>(gpu, "nvmlDeviceGetPowerManagementDefaultLimit",
                                                    nvml_.nvmlDeviceGetPowerManagementDefaultLimit);
    Call<&GpuSnapshot::total_energy_mj, unsigned long long>(gpu, "nvmlDeviceGetTotalEnergyConsumption",
                                                            nvml_.nvmlDeviceGetTotalEnergyConsumption);
    Call<&GpuSnapshot::sm_clock_mhz, unsigned>(gpu, "nvmlDeviceGetClockInfo", nvml_.nvmlDeviceGetClockInfo,
                                               int{NVML_CLOCK_SM});
    Call<&GpuSnapshot::memory_clock_mhz, unsigned>(gpu, "nvmlDeviceGetClockInfo", nvml_.nvmlDeviceGetClockInfo,
                                                   int{NVML_CLOCK_MEM});
    if (nvml_.nvmlDeviceGetCurrentClocksEventReasons)
      Call<&GpuSnapshot::clock_event_reasons, unsigned long long>(gpu, "nvmlDeviceGetCurrentClocksEventReasons",
                                                                  nvml_.nvmlDeviceGetCurrentClocksEventReasons);
    else
      Call<&GpuSnapshot::clock_event_reasons, unsigned long long>(gpu, "nvmlDeviceGetCurrentClocksThrottleReasons",
                                                                  nvml_.nvmlDeviceGetCurrentClocksThrottleReasons);
  }

  void ReadUse(GpuFrameEncoder& gpu) {
    if (lost_) {
      gpu.Failed<&GpuSnapshot::utilization_gpu_percent>(lost_message_);
      gpu.Failed<&GpuSnapshot::utilization_memory_percent>(lost_message_);
    } else if (nvml_.nvmlDeviceGetUtilizationRates) {
      nvmlUtilization_t utilization{};
      nvmlReturn_t rc;
      {
        TRACK(slot_, nvmlDeviceGetUtilizationRates);
        rc = nvml_.nvmlDeviceGetUtilizationRates(device_, &utilization);
      }
      Record<&GpuSnapshot::utilization_gpu_percent>(gpu, rc, utilization.gpu);
      Record<&GpuSnapshot::utilization_memory_percent>(gpu, rc, utilization.memory);
    }
    EngineUtilization<&GpuSnapshot::encoder_utilization_percent>(gpu, "nvmlDeviceGetEncoderUtilization",
                                                                 nvml_.nvmlDeviceGetEncoderUtilization);
    EngineUtilization<&GpuSnapshot::decoder_utilization_percent>(gpu, "nvmlDeviceGetDecoderUtilization",
                                                                 nvml_.nvmlDeviceGetDecoderUtilization);
    if (lost_) {
      gpu.Failed<&GpuSnapshot::memory_total_bytes>(lost_message_);
      gpu.Failed<&GpuSnapshot::memory_used_bytes>(lost_message_);
      gpu.Failed<&GpuSnapshot::memory_free_bytes>(lost_message_);
    } else if (nvml_.nvmlDeviceGetMemoryInfo) {
      nvmlMemory_t memory{};
      nvmlReturn_t rc;
      {
        TRACK(slot_, nvmlDeviceGetMemoryInfo);
        rc = nvml_.nvmlDeviceGetMemoryInfo(device_, &memory);
      }
      Record<&GpuSnapshot::memory_total_bytes>(gpu, rc, memory.total);
      Record<&GpuSnapshot::memory_used_bytes>(gpu, rc, memory.used);
      Record<&GpuSnapshot::memory_free_bytes>(gpu, rc, memory.free);
    }
    // Only the versioned call knows the reserved share. Its `used` includes
    // that share, so used and free stay from the call above, as they always were.
    if (FailIfLost<&GpuSnapshot::memory_reserved_bytes>(gpu) || !nvml_.nvmlDeviceGetMemoryInfo_v2) return;
    nvmlMemory_v2_t memory{};
    memory.version = nvmlMemory_v2;
    const nvmlReturn_t rc = CallFor(&memory, "nvmlDeviceGetMemoryInfo_v2", nvml_.nvmlDeviceGetMemoryInfo_v2);
    Record<&GpuSnapshot::memory_reserved_bytes>(gpu, rc, memory.reserved);
  }

  // An engine's utilization; NVML also answers its sampling period, not kept.
  template <auto Member>
  void EngineUtilization(GpuFrameEncoder& gpu, NvmlCall name,
                         nvmlReturn_t (*fn)(nvmlDevice_t, unsigned*, unsigned*)) {
    if (FailIfLost<Member>(gpu) || fn == nullptr) return;
    unsigned percent = 0, period_us = 0;
    nvmlReturn_t rc;
    {
      CallScope scope(slot_, name);
      rc = fn(device_, &percent, &period_us);
    }
    NoteLost(rc);
    Record<Member>(gpu, rc, percent);
  }

  // The GPM readings, in the order of kScalarGpuFields, with what NVML's
  // units become: a percentage a ratio, MiB/s bytes/s.
  struct GpmReading {
    unsigned int metric;
    double scale;
  };
  static constexpr GpmReading kGpmReadings[] = {
      {NVML_GPM_METRIC_GRAPHICS_UTIL, 0.01},          {NVML_GPM_METRIC_SM_UTIL, 0.01},
      {NVML_GPM_METRIC_SM_OCCUPANCY, 0.01},           {NVML_GPM_METRIC_ANY_TENSOR_UTIL, 0.01},
      {NVML_GPM_METRIC_FP64_UTIL, 0.01},              {NVML_GPM_METRIC_FP32_UTIL, 0.01},
      {NVML_GPM_METRIC_FP16_UTIL, 0.01},              {NVML_GPM_METRIC_DRAM_BW_UTIL, 0.01},
      {NVML_GPM_METRIC_PCIE_TX_PER_SEC, kBytesPerMib}, {NVML_GPM_METRIC_PCIE_RX_PER_SEC, kBytesPerMib},
      {NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, kBytesPerMib},
      {NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, kBytesPerMib},
  };
  static constexpr size_t kGpmReadingCount = std::size(kGpmReadings);

  // Writes the GPM values: `values` in the order of kGpmReadings, each NVML's
  // code and the converted value. The members are listed once, here.
  void PutGpmValues(GpuFrameEncoder& gpu, const nvmlReturn_t (&codes)[kGpmReadingCount],
                    const double (&values)[kGpmReadingCount], const std::string& error) {
    size_t i = 0;
    auto put = [&]<auto Member>() {
      const nvmlReturn_t rc = codes[i];
      if (rc == NVML_SUCCESS) gpu.Value<Member>(values[i]);
      else if (rc != NVML_ERROR_NOT_SUPPORTED && rc != NVML_ERROR_FUNCTION_NOT_FOUND)
        gpu.Failed<Member>(error.empty() ? NvmlErrorMessage(rc) : error);
      ++i;
    };
    put.template operator()<&GpuSnapshot::gpm_graphics_active>();
    put.template operator()<&GpuSnapshot::gpm_sm_active>();
    put.template operator()<&GpuSnapshot::gpm_sm_occupancy>();
    put.template operator()<&GpuSnapshot::gpm_tensor_active>();
    put.template operator()<&GpuSnapshot::gpm_fp64_active>();
    put.template operator()<&GpuSnapshot::gpm_fp32_active>();
    put.template operator()<&GpuSnapshot::gpm_fp16_active>();
    put.template operator()<&GpuSnapshot::gpm_dram_active>();
    put.template operator()<&GpuSnapshot::gpm_pcie_tx_bytes_per_second>();
    put.template operator()<&GpuSnapshot::gpm_pcie_rx_bytes_per_second>();
    put.template operator()<&GpuSnapshot::gpm_nvlink_tx_bytes_per_second>();
    put.template operator()<&GpuSnapshot::gpm_nvlink_rx_bytes_per_second>();
  }
  void PutGpmNvLinkTotal(GpuFrameEncoder& gpu, nvmlReturn_t rc, double bytes, const std::string& error) {
    constexpr auto kTotal = &GpuSnapshot::gpm_nvlink_bytes_total;
    if (rc == NVML_SUCCESS) gpu.Value<kTotal>(static_cast<uint64_t>(std::llround(bytes)));
    else if (rc != NVML_ERROR_NOT_SUPPORTED && rc != NVML_ERROR_FUNCTION_NOT_FOUND)
      gpu.Failed<kTotal>(error.empty() ? NvmlErrorMessage(rc) : error);
  }
  // Every GPM value with the same code: left out (not supported) or failed.
  void PutGpmCode(GpuFrameEncoder& gpu, nvmlReturn_t rc, const std::string& error = "") {
    nvmlReturn_t codes[kGpmReadingCount];
    std::fill(std::begin(codes), std::end(codes), rc);
    const double values[kGpmReadingCount] = {};
    PutGpmValues(gpu, codes, values, error);
    PutGpmNvLinkTotal(gpu, rc, 0, error);
  }

  // GPM: whether the GPU has it (asked once per probe), then a sample; with
  // the previous request's sample, the rates between the two. The first
  // sample, or one within kGpmMinimumInterval of the last, gives no values.
  // A GPU that has GPM but refuses a sample (MIG mode, a vGPU) counts as one
  // without it, for as long as it refuses.
  void ReadGpm(GpuFrameEncoder& gpu) {
    if (lost_) {
      gpu.Failed<&GpuSnapshot::gpm_supported>(lost_message_);
      PutGpmCode(gpu, NVML_ERROR_GPU_IS_LOST, lost_message_);
      return;
    }
    if (gpm_ == nullptr) return;
    std::unique_lock lock(gpm_->mutex, std::try_to_lock);
    if (!lock.owns_lock()) return;
    GpmState& state = *gpm_;
    if (!state.support_known) {
      nvmlGpmSupport_t support{};
      support.version = NVML_GPM_SUPPORT_VERSION;
      const nvmlReturn_t rc = CallFor(&support, "nvmlGpmQueryDeviceSupport", nvml_.nvmlGpmQueryDeviceSupport);
      if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_SUPPORTED && rc != NVML_ERROR_FUNCTION_NOT_FOUND) {
        gpu.Failed<&GpuSnapshot::gpm_supported>(NvmlErrorMessage(rc));
        PutGpmCode(gpu, rc);
        return;
      }
      state.support_known = true;
      state.supported = rc == NVML_SUCCESS && support.isSupportedDevice != 0 && nvml_.nvmlGpmSampleAlloc &&
                        nvml_.nvmlGpmSampleGet && nvml_.nvmlGpmMetricsGet;
    }
    if (!state.supported) {
      gpu.Value<&GpuSnapshot::gpm_supported>(false);
      return;
    }
    for (nvmlGpmSample_t* sample : {&state.previous, &state.current}) {
      if (*sample != nullptr) continue;
      nvmlReturn_t rc;
      {
        CallScope scope(slot_, "nvmlGpmSampleAlloc");
        rc = nvml_.nvmlGpmSampleAlloc(sample);
      }
      if (rc != NVML_SUCCESS) {
        *sample = nullptr;
        const std::string message = "cannot allocate a GPM sample: " + NvmlErrorMessage(rc);
        gpu.Value<&GpuSnapshot::gpm_supported>(true);
        PutGpmCode(gpu, NVML_ERROR_UNKNOWN, message);
        return;
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (state.has_previous && now - state.previous_at < kGpmMinimumInterval) {
      gpu.Value<&GpuSnapshot::gpm_supported>(true);
      return;
    }
    nvmlReturn_t rc;
    {
      CallScope scope(slot_, "nvmlGpmSampleGet");
      rc = nvml_.nvmlGpmSampleGet(device_, state.current);
    }
    NoteLost(rc);
    if (rc != NVML_SUCCESS) {
      state.has_previous = false;  // the next sample starts afresh
      if (rc == NVML_ERROR_NOT_SUPPORTED) {
        gpu.Value<&GpuSnapshot::gpm_supported>(false);
      } else {
        gpu.Failed<&GpuSnapshot::gpm_supported>(NvmlErrorMessage(rc));
        PutGpmCode(gpu, rc);
      }
      return;
    }
    gpu.Value<&GpuSnapshot::gpm_supported>(true);
    const bool had_previous = state.has_previous;
    const double seconds = std::chrono::duration<double>(now - state.previous_at).count();
    std::swap(state.previous, state.current);
    state.previous_at = now;
    state.has_previous = true;
    if (!had_previous) return;
    // About 13 KiB: kept per thread rather than on the stack.
    thread_local nvmlGpmMetricsGet_t request;
    request.version = NVML_GPM_METRICS_GET_VERSION;
    request.numMetrics = kGpmReadingCount;
    request.sample1 = state.current;  // the earlier sample, after the swap
    request.sample2 = state.previous;
    for (size_t i = 0; i < kGpmReadingCount; ++i) {
      request.metrics[i] = nvmlGpmMetric_t{};
      request.metrics[i].metricId = kGpmReadings[i].metric;
    }
    {
      CallScope scope(slot_, "nvmlGpmMetricsGet");
      rc = nvml_.nvmlGpmMetricsGet(&request);
    }
    NoteLost(rc);
    if (rc != NVML_SUCCESS) {
      PutGpmCode(gpu, rc == NVML_ERROR_NOT_SUPPORTED ? NVML_ERROR_UNKNOWN : rc,
                 rc == NVML_ERROR_NOT_SUPPORTED ? "GPM metrics: " + NvmlErrorMessage(rc) : "");
      return;
    }
    nvmlReturn_t codes[kGpmReadingCount];
    double values[kGpmReadingCount];
    for (size_t i = 0; i < kGpmReadingCount; ++i) {
      codes[i] = request.metrics[i].nvmlReturn;
      values[i] = request.metrics[i].value * kGpmReadings[i].scale;
    }
    PutGpmValues(gpu, codes, values, "");
    // The last two readings are NVLink's: sent and received.
    const nvmlReturn_t tx = codes[kGpmReadingCount - 2], rx = codes[kGpmReadingCount - 1];
    if (tx == NVML_SUCCESS && rx == NVML_SUCCESS) {
      state.nvlink_bytes += (values[kGpmReadingCount - 2] + values[kGpmReadingCount - 1]) * seconds;
      PutGpmNvLinkTotal(gpu, NVML_SUCCESS, state.nvlink_bytes, "");
    } else {
      PutGpmNvLinkTotal(gpu, tx != NVML_SUCCESS ? tx : rx, 0, "");
    }
  }

  // Asks with room for a few dozen processes first, so one call is enough on
  // nearly every GPU; when NVML says there are more, again with room for them.
  // `infos` keeps its size between calls (the thread reuses it); the first
  // `*found` entries are the answer, none unless NVML succeeded.
  template <typename Info>
  nvmlReturn_t QueryProcesses(NvmlCall name, nvmlReturn_t (*fn)(nvmlDevice_t, unsigned*, Info*),
                              std::vector<Info>* infos, size_t* found) {
    *found = 0;
    if (infos->size() < 32) infos->resize(32);
    nvmlReturn_t rc = NVML_ERROR_UNKNOWN;
    for (int attempt = 0; attempt < 3; ++attempt) {
      unsigned count = static_cast<unsigned>(infos->size());
      {
        CallScope scope(slot_, name);
        rc = fn(device_, &count, infos->data());
      }
      if (rc == NVML_SUCCESS) {
        *found = std::min<size_t>(count, infos->size());
        return rc;
      }
      if (rc != NVML_ERROR_INSUFFICIENT_SIZE || count > 65536) return rc;
      infos->resize(count + 8);  // processes may start between the two calls
    }
    return rc;
  }

  void ReadProcesses(GpuFrameEncoder& gpu) {
    if (lost_) {
      gpu.ProcessesFailed(lost_message_);
      return;
    }
    // Kept by the thread from one GPU to the next, for their memory; named
    // again by reference because a lambda cannot capture a thread_local.
    thread_local std::vector<ProcessInfo> kept;
    std::vector<ProcessInfo>& processes = kept;
    processes.clear();
    nvmlReturn_t rc = NVML_ERROR_FUNCTION_NOT_FOUND;
    auto add = [&processes](unsigned pid, unsigned long long used) {
      ProcessInfo& p = processes.emplace_back();
      p.pid = pid;
      // NVML reports "not available" memory (e.g. without permission) as all ones.
      if (used != ~0ULL) p.used_memory_bytes.SetValue(used);
    };
    size_t found = 0;
    if (nvml_.nvmlDeviceGetComputeRunningProcesses_v3 || nvml_.nvmlDeviceGetComputeRunningProcesses_v2) {
      thread_local std::vector<nvmlProcessInfo_t> infos;
      rc = nvml_.nvmlDeviceGetComputeRunningProcesses_v3
               ? QueryProcesses("nvmlDeviceGetComputeRunningProcesses_v3", nvml_.nvmlDeviceGetComputeRunningProcesses_v3,
                                &infos, &found)
               : QueryProcesses("nvmlDeviceGetComputeRunningProcesses_v2", nvml_.nvmlDeviceGetComputeRunningProcesses_v2,
                                &infos, &found);
      for (size_t i = 0; i < found; ++i) add(infos[i].pid, infos[i].usedGpuMemory);
    } else if (nvml_.nvmlDeviceGetComputeRunningProcesses) {
      thread_local std::vector<nvmlProcessInfoV1_t> infos;
      rc = QueryProcesses("nvmlDeviceGetComputeRunningProcesses", nvml_.nvmlDeviceGetComputeRunningProcesses, &infos,
                          &found);
      for (size_t i = 0; i < found; ++i) add(infos[i].pid, infos[i].usedGpuMemory);
    }
    if (rc == NVML_SUCCESS && nvml_.nvmlSystemGetProcessName) {
      for (auto& p : processes) {
        char name[256];
        name[0] = '\0';
        CallScope scope(slot_, "nvmlSystemGetProcessName");
        if (nvml_.nvmlSystemGetProcessName(p.pid, name, sizeof name) == NVML_SUCCESS)
          p.name = OneLine(std::string_view(name, strnlen(name, sizeof name)));  // any user names a process
      }
    }
    if (rc == NVML_SUCCESS) {
      gpu.Processes(processes);
    } else if (rc != NVML_ERROR_NOT_SUPPORTED && rc != NVML_ERROR_FUNCTION_NOT_FOUND) {
      NoteLost(rc);
      gpu.ProcessesFailed(NvmlErrorMessage(rc));
    }
  }

  void ReadErrors(GpuFrameEncoder& gpu) {
    if (lost_) {
      gpu.Failed<&GpuSnapshot::ecc_enabled>(lost_message_);
    } else if (nvml_.nvmlDeviceGetEccMode) {
      nvmlEnableState_t current = 0, pending = 0;
      nvmlReturn_t rc;
      {
        TRACK(slot_, nvmlDeviceGetEccMode);
        rc = nvml_.nvmlDeviceGetEccMode(device_, &current, &pending);
      }
      Record<&GpuSnapshot::ecc_enabled>(gpu, rc, current == NVML_FEATURE_ENABLED);
    }
    const auto ecc = nvml_.nvmlDeviceGetTotalEccErrors;
    constexpr NvmlCall ecc_name("nvmlDeviceGetTotalEccErrors");
    Call<&GpuSnapshot::ecc_volatile_corrected, unsigned long long>(gpu, ecc_name, ecc, int{NVML_MEMORY_ERROR_TYPE_CORRECTED},
                                                                   int{NVML_VOLATILE_ECC});
    Call<&GpuSnapshot::ecc_volatile_uncorrected, unsigned long long>(gpu, ecc_name, ecc,
                                                                     int{NVML_MEMORY_ERROR_TYPE_UNCORRECTED},
                                                                     int{NVML_VOLATILE_ECC});
    Call<&GpuSnapshot::ecc_aggregate_corrected, unsigned long long>(gpu, ecc_name, ecc,
                                                                    int{NVML_MEMORY_ERROR_TYPE_CORRECTED},
                                                                    int{NVML_AGGREGATE_ECC});
    Call<&GpuSnapshot::ecc_aggregate_uncorrected, unsigned long long>(gpu, ecc_name, ecc,
                                                                      int{NVML_MEMORY_ERROR_TYPE_UNCORRECTED},
                                                                      int{NVML_AGGREGATE_ECC});
    RetiredPages<&GpuSnapshot::retired_pages_sbe>(gpu, NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS);
    RetiredPages<&GpuSnapshot::retired_pages_dbe>(gpu, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR);
    Call<&GpuSnapshot::retired_pages_pending, nvmlEnableState_t>(gpu, "nvmlDeviceGetRetiredPagesPendingStatus",
                                                                 nvml_.nvmlDeviceGetRetiredPagesPendingStatus);
    if (lost_) {
      gpu.Failed<&GpuSnapshot::remapped_rows_correctable>(lost_message_);
      gpu.Failed<&GpuSnapshot::remapped_rows_uncorrectable>(lost_message_);
      gpu.Failed<&GpuSnapshot::remapped_rows_pending>(lost_message_);
      gpu.Failed<&GpuSnapshot::remapped_rows_failure>(lost_message_);
    } else if (nvml_.nvmlDeviceGetRemappedRows) {
      unsigned correctable = 0, uncorrectable = 0, pending = 0, failure = 0;
      nvmlReturn_t rc;
      {
        TRACK(slot_, nvmlDeviceGetRemappedRows);
        rc = nvml_.nvmlDeviceGetRemappedRows(device_, &correctable, &uncorrectable, &pending, &failure);
      }
      Record<&GpuSnapshot::remapped_rows_correctable>(gpu, rc, correctable);
      Record<&GpuSnapshot::remapped_rows_uncorrectable>(gpu, rc, uncorrectable);
      Record<&GpuSnapshot::remapped_rows_pending>(gpu, rc, pending != 0);
      Record<&GpuSnapshot::remapped_rows_failure>(gpu, rc, failure != 0);
    }
  }

  // NVLink fabric registration: the versioned call (with the health mask)
  // first, the original one on drivers without it. A state of "not
  // supported" (no NVSwitch) leaves every fabric field out.
  void ReadFabric(GpuFrameEncoder& gpu) {
    if (lost_) {
      gpu.Failed<&GpuSnapshot::fabric_state>(lost_message_);
      gpu.Failed<&GpuSnapshot::fabric_status>(lost_message_);
      gpu.Failed<&GpuSnapshot::fabric_clique_id>(lost_message_);
      gpu.Failed<&GpuSnapshot::fabric_cluster_uuid>(lost_message_);
      gpu.Failed<&GpuSnapshot::fabric_health_mask>(lost_message_);
      return;
    }
    nvmlGpuFabricInfo_v2_t info{};
    info.version = nvmlGpuFabricInfo_v2;
    bool has_health_mask = true;
    nvmlReturn_t rc = CallFor(&info, "nvmlDeviceGetGpuFabricInfoV", nvml_.nvmlDeviceGetGpuFabricInfoV);
    if (rc == NVML_ERROR_FUNCTION_NOT_FOUND || rc == NVML_ERROR_ARGUMENT_VERSION_MISMATCH) {
      nvmlGpuFabricInfo_t original{};
      rc = CallFor(&original, "nvmlDeviceGetGpuFabricInfo", nvml_.nvmlDeviceGetGpuFabricInfo);
      std::memcpy(info.clusterUuid, original.clusterUuid, sizeof info.clusterUuid);
      info.status = original.status;
      info.cliqueId = original.cliqueId;
      info.state = original.state;
      has_health_mask = false;
    }
    if (rc == NVML_SUCCESS && info.state == NVML_GPU_FABRIC_STATE_NOT_SUPPORTED) rc = NVML_ERROR_NOT_SUPPORTED;
    Record<&GpuSnapshot::fabric_state>(gpu, rc, FabricStateName(info.state));
    Record<&GpuSnapshot::fabric_status>(gpu, rc,
                                        info.status == NVML_SUCCESS ? std::string("success") : NvmlErrorMessage(info.status));
    Record<&GpuSnapshot::fabric_clique_id>(gpu, rc, info.cliqueId);
    Record<&GpuSnapshot::fabric_cluster_uuid>(gpu, rc, HexBytes(info.clusterUuid, sizeof info.clusterUuid));
    if (has_health_mask) Record<&GpuSnapshot::fabric_health_mask>(gpu, rc, info.healthMask);
  }
  static std::string_view FabricStateName(nvmlGpuFabricState_t state) {
    switch (state) {
      case NVML_GPU_FABRIC_STATE_NOT_STARTED: return "not_started";
      case NVML_GPU_FABRIC_STATE_IN_PROGRESS: return "in_progress";
      case NVML_GPU_FABRIC_STATE_COMPLETED: return "completed";
      default: return "unknown";
    }
  }
  static std::string HexBytes(const unsigned char* bytes, size_t size) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string text;
    for (size_t i = 0; i < size; ++i) {
      text.push_back(kDigits[bytes[i] >> 4]);
      text.push_back(kDigits[bytes[i] & 0xf]);
    }
    return text;
  }

  template <auto Member>
  void RetiredPages(GpuFrameEncoder& gpu, int cause) {
    if (FailIfLost<Member>(gpu) || !nvml_.nvmlDeviceGetRetiredPages) return;
    unsigned count = 0;
    nvmlReturn_t rc;
    {
      TRACK(slot_, nvmlDeviceGetRetiredPages);
      rc = nvml_.nvmlDeviceGetRetiredPages(device_, cause, &count, nullptr);
    }
    // With no buffer the driver answers the count, as success or "insufficient size".
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) rc = NVML_SUCCESS;
    Record<Member>(gpu, rc, count);
  }

  // Each link's state and error counters, in the order of VisitNvLinkFields.
  // A link read in full, nearly every one, is written straight from what
  // NVML returned; any other goes through an NvLinkInfo.
  void ReadNvLinks(GpuFrameEncoder& gpu) {
    if (lost_) {
      gpu.NvLinksFailed(lost_message_);
      return;
    }
    if (!nvml_.nvmlDeviceGetNvLinkState) return;
    const auto counter = nvml_.nvmlDeviceGetNvLinkErrorCounter;
    static constexpr int kCounters[4] = {NVML_NVLINK_ERROR_DL_REPLAY, NVML_NVLINK_ERROR_DL_RECOVERY,
                                         NVML_NVLINK_ERROR_DL_CRC_FLIT, NVML_NVLINK_ERROR_DL_CRC_DATA};
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      nvmlEnableState_t active = 0;
      const nvmlReturn_t state = CallFor(&active, "nvmlDeviceGetNvLinkState", nvml_.nvmlDeviceGetNvLinkState, link);
      if (state == NVML_ERROR_INVALID_ARGUMENT || state == NVML_ERROR_NOT_SUPPORTED) break;  // past the last link
      if (lost_) break;  // the GPU went away: its links are reported as lost, not one by one
      uint64_t counts[4] = {};
      nvmlReturn_t codes[4] = {NVML_ERROR_FUNCTION_NOT_FOUND, NVML_ERROR_FUNCTION_NOT_FOUND,
                               NVML_ERROR_FUNCTION_NOT_FOUND, NVML_ERROR_FUNCTION_NOT_FOUND};
      bool all_read = state == NVML_SUCCESS && counter != nullptr;
      if (counter) {
        // One mark for the four calls: a hang in any of them is in this one entry point.
        CallScope scope(slot_, "nvmlDeviceGetNvLinkErrorCounter");
        for (int i = 0; i < 4; ++i) {
          unsigned long long count = 0;
          codes[i] = counter(device_, link, kCounters[i], &count);
          counts[i] = count;
          if (codes[i] == NVML_SUCCESS) continue;
          all_read = false;
          if (codes[i] == NVML_ERROR_GPU_IS_LOST) {  // no more calls to a lost GPU
            NoteLost(codes[i]);
            std::fill(codes + i, codes + 4, NVML_ERROR_GPU_IS_LOST);
            break;
          }
        }
      }
      if (all_read) {
        gpu.NvLink(link, active == NVML_FEATURE_ENABLED, counts);
        continue;
      }
      NvLinkInfo info;
      info.link = link;
      SetField(info.active, state, active == NVML_FEATURE_ENABLED);
      SetField(info.replay_errors, codes[0], counts[0]);
      SetField(info.recovery_errors, codes[1], counts[1]);
      SetField(info.crc_flit_errors, codes[2], counts[2]);
      SetField(info.crc_data_errors, codes[3], counts[3]);
      gpu.NvLink(info);
    }
    gpu.EndNvLinks();
  }
  template <typename T, typename V>
  void SetField(Field<T>& field, nvmlReturn_t rc, V value) {
    if (rc == NVML_SUCCESS) field.SetValue(static_cast<T>(value));
    else if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_FUNCTION_NOT_FOUND) field.SetNotSupported();
    else field.SetFailed(lost_ ? lost_message_ : NvmlErrorMessage(rc));
  }

  const NvmlLibrary& nvml_;
  uint32_t index_;
  std::atomic<uint16_t>* slot_;
  SharedPciId* pci_;
  GpmState* gpm_;
  nvmlDevice_t device_ = nullptr;
  bool lost_ = false;         // NVML said the GPU is lost
  std::string lost_message_;  // ... in these words
};

// Keeps one NVML event set for the life of the probe, so an Xid raised
// between two requests (or as a GPU falls off the bus) is still delivered.
class XidListener {
 public:
  XidListener(const NvmlLibrary& nvml, std::atomic<uint16_t>* slot) : nvml_(nvml), slot_(slot) {}
  ~XidListener() {
    if (set_ && nvml_.nvmlEventSetFree) {
      CallScope scope(slot_, "nvmlEventSetFree");
      nvml_.nvmlEventSetFree(set_);
    }
  }
  XidListener(const XidListener&) = delete;
  XidListener& operator=(const XidListener&) = delete;

  // Registers GPUs not registered yet; a GPU that refuses is tried again next time.
  void Register(const std::vector<std::pair<uint32_t, nvmlDevice_t>>& devices) {
    if (!nvml_.nvmlEventSetCreate || !nvml_.nvmlDeviceRegisterEvents || !Wait()) return;
    if (!set_) {
      CallScope scope(slot_, "nvmlEventSetCreate");
      if (nvml_.nvmlEventSetCreate(&set_) != NVML_SUCCESS) {
        set_ = nullptr;
        return;
      }
    }
    for (const auto& [index, device] : devices) {
      if (registered_.count(device)) continue;
      CallScope scope(slot_, "nvmlDeviceRegisterEvents");
      if (nvml_.nvmlDeviceRegisterEvents(device, nvmlEventTypeXidCriticalError, set_) == NVML_SUCCESS)
        registered_[device] = index;
    }
  }

  // Reports every pending Xid, waiting up to `window` for the first one.
  void Drain(Duration window, FrameWriter& out) {
    if (!set_ || registered_.empty()) return;
    auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(window).count();
    for (int events = 0; events < 10000; ++events) {
      nvmlEventData_t data{};
      nvmlReturn_t rc;
      {
        CallScope scope(slot_, nvml_.nvmlEventSetWait_v2 ? NvmlCall("nvmlEventSetWait_v2") : NvmlCall("nvmlEventSetWait"));
        rc = Wait()(set_, &data, static_cast<unsigned>(timeout));
      }
      if (rc != NVML_SUCCESS) return;  // NVML_ERROR_TIMEOUT: nothing more pending
      timeout = 0;
      auto it = registered_.find(data.device);
      if (!(data.eventType & nvmlEventTypeXidCriticalError) || it == registered_.end()) continue;
      out.Write(XidEvent{it->second, data.eventData, std::chrono::system_clock::now()});
    }
  }

 private:
  decltype(NvmlLibrary::nvmlEventSetWait) Wait() const {
    return nvml_.nvmlEventSetWait_v2 ? nvml_.nvmlEventSetWait_v2 : nvml_.nvmlEventSetWait;
  }

  const NvmlLibrary& nvml_;
  std::atomic<uint16_t>* slot_;
  nvmlEventSet_t set_ = nullptr;
  std::map<nvmlDevice_t, uint32_t> registered_;
};

}  // namespace

const char* NvmlCallName(uint16_t id) { return id < kCallNames.size() ? kCallNames[id] : ""; }

void SharedPciId::Store(std::string_view id) {
  uint64_t words[kMaxLength / 8] = {};
  std::memcpy(words, id.data(), std::min(id.size(), kMaxLength - 1));
  const uint32_t sequence = sequence_.load(std::memory_order_relaxed);
  sequence_.store(sequence + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (size_t i = 0; i < std::size(words); ++i) words_[i].store(words[i], std::memory_order_relaxed);
  sequence_.store(sequence + 2, std::memory_order_release);
}

std::string SharedPciId::Load() const {
  const uint32_t before = sequence_.load(std::memory_order_acquire);
  if (before & 1) return "";
  uint64_t words[kMaxLength / 8];
  for (size_t i = 0; i < std::size(words); ++i) words[i] = words_[i].load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (sequence_.load(std::memory_order_relaxed) != before) return "";
  const auto* bytes = reinterpret_cast<const char*>(words);
  return std::string(bytes, strnlen(bytes, sizeof words));
}

namespace {

// Reads request frames; false at the end of input or on a garbled stream.
class RequestReader {
 public:
  explicit RequestReader(int fd) : fd_(fd) {}
  bool Next(ProbeRequest* request) {
    while (true) {
      if (auto payload = frames_.Next()) {
        ProbeMessage message;
        if (!DecodeProbeMessage(*payload, message).ok() || !std::holds_alternative<ProbeRequest>(message)) return false;
        *request = std::get<ProbeRequest>(std::move(message));
        return true;
      }
      if (frames_.corrupt()) return false;
      ssize_t n = frames_.ReadFrom(fd_, 4096);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
    }
  }

 private:
  int fd_;
  ProbeFrameBuffer frames_;
};

// Threads that each read one GPU during a rescue. A helper stays for later
// rescues; one that is stuck in the driver keeps only what its job holds, so
// the probe can exit without waiting for it.
class RescueHelpers {
 public:
  RescueHelpers() = default;
  RescueHelpers(const RescueHelpers&) = delete;
  RescueHelpers& operator=(const RescueHelpers&) = delete;
  ~RescueHelpers() {
    for (auto& [index, mailbox] : mailboxes_) {
      std::lock_guard lock(mailbox->mutex);
      mailbox->stopping = true;
      mailbox->ready.notify_one();
    }
  }

  // Runs `job` on the helper of GPU `index`, after any job it is still doing.
  void Post(uint32_t index, std::function<void()> job) {
    auto& mailbox = mailboxes_[index];
    if (!mailbox) {
      mailbox = std::make_shared<Mailbox>();
      std::thread([box = mailbox] { Loop(*box); }).detach();
    }
    std::lock_guard lock(mailbox->mutex);
    mailbox->jobs.push_back(std::move(job));
    mailbox->ready.notify_one();
  }

 private:
  struct Mailbox {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<std::function<void()>> jobs;
    bool stopping = false;
  };

  static void Loop(Mailbox& box) {
    std::unique_lock lock(box.mutex);
    while (true) {
      box.ready.wait(lock, [&] { return box.stopping || !box.jobs.empty(); });
      if (box.stopping) return;
      std::function<void()> job = std::move(box.jobs.front());
      box.jobs.pop_front();
      lock.unlock();
      job();
      job = nullptr;  // drop what the job holds before sleeping
      lock.lock();
    }
  }

  std::map<uint32_t, std::shared_ptr<Mailbox>> mailboxes_;  // only the rescue thread posts
};

// One request being answered: its GPUs, which of them have been claimed, and
// how many are still being read. Whoever finishes the last GPU ends it.
struct Round {
  uint32_t sequence = 0;
  Duration event_window{};
  std::vector<uint32_t> indices;
  std::atomic<size_t> next{0};     // position in `indices` of the next GPU to claim
  std::atomic<size_t> pending{0};  // GPUs not read yet
  std::mutex devices_mutex;
  std::vector<std::pair<uint32_t, nvmlDevice_t>> devices;  // handles for the Xid listener
};

class Server : public std::enable_shared_from_this<Server> {
 public:
  // `tracker` is never null (RunProbe gives one of its own when nobody watches).
  Server(const NvmlLibrary& nvml, int output_fd, CallTracker* tracker)
      : nvml_(nvml), out_(output_fd), tracker_(tracker), xids_(nvml, HostSlot()) {}
  // Frees the GPM samples no thread is using; runs before NVML shuts down.
  ~Server() {
    if (!nvml_.nvmlGpmSampleFree) return;
    for (auto& [index, state] : gpm_) {
      std::unique_lock lock(state->mutex, std::try_to_lock);
      if (!lock.owns_lock()) continue;
      for (nvmlGpmSample_t sample : {state->previous, state->current})
        if (sample != nullptr) nvml_.nvmlGpmSampleFree(sample);
    }
  }

  // Answers one request on the calling thread, reading the GPUs in turn.
  // Returns once the GPUs it claimed are read; after a rescue, the helpers may
  // still be reading the rest, and the last of them ends the request.
  void Serve(const ProbeRequest& request, uint32_t sequence) {
    auto round = std::make_shared<Round>();
    round->sequence = sequence;
    round->event_window = request.event_window;
    // Everything goes out in one write unless a rescue flushes it earlier.
    out_.BeginBatch();
    {
      std::lock_guard lock(round_mutex_);
      round_ = round;
    }
    const uint32_t count = ReadHost();
    for (uint32_t index = 0; index < count; ++index)
      if (!request.skip_gpus.count(index)) round->indices.push_back(index);
    round->pending.store(round->indices.size());
    if (round->indices.empty()) {
      Finish(*round);
      return;
    }
    for (size_t at; (at = round->next.fetch_add(1)) < round->indices.size();) ReadGpu(round, round->indices[at]);
  }

  // Hands every GPU of request `sequence` not yet claimed to a helper thread
  // each, and sends what has been gathered so far. Later frames go out as they
  // come. Does nothing when that request is over.
  void Rescue(uint32_t sequence) {
    std::shared_ptr<Round> round;
    {
      std::lock_guard lock(round_mutex_);
      round = round_;
    }
    if (!round || round->sequence != sequence || round->pending.load() == 0) return;
    out_.EndBatch();
    const size_t size = round->indices.size();
    for (size_t at = std::min(round->next.exchange(size), size); at < size; ++at) {
      const uint32_t index = round->indices[at];
      helpers_.Post(index, [self = shared_from_this(), round, index] { self->ReadGpu(round, index); });
    }
  }

 private:
  std::atomic<uint16_t>* HostSlot() const { return &tracker_->host_call; }

  // Sends the host frame and returns how many GPUs there are (0 when unknown).
  uint32_t ReadHost() {
    std::atomic<uint16_t>* host_slot = HostSlot();
    ProbeHost host;
    auto version_string = [&](NvmlCall name, nvmlReturn_t (*fn)(char*, unsigned)) {
      if (!fn) return Field<std::string>::NotSupported();
      char buffer[96] = {};
      CallScope scope(host_slot, name);
      nvmlReturn_t code = fn(buffer, sizeof buffer);
      if (code == NVML_SUCCESS) return Field<std::string>::Value(std::string(buffer, strnlen(buffer, sizeof buffer)));
      if (code == NVML_ERROR_NOT_SUPPORTED) return Field<std::string>::NotSupported();
      return Field<std::string>::Failed(NvmlErrorMessage(code));
    };
    host.driver_version = version_string("nvmlSystemGetDriverVersion", nvml_.nvmlSystemGetDriverVersion);
    host.nvml_version = version_string("nvmlSystemGetNVMLVersion", nvml_.nvmlSystemGetNVMLVersion);
    {
      int cuda = 0;
      CallScope scope(host_slot, nvml_.nvmlSystemGetCudaDriverVersion_v2 ? NvmlCall("nvmlSystemGetCudaDriverVersion_v2")
                                                                         : NvmlCall("nvmlSystemGetCudaDriverVersion"));
      nvmlReturn_t code = nvml_.CudaDriverVersion(&cuda);
      host.cuda_driver_version = code == NVML_SUCCESS ? Field<int32_t>::Value(cuda)
                                 : (code == NVML_ERROR_NOT_SUPPORTED || code == NVML_ERROR_FUNCTION_NOT_FOUND)
                                     ? Field<int32_t>::NotSupported()
                                     : Field<int32_t>::Failed(NvmlErrorMessage(code));
    }
    unsigned count = 0;
    nvmlReturn_t rc;
    {
      CallScope scope(host_slot, nvml_.nvmlDeviceGetCount_v2 ? NvmlCall("nvmlDeviceGetCount_v2") : NvmlCall("nvmlDeviceGetCount"));
      rc = nvml_.DeviceCount(&count);
    }
    if (rc != NVML_SUCCESS) {
      host.device_count = Field<uint32_t>::Failed(NvmlErrorMessage(rc));
      count = 0;
    } else if (count > kMaxGpuCount) {
      host.device_count = Field<uint32_t>::Failed(ImpossibleGpuCountMessage(count));
      count = 0;
    } else {
      host.device_count = Field<uint32_t>::Value(count);
    }
    out_.Write(host);
    return count;
  }

  void ReadGpu(const std::shared_ptr<Round>& round, uint32_t index) {
    tracker_->gpus_started.fetch_add(1, std::memory_order_release);
    // A GPU beyond what the tracker holds is read all the same, its calls unwatched.
    static std::atomic<uint16_t> unwatched_call{0};
    const bool tracked = index < CallTracker::kMaxGpus;
    GpuReader reader(nvml_, index, tracked ? &tracker_->gpu_call[index] : &unwatched_call,
                     tracked ? &tracker_->gpu_pci[index] : nullptr, Gpm(index));
    // Encoded on this thread's own buffer, so the writer's lock is held only to append it.
    thread_local std::string frame;
    frame.clear();
    reader.Read(frame);
    out_.WriteEncoded(frame);
    if (nvmlDevice_t device = reader.device()) {
      std::lock_guard lock(round->devices_mutex);
      round->devices.emplace_back(index, device);
    }
    if (round->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish(*round);
  }

  // What is kept of GPU `index`'s GPM; made on first use, never removed.
  GpmState* Gpm(uint32_t index) {
    std::lock_guard lock(gpm_mutex_);
    std::unique_ptr<GpmState>& state = gpm_[index];
    if (!state) state = std::make_unique<GpmState>();
    return state.get();
  }

  // Reports pending Xids and ends the request.
  void Finish(Round& round) {
    {
      std::lock_guard lock(xids_mutex_);
      std::lock_guard devices_lock(round.devices_mutex);
      xids_.Register(round.devices);
      xids_.Drain(round.event_window, out_);
    }
    out_.Write(ProbeDone{});
    out_.EndBatch();
  }

  const NvmlLibrary& nvml_;
  FrameWriter out_;
  CallTracker* tracker_;
  std::mutex xids_mutex_;
  XidListener xids_;
  std::mutex round_mutex_;
  std::shared_ptr<Round> round_;  // the request being answered, or the last one
  RescueHelpers helpers_;
  std::mutex gpm_mutex_;
  std::map<uint32_t, std::unique_ptr<GpmState>> gpm_;  // by GPU index
};

}  // namespace

int RunProbe(const std::string& library_path, int input_fd, int output_fd, int rescue_fd, CallTracker* tracker) {
  // Without a parent watching (a probe run by hand), calls are marked in a
  // tracker nobody reads; it outlives any thread still stuck in NVML at exit.
  static CallTracker unwatched;
  if (!tracker) tracker = &unwatched;
  RequestReader requests(input_fd);
  std::atomic<uint16_t>* host_slot = &tracker->host_call;
  ProbeRequest request;
  if (!requests.Next(&request)) return 0;

  auto loaded = NvmlLibrary::Load(library_path);
  if (!loaded) {
    FrameWriter(output_fd).Write(ProbeInitFailed{AccessError::kLibraryNotFound, loaded.error().message});
    return 0;
  }
  const NvmlLibrary& nvml = **loaded;
  nvmlReturn_t rc;
  {
    CallScope scope(host_slot, nvml.nvmlInit_v2 ? NvmlCall("nvmlInit_v2") : NvmlCall("nvmlInit"));
    rc = nvml.Init();
  }
  if (rc != NVML_SUCCESS) {
    AccessError error = AccessErrorForNvml(rc);
    FrameWriter(output_fd).Write(ProbeInitFailed{error == AccessError::kNone ? AccessError::kOther : error,
                                                 "NVML failed to initialise: " + NvmlErrorMessage(rc)});
    return 0;
  }
  {
    // Shared with the rescue thread, which may outlive this scope: it sleeps
    // in read() until the process exits.
    auto server = std::make_shared<Server>(nvml, output_fd, tracker);
    if (rescue_fd >= 0) {
      std::thread([rescue_fd, weak = std::weak_ptr<Server>(server)] {
        uint32_t sequence = 0;
        while (::read(rescue_fd, &sequence, sizeof sequence) == static_cast<ssize_t>(sizeof sequence)) {
          if (auto alive = weak.lock()) alive->Rescue(sequence);
        }
      }).detach();
    }
    uint32_t sequence = 0;
    do {
      server->Serve(request, ++sequence);
    } while (requests.Next(&request));
  }
  if (nvml.nvmlShutdown) {
    CallScope scope(host_slot, "nvmlShutdown");
    nvml.nvmlShutdown();
  }
  return 0;
}

namespace {

// Ends the process once `parent` is no longer its parent. Polled: PR_SET_PDEATHSIG follows the thread that
// spawned the probe, not the process, and a collector may spawn from a thread that ends before it does.
void EndWithParent(pid_t parent) {
  if (getppid() != parent) _exit(0);
  std::thread([parent] {
    while (getppid() == parent) std::this_thread::sleep_for(std::chrono::seconds(1));
    _exit(0);
  }).detach();
}

}  // namespace

int RunProbeCommandLine(int argc, char** argv) {
  std::string library;
  CallTracker* tracker = nullptr;
  int rescue_fd = -1;
  int first = argc >= 2 && std::string_view(argv[1]) == "__probe" ? 2 : 1;
  for (int i = first; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    const std::string_view value = argv[i + 1];
    if (flag == "--nvml-lib") {
      library = value;
    } else if (flag == "--tracker-fd") {
      const int fd = ParseInt<int>(value).value_or(-1);
      void* memory = fd >= 0 ? mmap(nullptr, sizeof(CallTracker), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
      if (memory != MAP_FAILED) tracker = static_cast<CallTracker*>(memory);
    } else if (flag == "--rescue-fd") {
      rescue_fd = ParseInt<int>(value).value_or(-1);
    } else if (flag == "--parent-pid") {
      if (auto parent = ParseInt<pid_t>(value); parent && *parent > 0) EndWithParent(*parent);
    }
  }
  return RunProbe(library, STDIN_FILENO, STDOUT_FILENO, rescue_fd, tracker);
}

std::string ProbeExecutableBeside(const std::string& gpudoctor_path) {
  const size_t slash = gpudoctor_path.rfind('/');
  if (slash == std::string::npos) return gpudoctor_path;
  const std::string probe = gpudoctor_path.substr(0, slash + 1) + "gpudoctor-probe";
  return access(probe.c_str(), X_OK) == 0 ? probe : gpudoctor_path;
}

}  // namespace gpudoctor
