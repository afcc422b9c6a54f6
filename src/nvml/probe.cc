#include "nvml/probe.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "nvml/nvml_library.h"

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

// Marks which NVML call a thread is inside for as long as it lives.
class CallScope {
 public:
  CallScope(std::atomic<uint16_t>* slot, NvmlCall call) : slot_(slot) {
    if (slot_) slot_->store(call.id, std::memory_order_release);
  }
  ~CallScope() {
    if (slot_) slot_->store(0, std::memory_order_release);
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  std::atomic<uint16_t>* slot_;
};

#define TRACK(slot, name) CallScope scope_##name(slot, NvmlCall(#name))

// Reads one GPU. Stops early when the GPU turns out to be lost: every further
// call would fail the same way, and a lost GPU is where drivers hang.
class GpuReader {
 public:
  // `on_identity` is told the GPU's PCI id as soon as it is known, so a GPU
  // that hangs later can still be named by its bus id.
  GpuReader(const NvmlLibrary& nvml, uint32_t index, std::atomic<uint16_t>* slot,
            std::function<void(const GpuSnapshot&)> on_identity)
      : nvml_(nvml), slot_(slot), on_identity_(std::move(on_identity)) {
    gpu_.index = index;
  }

  // Reads the GPU once; the snapshot lives as long as the reader.
  const GpuSnapshot& Read() {
    nvmlReturn_t rc;
    {
      CallScope scope(slot_, nvml_.nvmlDeviceGetHandleByIndex_v2 ? NvmlCall("nvmlDeviceGetHandleByIndex_v2")
                                                                 : NvmlCall("nvmlDeviceGetHandleByIndex"));
      rc = nvml_.HandleByIndex(gpu_.index, &device_);
    }
    if (rc != NVML_SUCCESS) {
      device_ = nullptr;
      gpu_.access_error = AccessErrorForNvml(rc);
      if (gpu_.access_error == AccessError::kNone || gpu_.access_error == AccessError::kOther)
        gpu_.access_error = AccessError::kUnknown;
      gpu_.access_message = "cannot get a handle for GPU " + std::to_string(gpu_.index) + ": " + NvmlErrorMessage(rc);
      return gpu_;
    }
    ReadIdentity();
    ReadPcie();
    if (on_identity_) on_identity_(gpu_);
    ReadThermal();
    ReadPower();
    ReadUse();
    ReadErrors();
    ReadNvLinks();
    return gpu_;
  }

  // The handle Read() obtained; null when it could not get one.
  nvmlDevice_t device() const { return device_; }

 private:
  bool lost() const { return gpu_.access_error == AccessError::kGpuLost; }

  // Sets `field` from a return code; `value` is used on success. Fields are
  // set in place: a GPU has over a hundred, read on every request.
  template <typename T, typename V>
  void Set(Field<T>& field, nvmlReturn_t rc, V&& value) {
    if (rc == NVML_SUCCESS) {
      field.SetValue(std::forward<V>(value));
    } else if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_FUNCTION_NOT_FOUND) {
      field.SetNotSupported();
    } else {
      if (rc == NVML_ERROR_GPU_IS_LOST && !lost()) {
        gpu_.access_error = AccessError::kGpuLost;
        gpu_.access_message = NvmlErrorMessage(rc);
      }
      field.SetFailed(NvmlErrorMessage(rc));
    }
  }
  // Marks a field the lost GPU cannot give; true when the GPU is lost.
  template <typename T>
  bool FailIfLost(Field<T>& field) {
    if (!lost()) return false;
    field.SetFailed(gpu_.access_message);
    return true;
  }

  // Calls fn(device, args..., &out) through an optional pointer, tracking the
  // call, and sets `field` from what it returns.
  template <typename Out, typename T, typename Fn, typename... Args>
  void Call(Field<T>& field, NvmlCall name, Fn fn, Args... args) {
    if (FailIfLost(field)) return;
    if (fn == nullptr) {
      field.SetNotSupported();
      return;
    }
    Out out{};
    nvmlReturn_t rc;
    {
      CallScope scope(slot_, name);
      rc = fn(device_, args..., &out);
    }
    Set(field, rc, static_cast<T>(out));
  }

