// The probe: the side of hang-proof collection that actually calls NVML.
//
// It runs in its own process (`gpudoctor __probe`) and serves requests: it
// initialises NVML once, then for each ProbeRequest on `input_fd` reads the
// host and every GPU and streams its readings to the parent on `output_fd` as
// frames (nvml/probe_wire.h), ending with ProbeDone. Before each NVML call a
// thread records which call it is entering in a CallTracker that lives in
// memory shared with the parent, so when a call never returns the parent can
// name it without any help from the stuck process.
//
// The serving thread reads the GPUs one after another: a healthy snapshot
// costs one wake-up on each side and no thread hand-offs. When the parent
// sees no progress for a while it writes the request's sequence number to
// `rescue_fd`; the probe then hands every GPU not yet started to a thread of
// its own, so one GPU stuck in the driver does not hold the rest, and sends
// what it has gathered at once, so the parent can name the stuck GPU.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "nvml/probe_wire.h"

namespace gpudoctor {

// One id per entry point of GPUDOCTOR_NVML_FUNCTIONS; 0 means "not in a call".
const char* NvmlCallName(uint16_t id);  // "" for 0 or an unknown id

// A GPU's PCI bus id, stored by the probe as soon as it knows it and read by
// the parent only to name a GPU that missed its deadline. A sequence lock: the
// parent may read while the probe writes, and then gets "" rather than a mix.
class SharedPciId {
 public:
  static constexpr size_t kMaxLength = 32;  // nvmlPciInfo_t's busId, NUL included
  void Store(std::string_view id);
  std::string Load() const;  // "" when not known yet, or being written

 private:
  std::atomic<uint32_t> sequence_;                    // odd while being written
  std::atomic<uint64_t> words_[kMaxLength / 8];      // the id, zero-padded
};

// Shared between parent and probe; plain atomics, no pointers, so it works
// across processes in a MAP_SHARED mapping. All zero is the starting state.
struct CallTracker {
  static constexpr uint32_t kMaxGpus = 64;
  std::atomic<uint16_t> host_call;           // call of the serving thread outside any GPU
  std::atomic<uint16_t> gpu_call[kMaxGpus];  // call being made for each GPU
  std::atomic<uint32_t> gpus_started;        // GPUs begun since the probe started: its progress
  SharedPciId gpu_pci[kMaxGpus];             // each GPU's PCI id, once the probe has read it
};

// Serves requests until `input_fd` closes; returns the process exit status.
// When NVML cannot start it answers the first request with ProbeInitFailed and
// returns, so the parent retries with a fresh probe (a driver reload is
// picked up that way). Requests are numbered from 1 in the order they arrive;
// a 4-byte native-endian number on `rescue_fd` (-1: none) asks for the rescue
// of that request.
int RunProbe(const std::string& library_path, int input_fd, int output_fd, int rescue_fd, CallTracker* tracker);

// The probe's command line, `[__probe] [--nvml-lib PATH] [--tracker-fd FD]
// [--rescue-fd FD] [--parent-pid PID]`, served on stdin and stdout: what the
// collector runs, as `gpudoctor-probe` (a small program that loads no more
// than NVML) or as `gpudoctor __probe` where that program is not installed.
// With --parent-pid the probe ends itself within a second of its parent's
// end (killed, crashed): a probe stuck in NVML would otherwise wait for ever,
// since only its parent kills a stuck probe.
int RunProbeCommandLine(int argc, char** argv);

// The program the collector runs as its probe: `gpudoctor-probe` beside
// `gpudoctor_path` when it is there and executable, else gpudoctor itself.
std::string ProbeExecutableBeside(const std::string& gpudoctor_path);

}  // namespace gpudoctor
