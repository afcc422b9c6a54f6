// RunPcie: what the links carry. Pinned host-to-device and device-to-host
// copies of each GPU, one GPU at a time so each link has the host to itself,
// then a copy between every ordered pair of GPUs (NVLink or PCIe peer to
// peer, or staged through the host where the pair has no peer access). Every
// copy is checked: the data must arrive as sent.
//
//   PcieResult result = RunPcie(driver, {.devices = {0, 1}}, on_progress, stop);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "diag/cuda_driver.h"

namespace gpudoctor {

struct PcieOptions {
  std::vector<int> devices;                 // CUDA ordinals
  uint64_t transfer_bytes = 256ull << 20;   // per copy
  int repeats = 8;                          // copies timed per direction
  bool peers = true;                        // the peer-to-peer matrix, with two GPUs or more
};

struct PcieProgress {
  std::string step;     // "GPU 0 host->device", "GPU 0->1"
  double fraction = 0;  // of the whole test
  double gb_per_s = 0;
};

struct PcieLinkResult {
  int device = 0;
  std::string device_name, pci_bus_id;
  double host_to_device_gb_per_s = 0;
  double device_to_host_gb_per_s = 0;
  bool data_intact = true;
  std::string error;  // a copy that failed
};

struct PciePeerResult {
  int from = 0, to = 0;
  bool peer_access = false;  // false: the driver stages the copy through the host
  double gb_per_s = 0;
  bool data_intact = true;
  std::string error;
};

struct PcieResult {
  std::vector<PcieLinkResult> links;
  std::vector<PciePeerResult> peers;
  bool interrupted = false;
};

// Fails only when a GPU cannot be opened or memory cannot be had; a copy
// that fails is recorded in its link or pair.
Result<PcieResult> RunPcie(const CudaDriver& cuda, const PcieOptions& options,
                           const std::function<void(const PcieProgress&)>& progress,
                           const std::function<bool()>& stop);

}  // namespace gpudoctor