  void String(Field<std::string>& field, NvmlCall name, nvmlReturn_t (*fn)(nvmlDevice_t, char*, unsigned int)) {
    if (FailIfLost(field)) return;
    if (fn == nullptr) {
      field.SetNotSupported();
      return;
    }
    char buffer[256] = {};
    nvmlReturn_t rc;
    {
      CallScope scope(slot_, name);
      rc = fn(device_, buffer, sizeof buffer);
    }
    Set(field, rc, std::string(buffer, strnlen(buffer, sizeof buffer)));
  }

  void ReadIdentity() {
    String(gpu_.name, "nvmlDeviceGetName", nvml_.nvmlDeviceGetName);
    String(gpu_.uuid, "nvmlDeviceGetUUID", nvml_.nvmlDeviceGetUUID);
    String(gpu_.serial, "nvmlDeviceGetSerial", nvml_.nvmlDeviceGetSerial);
    String(gpu_.board_part_number, "nvmlDeviceGetBoardPartNumber", nvml_.nvmlDeviceGetBoardPartNumber);
    String(gpu_.vbios_version, "nvmlDeviceGetVbiosVersion", nvml_.nvmlDeviceGetVbiosVersion);
    Call<nvmlEnableState_t>(gpu_.persistence_mode, "nvmlDeviceGetPersistenceMode", nvml_.nvmlDeviceGetPersistenceMode);
  }

  void ReadPcie() {
    if (!lost()) {
      std::string bus_id;
      nvmlReturn_t rc;
      {
        CallScope scope(slot_, nvml_.nvmlDeviceGetPciInfo_v3   ? NvmlCall("nvmlDeviceGetPciInfo_v3")
                                          : nvml_.nvmlDeviceGetPciInfo_v2 ? NvmlCall("nvmlDeviceGetPciInfo_v2")
                                                                          : NvmlCall("nvmlDeviceGetPciInfo"));
        rc = nvml_.PciBusId(device_, &bus_id);
      }
      Set(gpu_.pci_bus_id, rc, bus_id);
    } else {
      gpu_.pci_bus_id = Field<std::string>::Failed(gpu_.access_message);
    }
    Call<unsigned>(gpu_.pcie_generation_current, "nvmlDeviceGetCurrPcieLinkGeneration", nvml_.nvmlDeviceGetCurrPcieLinkGeneration);
    Call<unsigned>(gpu_.pcie_generation_max, "nvmlDeviceGetMaxPcieLinkGeneration", nvml_.nvmlDeviceGetMaxPcieLinkGeneration);
    Call<unsigned>(gpu_.pcie_width_current, "nvmlDeviceGetCurrPcieLinkWidth", nvml_.nvmlDeviceGetCurrPcieLinkWidth);
    Call<unsigned>(gpu_.pcie_width_max, "nvmlDeviceGetMaxPcieLinkWidth", nvml_.nvmlDeviceGetMaxPcieLinkWidth);
    Call<unsigned>(gpu_.pcie_replay_count, "nvmlDeviceGetPcieReplayCounter", nvml_.nvmlDeviceGetPcieReplayCounter);
  }

  void ReadThermal() {
    const auto get_temp = nvml_.nvmlDeviceGetTemperature;
    Call<unsigned>(gpu_.temperature_c, "nvmlDeviceGetTemperature", get_temp, int{NVML_TEMPERATURE_GPU});
    const auto threshold = nvml_.nvmlDeviceGetTemperatureThreshold;
    Call<unsigned>(gpu_.temperature_shutdown_c, "nvmlDeviceGetTemperatureThreshold", threshold, int{NVML_TEMPERATURE_THRESHOLD_SHUTDOWN});
    Call<unsigned>(gpu_.temperature_slowdown_c, "nvmlDeviceGetTemperatureThreshold", threshold, int{NVML_TEMPERATURE_THRESHOLD_SLOWDOWN});
    Call<unsigned>(gpu_.temperature_max_operating_c, "nvmlDeviceGetTemperatureThreshold", threshold, int{NVML_TEMPERATURE_THRESHOLD_GPU_MAX});
    ReadMemoryTemperature();
    ReadFans();
  }

