#include "diag/pcie.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <memory>

#include "diag/device_session.h"

namespace gpudoctor {

namespace {

// Bytes per second of `repeats` runs of `copy` (synchronous copies) on the
// GPU's clock, after one to warm up.
Result<double> TimeCopies(const DeviceSession& session, int repeats, uint64_t bytes,
                          const std::function<CUresult()>& copy, std::string_view what) {
  if (Status s = session.Call(copy(), what); !s) return s.error();
  auto seconds = session.Timed([&]() -> Status {
    for (int i = 0; i < repeats; ++i)
      if (Status s = session.Call(copy(), what); !s) return s;
    return {};
  });
  if (!seconds) return seconds.error();
  return *seconds > 0 ? static_cast<double>(bytes) * repeats / *seconds / 1e9 : 0.0;
}

}  // namespace

Result<PcieResult> RunPcie(const CudaDriver& cuda, const PcieOptions& options,
                           const std::function<void(const PcieProgress&)>& progress,
                           const std::function<bool()>& stop) {
  if (options.devices.empty()) return Error{"no GPU to test"};
  uint64_t bytes = std::max<uint64_t>(options.transfer_bytes / 4 * 4, 4096);
  const int repeats = std::max(1, options.repeats);
  std::vector<std::unique_ptr<DeviceSession>> sessions;
  std::vector<CUdeviceptr> buffers;
  for (int device : options.devices) {
    sessions.push_back(std::make_unique<DeviceSession>(cuda));
    if (Status s = sessions.back()->Open(device); !s) return s.error();
    // A small card copies less at a time: a quarter of its free memory at most.
    size_t free_bytes = 0, total_bytes = 0;
    if (Status s = sessions.back()->Call(cuda.cuMemGetInfo_v2(&free_bytes, &total_bytes), "cuMemGetInfo"); !s)
      return s.error();
    bytes = std::min<uint64_t>(bytes, free_bytes / 4 / 4096 * 4096);
    if (bytes < 4096) return Error{fmt::format("too little free memory on GPU {} ({} bytes free)", device, free_bytes)};
  }
  for (auto& session : sessions) {
    if (Status s = session->MakeCurrent(); !s) return s.error();
    auto buffer = session->Allocate(bytes);
    if (!buffer) return buffer.error();
    buffers.push_back(*buffer);
  }
  // Pinned buffers, portable to every context: what is sent and what came back.
  if (Status s = sessions.front()->MakeCurrent(); !s) return s.error();
  auto sent = sessions.front()->AllocateHost(bytes);
  if (!sent) return sent.error();
  auto received = sessions.front()->AllocateHost(bytes);
  if (!received) return received.error();
  auto* words = static_cast<uint32_t*>(*sent);
  for (uint64_t i = 0; i < bytes / 4; ++i) words[i] = static_cast<uint32_t>(i * 2654435761u) ^ 0xA5A5A5A5u;

  const size_t pairs = options.peers && sessions.size() > 1 ? sessions.size() * (sessions.size() - 1) : 0;
  const double steps = static_cast<double>(2 * sessions.size() + pairs);
  double done = 0;
  auto report = [&](std::string step, double gb_per_s) {
    done += 1;
    if (progress) progress({.step = std::move(step), .fraction = done / steps, .gb_per_s = gb_per_s});
  };
  auto intact = [&] { return std::memcmp(*sent, *received, bytes) == 0; };

  PcieResult result;
  for (size_t i = 0; i < sessions.size(); ++i) {
    if (stop && stop()) {
      result.interrupted = true;
      return result;
    }
    DeviceSession& session = *sessions[i];
    const DeviceIdentity identity = session.Identity();
    PcieLinkResult link{.device = options.devices[i], .device_name = identity.name, .pci_bus_id = identity.pci_bus_id};
    if (Status s = session.MakeCurrent(); !s) return s.error();
    std::memset(*received, 0, bytes);
    auto up = TimeCopies(session, repeats, bytes, [&] { return cuda.cuMemcpyHtoD_v2(buffers[i], *sent, bytes); },
                         "host-to-device copy");
    if (up) link.host_to_device_gb_per_s = *up;
    else link.error = up.error().message;
    report(fmt::format("GPU {} host->device", link.device), link.host_to_device_gb_per_s);
    if (up) {
      auto down = TimeCopies(session, repeats, bytes,
                             [&] { return cuda.cuMemcpyDtoH_v2(*received, buffers[i], bytes); }, "device-to-host copy");
      if (down) {
        link.device_to_host_gb_per_s = *down;
        link.data_intact = intact();
      } else {
        link.error = down.error().message;
      }
    }
    report(fmt::format("GPU {} device->host", link.device), link.device_to_host_gb_per_s);
    result.links.push_back(std::move(link));
  }

  for (size_t from = 0; pairs > 0 && from < sessions.size(); ++from) {
    for (size_t to = 0; to < sessions.size(); ++to) {
      if (from == to) continue;
      if (stop && stop()) {
        result.interrupted = true;
        return result;
      }
      PciePeerResult peer{.from = options.devices[from], .to = options.devices[to]};
      int can_access = 0;
      cuda.cuDeviceCanAccessPeer(&can_access, sessions[from]->device(), sessions[to]->device());
      peer.peer_access = can_access != 0;
      DeviceSession& source = *sessions[from];
      if (Status s = source.MakeCurrent(); !s) return s.error();
      if (peer.peer_access) {
        const CUresult enabled = cuda.cuCtxEnablePeerAccess(sessions[to]->context(), 0);
        if (enabled != CUDA_SUCCESS && enabled != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) peer.peer_access = false;
      }
      // The source holds what was sent (its host-to-device copy); it is copied over, then read back.
      auto rate = TimeCopies(source, repeats, bytes,
                             [&] {
                               return cuda.cuMemcpyPeer(buffers[to], sessions[to]->context(), buffers[from],
                                                        source.context(), bytes);
                             },
                             "peer copy");
      if (rate) {
        peer.gb_per_s = *rate;
        std::memset(*received, 0, bytes);
        if (Status s = sessions[to]->MakeCurrent(); !s) return s.error();
        if (Status s = sessions[to]->Call(cuda.cuMemcpyDtoH_v2(*received, buffers[to], bytes), "reading the copy"); s)
          peer.data_intact = intact();
        else
          peer.error = s.error().message;
      } else {
        peer.error = rate.error().message;
      }
      report(fmt::format("GPU {}->{}", peer.from, peer.to), peer.gb_per_s);
      result.peers.push_back(std::move(peer));
    }
  }
  return result;
}

}  // namespace gpudoctor
