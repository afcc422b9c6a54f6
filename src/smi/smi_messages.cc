#include "smi/smi_messages.h"

#include <re2/re2.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <unordered_map>
#include <utility>

#include "common/text.h"
#include "smi/smi_formats.h"

namespace gpudoctor::smi {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ContainsIgnoreCase(a, b);
}

SmiMessage DriverError(AccessError error, std::string_view line) {
  return {SmiMessage::Kind::kDriverError, error, "", std::string(line)};
}

}  // namespace

AccessError AccessErrorFromReason(std::string_view reason) {
  if (ContainsIgnoreCase(reason, "version mismatch")) return AccessError::kVersionMismatch;
  if (ContainsIgnoreCase(reason, "GPU is lost")) return AccessError::kGpuLost;
  if (ContainsIgnoreCase(reason, "Insufficient Permissions") || ContainsIgnoreCase(reason, "No permission")) {
    return AccessError::kNoPermission;
  }
  if (ContainsIgnoreCase(reason, "requires reset") || ContainsIgnoreCase(reason, "reset required")) {
    return AccessError::kResetRequired;
  }
  if (ContainsIgnoreCase(reason, "Driver Not Loaded")) return AccessError::kDriverNotLoaded;
  if (ContainsIgnoreCase(reason, "Unknown Error")) return AccessError::kUnknown;
  return AccessError::kOther;
}

std::optional<SmiMessage> MatchSmiMessage(std::string_view line) {
  static const RE2 kNvmlInitFailed(R"((?i)Failed to initialize NVML:\s*(.*))");
  static const RE2 kNoDriver(R"((?i)NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.*)");
  static const RE2 kNoLibrary(R"((?i)NVIDIA-SMI couldn't find libnvidia-ml\.so.*)");
  // "determine" on Linux, "detect" in some builds' wording; newer builds name the GPU's index too
  // ("for GPU1: 0000:34:00.0: Unknown Error").
  static const RE2 kNoHandle(R"((?i)Unable to (?:determine|detect) the device handle for GPU\s*(?:(\d+):\s*)?)"
                             R"(([0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\s*:\s*(.*))");
  // Printed below an otherwise whole report, and by every nvidia-smi call (exit status 14).
  static const RE2 kInforomCorrupted(
      R"((?i)WARNING:\s*infoROM is corrupted at gpu\s*([0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]).*)");
  static const RE2 kNvmlVersion(R"((?i)NVML library version:\s*(\S+))");
  static const RE2 kNoDevices(R"((?i)No devices were found\.?)");

  line = Trim(line);
  // Every message starts with one of these words; most lines are not messages.
  static constexpr std::string_view kFirstWords[] = {"Failed", "NVIDIA-SMI", "Unable", "NVML", "No", "WARNING:"};
  const std::string_view first_word = line.substr(0, line.find(' '));
  if (std::none_of(std::begin(kFirstWords), std::end(kFirstWords),
                   [&](std::string_view word) { return EqualsIgnoreCase(first_word, word); })) {
    return std::nullopt;
  }
  re2::StringPiece input(line.data(), line.size());
  std::string reason;
  std::string bus_id;
  if (RE2::FullMatch(input, kNvmlInitFailed, &reason)) return DriverError(AccessErrorFromReason(reason), line);
  if (RE2::FullMatch(input, kNoDriver)) return DriverError(AccessError::kDriverNotLoaded, line);
  if (RE2::FullMatch(input, kNoLibrary)) return DriverError(AccessError::kLibraryNotFound, line);
  std::string index;
  if (RE2::FullMatch(input, kNoHandle, &index, &bus_id, &reason)) {
    return SmiMessage{SmiMessage::Kind::kGpuError, AccessErrorFromReason(reason),
                      NormalizePciBusId(bus_id).value_or(bus_id), std::string(line), ParseInt<uint32_t>(index)};
  }
  if (RE2::FullMatch(input, kInforomCorrupted, &bus_id)) {
    return SmiMessage{SmiMessage::Kind::kInforomCorrupted, AccessError::kNone,
                      NormalizePciBusId(bus_id).value_or(bus_id), std::string(line)};
  }
  std::string version;
  if (RE2::FullMatch(input, kNvmlVersion, &version)) {
    return SmiMessage{SmiMessage::Kind::kNvmlVersion, AccessError::kNone, "", version};
  }
  if (RE2::FullMatch(input, kNoDevices)) {
    return SmiMessage{SmiMessage::Kind::kNoDevices, AccessError::kNone, "", std::string(line)};
  }
  return std::nullopt;
}

Status ApplySmiMessages(std::span<const SmiMessage> messages, Snapshot& snapshot) {
  std::unordered_map<std::string, size_t> gpu_by_bus_id;
  uint32_t next_index = 0;
  for (size_t position = 0; position < snapshot.gpus.size(); ++position) {
    const GpuSnapshot& gpu = snapshot.gpus[position];
    if (gpu.pci_bus_id.has_value()) gpu_by_bus_id.emplace(gpu.pci_bus_id.value(), position);
    next_index = std::max(next_index, gpu.index + 1);
  }
  for (const SmiMessage& message : messages) {
    switch (message.kind) {
      case SmiMessage::Kind::kDriverError:
        // The first failure is the cause; later ones are usually its echoes.
        if (snapshot.driver_error == AccessError::kNone) {
          snapshot.driver_error = message.access_error;
          snapshot.driver_message = message.text;
        }
        break;
      case SmiMessage::Kind::kNvmlVersion:
        snapshot.nvml_version = Field<std::string>::Value(message.text);
        break;
      case SmiMessage::Kind::kNoDevices:
        snapshot.device_count = Field<uint32_t>::Value(0);
        break;
      case SmiMessage::Kind::kGpuError:
      case SmiMessage::Kind::kInforomCorrupted: {
        auto [listed, added] = gpu_by_bus_id.emplace(message.pci_bus_id, snapshot.gpus.size());
        if (added) {
          if (snapshot.gpus.size() == kMaxGpus) return TooManyGpus();
          // The index nvidia-smi names, when it is free; else (older builds name the bus id only) the next one.
          const bool index_free = message.gpu_index && snapshot.FindGpu(*message.gpu_index) == nullptr;
          GpuSnapshot& gpu = snapshot.gpus.emplace_back();
          gpu.index = index_free ? *message.gpu_index : next_index;
          next_index = std::max(next_index, gpu.index + 1);
          gpu.pci_bus_id = Field<std::string>::Value(message.pci_bus_id);
        }
        GpuSnapshot& gpu = snapshot.gpus[listed->second];
        if (message.kind == SmiMessage::Kind::kInforomCorrupted) {
          gpu.inforom_valid = Field<bool>::Value(false);
        } else {
          gpu.access_error = message.access_error;
          gpu.access_message = message.text;
        }
        break;
      }
    }
  }
  return Status::Ok();
}

}  // namespace gpudoctor::smi
