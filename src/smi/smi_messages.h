// nvidia-smi's own failure messages, read as facts about the machine.
//
// When nvidia-smi cannot reach the driver or a GPU it prints a sentence
// instead of (or before) its report. Those sentences are the most valuable
// part of a capture from a broken machine, so they become snapshot state:
//
//   "Failed to initialize NVML: Driver/library version mismatch"
//       -> snapshot.driver_error = kVersionMismatch
//   "Unable to determine the device handle for GPU 0000:05:00.0: Unknown Error"
//   "Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error"
//       -> a GPU at 0000:05:00.0 (GPU 1 for the second) with access_error = kUnknown
//   "No devices were found"
//       -> snapshot.device_count = 0
//   "WARNING: infoROM is corrupted at gpu 0000:B3:00.0"
//       -> the GPU at 0000:B3:00.0 has inforom_valid = false
//
// Internal to the smi module.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/result.h"
#include "model/snapshot.h"

namespace gpudoctor::smi {

struct SmiMessage {
  enum class Kind {
    kDriverError,  // NVML or the driver as a whole is unusable
    kGpuError,     // one GPU could not be opened
    kNvmlVersion,  // "NVML library version: 570.124"
    kNoDevices,    // "No devices were found"
    kInforomCorrupted,  // "WARNING: infoROM is corrupted at gpu 0000:B3:00.0"
  };
  Kind kind = Kind::kDriverError;
  AccessError access_error = AccessError::kNone;
  std::string pci_bus_id;  // kGpuError, kInforomCorrupted: canonical form
  std::string text;        // the message line; the version for kNvmlVersion
  std::optional<uint32_t> gpu_index;  // kGpuError: the index, where the message names it
};

// The access error a reason phrase from nvidia-smi or NVML describes
// ("Unknown Error" -> kUnknown, "GPU is lost" -> kGpuLost, ...).
AccessError AccessErrorFromReason(std::string_view reason);

// The message `line` carries, or nullopt when it is not one of nvidia-smi's.
std::optional<SmiMessage> MatchSmiMessage(std::string_view line);

// Records the messages in the snapshot. A GPU error attaches to the GPU with
// the same bus id when the report lists it, and adds the GPU otherwise.
// Fails, like the format parsers, when that would make more than kMaxGpus.
Status ApplySmiMessages(std::span<const SmiMessage> messages, Snapshot& snapshot);

}  // namespace gpudoctor::smi