  void ReadMemoryTemperature() {
    if (lost()) {
      gpu_.memory_temperature_c = Field<uint32_t>::Failed(gpu_.access_message);
      return;
    }
    if (!nvml_.nvmlDeviceGetFieldValues) return;
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
    Set(gpu_.memory_temperature_c, rc, celsius);
  }

  void ReadFans() {
    if (lost()) {
      gpu_.fan_speeds_percent = Field<std::vector<uint32_t>>::Failed(gpu_.access_message);
      return;
    }
    std::vector<uint32_t> speeds;
    Field<uint32_t> fan_count;
    Call<unsigned>(fan_count, "nvmlDeviceGetNumFans", nvml_.nvmlDeviceGetNumFans);
    if (fan_count.has_value() && nvml_.nvmlDeviceGetFanSpeed_v2) {
      for (uint32_t fan = 0; fan < fan_count.value() && fan < 64; ++fan) {
        Field<uint32_t> speed;
        Call<unsigned>(speed, "nvmlDeviceGetFanSpeed_v2", nvml_.nvmlDeviceGetFanSpeed_v2, fan);
        if (!speed.has_value()) {
          gpu_.fan_speeds_percent = speed.failed() ? Field<std::vector<uint32_t>>::Failed(speed.error())
                                                   : Field<std::vector<uint32_t>>::NotSupported();
          return;
        }
        speeds.push_back(speed.value());
      }
      gpu_.fan_speeds_percent = Field<std::vector<uint32_t>>::Value(std::move(speeds));
      return;
    }
    if (fan_count.has_value() && fan_count.value() == 0) return;  // no fans: liquid or passive cooling
    Field<uint32_t> speed;
    Call<unsigned>(speed, "nvmlDeviceGetFanSpeed", nvml_.nvmlDeviceGetFanSpeed);
    if (speed.has_value()) gpu_.fan_speeds_percent = Field<std::vector<uint32_t>>::Value({speed.value()});
    else if (speed.failed()) gpu_.fan_speeds_percent = Field<std::vector<uint32_t>>::Failed(speed.error());
  }

  // NVML reports power in milliwatts; the model holds watts.
  void Milliwatts(Field<double>& watts, NvmlCall name, nvmlReturn_t (*fn)(nvmlDevice_t, unsigned*)) {
    Field<uint32_t> milliwatts;
    Call<unsigned>(milliwatts, name, fn);
    if (milliwatts.has_value()) watts.SetValue(milliwatts.value() / 1000.0);
    else if (milliwatts.failed()) watts.SetFailed(milliwatts.error());
    else watts.SetNotSupported();
  }

