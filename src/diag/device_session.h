// DeviceSession: one GPU opened through the CUDA driver for a diagnostic, its
// primary context current, a module of kernels loaded, and every allocation
// (device or pinned host memory) released when the session ends, however the
// test ends: a failure, an interruption or the end.
//
//   DeviceSession session(cuda);
//   if (Status s = session.Open(0); !s) return s.error();
//   auto functions = session.LoadModule(kMemtestPtx, {"gd_memtest_fill"});
//   auto buffer = session.Allocate(1 << 30);
//   if (Status s = session.Call(cuda.cuCtxSynchronize(), "filling"); !s) return s.error();
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "diag/cuda_driver.h"

namespace gpudoctor {

// What the driver says about a device, for reports.
struct DeviceIdentity {
  std::string name;
  std::string pci_bus_id;
  int multiprocessors = 0;
};

class DeviceSession {
 public:
  explicit DeviceSession(const CudaDriver& cuda) : cuda_(cuda) {}
  ~DeviceSession();
  DeviceSession(const DeviceSession&) = delete;
  DeviceSession& operator=(const DeviceSession&) = delete;

  // An error naming `what` and the driver's words when `status` is not success.
  // Each call counts as a unit of work done (diag/progress_pulse.h).
  Status Call(CUresult status, std::string_view what) const;

  // Initialises the driver, and retains and makes current the primary context of `ordinal`.
  Status Open(int ordinal);
  // Makes this session's context current on the calling thread again.
  Status MakeCurrent() const;

  // Loads PTX text and finds `names` in it, in that order. Empty PTX means
  // the build had no clang-16 to compile kernels with.
  Result<std::vector<CUfunction>> LoadModule(std::string_view ptx, const std::vector<std::string>& names);

  Result<CUdeviceptr> Allocate(size_t bytes);
  // Frees an allocation of this session before the session ends.
  void Free(CUdeviceptr pointer);
  // Page-locked host memory, for copies at the link's full rate.
  Result<void*> AllocateHost(size_t bytes);

  // Seconds `work` took on the GPU's clock: events recorded on the default
  // stream before and after it, then waited for.
  Result<double> Timed(const std::function<Status()>& work) const;

  DeviceIdentity Identity() const;
  const CudaDriver& cuda() const { return cuda_; }
  CUdevice device() const { return device_; }
  CUcontext context() const { return context_; }

 private:
  const CudaDriver& cuda_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  std::vector<CUmodule> modules_;
  std::vector<CUdeviceptr> allocations_;
  std::vector<void*> host_allocations_;
};

}  // namespace gpudoctor
