// The probe: the side of hang-proof collection that actually calls NVML.
//
// It runs in its own process (`gpudoctor __probe`) and serves requests: it
// initialises NVML once, then for each ProbeRequest on `input_fd` reads the
// host and every GPU (one long-lived thread per GPU) and streams its readings
// to the parent on `output_fd` as frames (nvml/probe_wire.h), ending with
// ProbeDone. Before each NVML call a thread records which call it is entering
// in a CallTracker that lives in memory shared with the parent, so when a
// call never returns the parent can name it without any help from the stuck
// process.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "nvml/probe_wire.h"

namespace gpudoctor {

// One id per entry point of GPUDOCTOR_NVML_FUNCTIONS; 0 means "not in a call".
uint16_t NvmlCallId(const char* name);
const char* NvmlCallName(uint16_t id);  // "" for 0 or an unknown id

// Shared between parent and probe; plain atomics, no pointers, so it works
// across processes in a MAP_SHARED mapping.
struct CallTracker {
  static constexpr uint32_t kMaxGpus = 64;
  std::atomic<uint16_t> host_call;           // call of the main thread
  std::atomic<uint16_t> gpu_call[kMaxGpus];  // call of each GPU's thread
};

// Serves requests until `input_fd` closes; returns the process exit status.
// When NVML cannot start it answers the first request with ProbeInitFailed and
// returns, so the parent retries with a fresh probe (a driver reload is
// picked up that way).
int RunProbe(const std::string& library_path, int input_fd, int output_fd, CallTracker* tracker);

}  // namespace gpudoctor