  void ReadPower() {
    Milliwatts(gpu_.power_draw_w, "nvmlDeviceGetPowerUsage", nvml_.nvmlDeviceGetPowerUsage);
    Milliwatts(gpu_.power_limit_w, "nvmlDeviceGetEnforcedPowerLimit", nvml_.nvmlDeviceGetEnforcedPowerLimit);
    Milliwatts(gpu_.power_default_limit_w, "nvmlDeviceGetPowerManagementDefaultLimit",
               nvml_.nvmlDeviceGetPowerManagementDefaultLimit);
    Call<unsigned>(gpu_.sm_clock_mhz, "nvmlDeviceGetClockInfo", nvml_.nvmlDeviceGetClockInfo, int{NVML_CLOCK_SM});
    Call<unsigned>(gpu_.memory_clock_mhz, "nvmlDeviceGetClockInfo", nvml_.nvmlDeviceGetClockInfo, int{NVML_CLOCK_MEM});
    if (nvml_.nvmlDeviceGetCurrentClocksEventReasons)
      Call<unsigned long long>(gpu_.clock_event_reasons, "nvmlDeviceGetCurrentClocksEventReasons", nvml_.nvmlDeviceGetCurrentClocksEventReasons);
    else
      Call<unsigned long long>(gpu_.clock_event_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons", nvml_.nvmlDeviceGetCurrentClocksThrottleReasons);
  }

  void ReadUse() {
    if (lost() || !nvml_.nvmlDeviceGetUtilizationRates) {
      gpu_.utilization_gpu_percent = gpu_.utilization_memory_percent =
          lost() ? Field<uint32_t>::Failed(gpu_.access_message) : Field<uint32_t>::NotSupported();
    } else {
      nvmlUtilization_t utilization{};
      nvmlReturn_t rc;
      {
        TRACK(slot_, nvmlDeviceGetUtilizationRates);
        rc = nvml_.nvmlDeviceGetUtilizationRates(device_, &utilization);
      }
      Set(gpu_.utilization_gpu_percent, rc, utilization.gpu);
      Set(gpu_.utilization_memory_percent, rc, utilization.memory);
    }
    if (lost() || !nvml_.nvmlDeviceGetMemoryInfo) {
      auto state = lost() ? Field<uint64_t>::Failed(gpu_.access_message) : Field<uint64_t>::NotSupported();
      gpu_.memory_total_bytes = gpu_.memory_used_bytes = gpu_.memory_free_bytes = state;
    } else {
      nvmlMemory_t memory{};
      nvmlReturn_t rc;
      {
        TRACK(slot_, nvmlDeviceGetMemoryInfo);
        rc = nvml_.nvmlDeviceGetMemoryInfo(device_, &memory);
      }
      Set(gpu_.memory_total_bytes, rc, memory.total);
      Set(gpu_.memory_used_bytes, rc, memory.used);
      Set(gpu_.memory_free_bytes, rc, memory.free);
    }
    ReadProcesses();
  }

  // Asks for the process list twice at most: once for the count, once with room.
  template <typename Info>
  nvmlReturn_t QueryProcesses(NvmlCall name, nvmlReturn_t (*fn)(nvmlDevice_t, unsigned*, Info*),
                              std::vector<Info>* infos) {
    unsigned count = 0;
    nvmlReturn_t rc;
    for (int attempt = 0; attempt < 3; ++attempt) {
      infos->resize(count);
      unsigned capacity = count;
      {
        CallScope scope(slot_, name);
        rc = fn(device_, &capacity, infos->empty() ? nullptr : infos->data());
      }
      if (rc == NVML_SUCCESS) {
        infos->resize(std::min<size_t>(capacity, infos->size()));
        return rc;
      }
      if (rc != NVML_ERROR_INSUFFICIENT_SIZE) return rc;
      count = capacity + 8;  // processes may start between the two calls
    }
    return rc;
  }

  void ReadProcesses() {
    if (lost()) {
      gpu_.processes = Field<std::vector<ProcessInfo>>::Failed(gpu_.access_message);
      return;
    }
    std::vector<ProcessInfo> processes;
    nvmlReturn_t rc = NVML_ERROR_FUNCTION_NOT_FOUND;
    auto add = [&processes](unsigned pid, unsigned long long used) {
      ProcessInfo p;
      p.pid = pid;
      // NVML reports "not available" memory (e.g. without permission) as all ones.
      p.used_memory_bytes = used == ~0ULL ? Field<uint64_t>::NotSupported() : Field<uint64_t>::Value(used);
      processes.push_back(std::move(p));
    };
    if (nvml_.nvmlDeviceGetComputeRunningProcesses_v3 || nvml_.nvmlDeviceGetComputeRunningProcesses_v2) {
      std::vector<nvmlProcessInfo_t> infos;
      rc = nvml_.nvmlDeviceGetComputeRunningProcesses_v3
               ? QueryProcesses("nvmlDeviceGetComputeRunningProcesses_v3", nvml_.nvmlDeviceGetComputeRunningProcesses_v3, &infos)
               : QueryProcesses("nvmlDeviceGetComputeRunningProcesses_v2", nvml_.nvmlDeviceGetComputeRunningProcesses_v2, &infos);
      for (const auto& info : infos) add(info.pid, info.usedGpuMemory);
    } else if (nvml_.nvmlDeviceGetComputeRunningProcesses) {
      std::vector<nvmlProcessInfoV1_t> infos;
      rc = QueryProcesses("nvmlDeviceGetComputeRunningProcesses", nvml_.nvmlDeviceGetComputeRunningProcesses, &infos);
      for (const auto& info : infos) add(info.pid, info.usedGpuMemory);
    }
    if (rc == NVML_SUCCESS && nvml_.nvmlSystemGetProcessName) {
      for (auto& p : processes) {
        char name[256] = {};
        CallScope scope(slot_, "nvmlSystemGetProcessName");
        if (nvml_.nvmlSystemGetProcessName(p.pid, name, sizeof name) == NVML_SUCCESS)
          p.name = std::string(name, strnlen(name, sizeof name));
      }
    }
    Set(gpu_.processes, rc, std::move(processes));
  }

  void ReadErrors() {
    if (!lost() && nvml_.nvmlDeviceGetEccMode) {
      nvmlEnableState_t current = 0, pending = 0;
      nvmlReturn_t rc;
      {
        TRACK(slot_, nvmlDeviceGetEccMode);
        rc = nvml_.nvmlDeviceGetEccMode(device_, &current, &pending);
      }
      Set(gpu_.ecc_enabled, rc, current == NVML_FEATURE_ENABLED);
    } else if (lost()) {
      gpu_.ecc_enabled = Field<bool>::Failed(gpu_.access_message);
    }
    const auto ecc = nvml_.nvmlDeviceGetTotalEccErrors;
    constexpr NvmlCall ecc_name("nvmlDeviceGetTotalEccErrors");
    Call<unsigned long long>(gpu_.ecc_volatile_corrected, ecc_name, ecc, int{NVML_MEMORY_ERROR_TYPE_CORRECTED}, int{NVML_VOLATILE_ECC});
    Call<unsigned long long>(gpu_.ecc_volatile_uncorrected, ecc_name, ecc, int{NVML_MEMORY_ERROR_TYPE_UNCORRECTED}, int{NVML_VOLATILE_ECC});
    Call<unsigned long long>(gpu_.ecc_aggregate_corrected, ecc_name, ecc, int{NVML_MEMORY_ERROR_TYPE_CORRECTED}, int{NVML_AGGREGATE_ECC});
    Call<unsigned long long>(gpu_.ecc_aggregate_uncorrected, ecc_name, ecc, int{NVML_MEMORY_ERROR_TYPE_UNCORRECTED}, int{NVML_AGGREGATE_ECC});
    RetiredPages(gpu_.retired_pages_sbe, NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS);
    RetiredPages(gpu_.retired_pages_dbe, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR);
    Call<nvmlEnableState_t>(gpu_.retired_pages_pending, "nvmlDeviceGetRetiredPagesPendingStatus", nvml_.nvmlDeviceGetRetiredPagesPendingStatus);
    if (!lost() && nvml_.nvmlDeviceGetRemappedRows) {
      unsigned correctable = 0, uncorrectable = 0, pending = 0, failure = 0;
      nvmlReturn_t rc;
      {
        TRACK(slot_, nvmlDeviceGetRemappedRows);
        rc = nvml_.nvmlDeviceGetRemappedRows(device_, &correctable, &uncorrectable, &pending, &failure);
      }
      Set(gpu_.remapped_rows_correctable, rc, correctable);
      Set(gpu_.remapped_rows_uncorrectable, rc, uncorrectable);
      Set(gpu_.remapped_rows_pending, rc, pending != 0);
      Set(gpu_.remapped_rows_failure, rc, failure != 0);
    } else if (lost()) {
      auto state = Field<uint32_t>::Failed(gpu_.access_message);
      gpu_.remapped_rows_correctable = gpu_.remapped_rows_uncorrectable = state;
      gpu_.remapped_rows_pending = gpu_.remapped_rows_failure = Field<bool>::Failed(gpu_.access_message);
    }
  }

  void RetiredPages(Field<uint32_t>& pages, int cause) {
    if (FailIfLost(pages)) return;
    if (!nvml_.nvmlDeviceGetRetiredPages) {
      pages.SetNotSupported();
      return;
    }
    unsigned count = 0;
    nvmlReturn_t rc;
    {
      TRACK(slot_, nvmlDeviceGetRetiredPages);
      rc = nvml_.nvmlDeviceGetRetiredPages(device_, cause, &count, nullptr);
    }
    // With no buffer the driver answers the count, as success or "insufficient size".
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) rc = NVML_SUCCESS;
    Set(pages, rc, count);
  }

