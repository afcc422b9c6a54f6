#include "diag/device_session.h"

#include <fmt/format.h>

#include <algorithm>

#include "diag/progress_pulse.h"

namespace gpudoctor {

DeviceSession::~DeviceSession() {
  if (context_ == nullptr) return;
  cuda_.cuCtxSetCurrent(context_);
  cuda_.cuCtxSynchronize();
  for (CUdeviceptr pointer : allocations_) cuda_.cuMemFree_v2(pointer);
  for (void* pointer : host_allocations_) cuda_.cuMemFreeHost(pointer);
  for (CUmodule module : modules_) cuda_.cuModuleUnload(module);
  cuda_.cuDevicePrimaryCtxRelease_v2(device_);
}

Status DeviceSession::Call(CUresult status, std::string_view what) const {
  ProcessWorkPulse().Beat();  // the driver answered: one unit of work done
  if (status == CUDA_SUCCESS) return {};
  return Error{fmt::format("{}: {}", what, cuda_.ErrorMessage(status))};
}

Status DeviceSession::Open(int ordinal) {
  if (Status s = Call(cuda_.cuInit(0), "cuInit"); !s) return s;
  int count = 0;
  if (Status s = Call(cuda_.cuDeviceGetCount(&count), "cuDeviceGetCount"); !s) return s;
  if (ordinal < 0 || ordinal >= count) return Error{fmt::format("no CUDA device {} ({} found)", ordinal, count)};
  if (Status s = Call(cuda_.cuDeviceGet(&device_, ordinal), "cuDeviceGet"); !s) return s;
  CUcontext context = nullptr;
  if (Status s = Call(cuda_.cuDevicePrimaryCtxRetain(&context, device_), "cuDevicePrimaryCtxRetain"); !s) return s;
  context_ = context;
  return MakeCurrent();
}

Status DeviceSession::MakeCurrent() const { return Call(cuda_.cuCtxSetCurrent(context_), "cuCtxSetCurrent"); }

Result<std::vector<CUfunction>> DeviceSession::LoadModule(std::string_view ptx, const std::vector<std::string>& names) {
  if (ptx.empty()) return Error{"this gpudoctor was built without GPU kernels (clang-16 was missing at build time)"};
  const std::string image(ptx);  // the driver wants NUL-terminated text
  CUmodule module = nullptr;
  const CUresult loaded = cuda_.cuModuleLoadData(&module, image.c_str());
  // A driver that cannot read the kernels' PTX ISA is too old, whatever version it gave.
  if (loaded == CUDA_ERROR_UNSUPPORTED_PTX_VERSION) return Error{DriverTooOldMessage(cuda_.Version())};
  if (Status s = Call(loaded, "loading the GPU kernels"); !s) return s.error();
  modules_.push_back(module);
  std::vector<CUfunction> functions;
  for (const std::string& name : names) {
    CUfunction function = nullptr;
    if (Status s = Call(cuda_.cuModuleGetFunction(&function, module, name.c_str()), name); !s) return s.error();
    functions.push_back(function);
  }
  return functions;
}

Result<CUdeviceptr> DeviceSession::Allocate(size_t bytes) {
  CUdeviceptr pointer = 0;
  if (Status s = Call(cuda_.cuMemAlloc_v2(&pointer, bytes), fmt::format("allocating {} bytes", bytes)); !s)
    return s.error();
  allocations_.push_back(pointer);
  return pointer;
}

void DeviceSession::Free(CUdeviceptr pointer) {
  auto found = std::find(allocations_.begin(), allocations_.end(), pointer);
  if (found == allocations_.end()) return;
  cuda_.cuMemFree_v2(pointer);
  allocations_.erase(found);
}

Result<void*> DeviceSession::AllocateHost(size_t bytes) {
  void* pointer = nullptr;
  if (Status s = Call(cuda_.cuMemHostAlloc(&pointer, bytes, CU_MEMHOSTALLOC_PORTABLE),
                      fmt::format("allocating {} bytes of pinned host memory", bytes));
      !s)
    return s.error();
  host_allocations_.push_back(pointer);
  return pointer;
}

Result<double> DeviceSession::Timed(const std::function<Status()>& work) const {
  CUevent start = nullptr, end = nullptr;
  if (Status s = Call(cuda_.cuEventCreate(&start, 0), "cuEventCreate"); !s) return s.error();
  if (Status s = Call(cuda_.cuEventCreate(&end, 0), "cuEventCreate"); !s) {
    cuda_.cuEventDestroy_v2(start);
    return s.error();
  }
  Status status = Call(cuda_.cuEventRecord(start, nullptr), "cuEventRecord");
  if (status) status = work();
  if (status) status = Call(cuda_.cuEventRecord(end, nullptr), "cuEventRecord");
  if (status) status = Call(cuda_.cuEventSynchronize(end), "waiting for the GPU");
  float ms = 0;
  if (status) status = Call(cuda_.cuEventElapsedTime(&ms, start, end), "cuEventElapsedTime");
  cuda_.cuEventDestroy_v2(start);
  cuda_.cuEventDestroy_v2(end);
  if (!status) return status.error();
  return static_cast<double>(ms) / 1000.0;
}

DeviceIdentity DeviceSession::Identity() const {
  DeviceIdentity identity;
  char name[256] = {};
  if (cuda_.cuDeviceGetName(name, sizeof name - 1, device_) == CUDA_SUCCESS) identity.name = name;
  char bus[64] = {};
  if (cuda_.cuDeviceGetPCIBusId(bus, sizeof bus - 1, device_) == CUDA_SUCCESS) identity.pci_bus_id = bus;
  cuda_.cuDeviceGetAttribute(&identity.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device_);
  return identity;
}

}  // namespace gpudoctor