  void ReadNvLinks() {
    if (lost()) {
      gpu_.nvlinks = Field<std::vector<NvLinkInfo>>::Failed(gpu_.access_message);
      return;
    }
    if (!nvml_.nvmlDeviceGetNvLinkState) return;
    std::vector<NvLinkInfo> links;
    links.reserve(NVML_NVLINK_MAX_LINKS);
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      nvmlEnableState_t active = 0;
      nvmlReturn_t rc;
      {
        TRACK(slot_, nvmlDeviceGetNvLinkState);
        rc = nvml_.nvmlDeviceGetNvLinkState(device_, link, &active);
      }
      if (rc == NVML_ERROR_INVALID_ARGUMENT || rc == NVML_ERROR_NOT_SUPPORTED) break;  // past the last link
      NvLinkInfo& info = links.emplace_back();
      info.link = link;
      Set(info.active, rc, active == NVML_FEATURE_ENABLED);
      if (lost()) {  // the GPU went away: its links are reported as lost, not one by one
        links.pop_back();
        break;
      }
      const auto counter = nvml_.nvmlDeviceGetNvLinkErrorCounter;
      constexpr NvmlCall name("nvmlDeviceGetNvLinkErrorCounter");
      Call<unsigned long long>(info.replay_errors, name, counter, link, int{NVML_NVLINK_ERROR_DL_REPLAY});
      Call<unsigned long long>(info.recovery_errors, name, counter, link, int{NVML_NVLINK_ERROR_DL_RECOVERY});
      Call<unsigned long long>(info.crc_flit_errors, name, counter, link, int{NVML_NVLINK_ERROR_DL_CRC_FLIT});
      Call<unsigned long long>(info.crc_data_errors, name, counter, link, int{NVML_NVLINK_ERROR_DL_CRC_DATA});
    }
    if (!links.empty()) gpu_.nvlinks = Field<std::vector<NvLinkInfo>>::Value(std::move(links));
  }

  const NvmlLibrary& nvml_;
  std::atomic<uint16_t>* slot_;
  std::function<void(const GpuSnapshot&)> on_identity_;
  nvmlDevice_t device_ = nullptr;
  GpuSnapshot gpu_;
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
  Server(const NvmlLibrary& nvml, int output_fd, CallTracker* tracker)
      : nvml_(nvml), out_(output_fd), tracker_(tracker), xids_(nvml, HostSlot()) {}

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
  std::atomic<uint16_t>* HostSlot() const { return tracker_ ? &tracker_->host_call : nullptr; }

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
    } else {
      host.device_count = Field<uint32_t>::Value(count);
    }
    out_.Write(host);
    return count;
  }

  void ReadGpu(const std::shared_ptr<Round>& round, uint32_t index) {
    if (tracker_) tracker_->gpus_started.fetch_add(1, std::memory_order_release);
    std::atomic<uint16_t>* slot = tracker_ && index < CallTracker::kMaxGpus ? &tracker_->gpu_call[index] : nullptr;
    // The PCI id goes out ahead of the rest: if the GPU hangs later, a rescue
    // flushes it and the parent can name the stuck GPU by its bus id.
    GpuReader reader(nvml_, index, slot, [this](const GpuSnapshot& gpu) {
      if (gpu.pci_bus_id.has_value()) out_.Write(ProbeGpuIdentity{gpu.index, gpu.pci_bus_id.value()});
    });
    out_.Write(reader.Read());
    if (nvmlDevice_t device = reader.device()) {
      std::lock_guard lock(round->devices_mutex);
      round->devices.emplace_back(index, device);
    }
    if (round->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish(*round);
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
};

}  // namespace

int RunProbe(const std::string& library_path, int input_fd, int output_fd, int rescue_fd, CallTracker* tracker) {
  RequestReader requests(input_fd);
  std::atomic<uint16_t>* host_slot = tracker ? &tracker->host_call : nullptr;
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

}  // namespace gpudoctor
