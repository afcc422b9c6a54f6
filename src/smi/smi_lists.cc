// The short GPU lists operators paste beside (or instead of) a report:
//
//   nvidia-smi -L               GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-4bd6...)
//   nvidia-smi nvlink -s        the same line per GPU, then one per link:
//                                        Link 0: 26.562 GB/s
//                                        Link 3: <inactive>
//                               or, for a GPU none of whose links is up,
//                                       NVML: Unable to retrieve NVLink information as all links are inactive
//   nvidia-smi nvlink -e        the same line per GPU (some builds print no UUID), then one per link and counter:
//                                        Link 3: Replay Errors: 211
//                                        Link 0: CRC Errors: 65535
//   nvidia-debugdump --list     Found 2 NVIDIA devices
//                                       Device ID:              0
//                                       Device name:            NVIDIA A10
//                               and, for a GPU it cannot open,
//                               Error: nvmlDeviceGetHandleByIndex(): Unknown Error
//                               FAILED to get details on GPU (0x1): Unknown Error

#include <re2/re2.h>

#include <string>
#include <vector>

#include "common/re2_view.h"
#include "common/text.h"
#include "smi/smi_formats.h"
#include "smi/smi_messages.h"
#include "smi/smi_values.h"

namespace gpudoctor::smi {
namespace {

// "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)"; `nvidia-smi nvlink -e` of some builds leaves the UUID out.
const RE2& GpuLine() {
  static const RE2 kGpu(R"(GPU (\d+): (\S.*?)(?: \(UUID: ([^)]*)\))?)");
  return kGpu;
}

// The error counter an `nvlink -e` line names, or null for one the snapshot has no field for (the newer
// builds' "Rx Errors", "Effective Errors", ...), which is read and left out.
Field<uint64_t>* CounterNamed(std::string_view name, NvLinkInfo& link) {
  if (name == "Replay") return &link.replay_errors;
  if (name == "Recovery") return &link.recovery_errors;
  if (name == "CRC" || name == "CRC FLIT" || name == "CRC Flit") return &link.crc_flit_errors;
  if (name == "CRC Data") return &link.crc_data_errors;
  return nullptr;
}

// The entry of `link` in the GPU's list, added when the list has none yet.
NvLinkInfo& LinkAt(uint32_t link, GpuSnapshot& gpu) {
  if (!gpu.nvlinks.has_value()) gpu.nvlinks = Field<std::vector<NvLinkInfo>>::Value({});
  for (NvLinkInfo& info : gpu.nvlinks.value())
    if (info.link == link) return info;
  NvLinkInfo& info = gpu.nvlinks.value().emplace_back();
  info.link = link;
  return info;
}

// The GPU with `index`, added when the list has not named it yet.
Result<GpuSnapshot*> GpuAt(uint32_t index, Snapshot& snapshot) {
  for (GpuSnapshot& gpu : snapshot.gpus)
    if (gpu.index == index) return &gpu;
  if (snapshot.gpus.size() == kMaxGpus) return TooManyGpus();
  GpuSnapshot& gpu = snapshot.gpus.emplace_back();
  gpu.index = index;
  return &gpu;
}

}  // namespace

bool LooksLikeGpuList(std::string_view line) { return RE2::FullMatch(Piece(Trim(line)), GpuLine()); }

bool LooksLikeDebugDumpList(std::string_view line) {
  static const RE2 kFound(R"(Found \d+ NVIDIA devices?)");
  return RE2::FullMatch(Piece(Trim(line)), kFound);
}

Result<size_t> ParseGpuList(std::span<const std::string_view> lines, Snapshot& snapshot) {
  static const RE2 kLink(R"(Link (\d+): (?:(<inactive>)|([0-9.]+) GB/s))");
  static const RE2 kCounter(R"(Link (\d+): ([A-Za-z][A-Za-z ]*?) Errors: (\d+))");
  // Newer builds write "inActive".
  static const RE2 kAllInactive(R"((?i)(?:NVML: )?Unable to retrieve NVLink information as all links are inactive\.?)");
  size_t recognised = 0;
  GpuSnapshot* current = nullptr;
  for (std::string_view line : lines) {
    const re2::StringPiece body = Piece(Trim(line));
    uint32_t index = 0;
    std::string name, uuid;
    if (RE2::FullMatch(body, GpuLine(), &index, &name, &uuid)) {
      Result<GpuSnapshot*> gpu = GpuAt(index, snapshot);
      if (!gpu) return gpu.error();
      current = *gpu;
      current->name = TextField(name);
      // A pasted list may elide the UUID ("UUID: ..."); only a real one names the card.
      if (StartsWith(uuid, "GPU-")) current->uuid = TextField(uuid);
      ++recognised;
      continue;
    }
    if (current == nullptr) continue;
    uint32_t link = 0;
    std::string inactive, speed, counter;
    uint64_t count = 0;
    if (RE2::FullMatch(body, kLink, &link, &inactive, &speed)) {
      LinkAt(link, *current).active = Field<bool>::Value(inactive.empty());
      ++recognised;
    } else if (RE2::FullMatch(body, kAllInactive)) {
      // The links are known to be down, not how many there are: the list is known and holds none up.
      if (!current->nvlinks.has_value()) current->nvlinks = Field<std::vector<NvLinkInfo>>::Value({});
      ++recognised;
    } else if (RE2::FullMatch(body, kCounter, &link, &counter, &count)) {
      NvLinkInfo& info = LinkAt(link, *current);
      if (Field<uint64_t>* field = CounterNamed(counter, info)) *field = Field<uint64_t>::Value(count);
      ++recognised;
    }
  }
  return recognised;
}

Result<size_t> ParseDebugDumpList(std::span<const std::string_view> lines, Snapshot& snapshot) {
  static const RE2 kFound(R"(Found (\d+) NVIDIA devices?)");
  static const RE2 kDeviceId(R"(Device ID:\s*(\d+))");
  static const RE2 kDeviceName(R"(Device name:\s*(.*?))");
  static const RE2 kFailed(R"(FAILED to get details on GPU \((0x[0-9a-fA-F]+|\d+)\):\s*(.*))");
  size_t recognised = 0;
  GpuSnapshot* current = nullptr;
  for (std::string_view line : lines) {
    const std::string_view text = Trim(line);
    const re2::StringPiece body = Piece(text);
    uint32_t number = 0;
    std::string value, reason;
    if (RE2::FullMatch(body, kFound, &number)) {
      snapshot.device_count = Field<uint32_t>::Value(number);
      ++recognised;
    } else if (RE2::FullMatch(body, kDeviceId, &number)) {
      Result<GpuSnapshot*> gpu = GpuAt(number, snapshot);
      if (!gpu) return gpu.error();
      current = *gpu;
      ++recognised;
    } else if (current != nullptr && RE2::FullMatch(body, kDeviceName, &value)) {
      current->name = TextField(value);
      ++recognised;
    } else if (RE2::FullMatch(body, kFailed, &value, &reason)) {
      auto index = ParseInt<uint32_t>(StartsWith(value, "0x") ? std::string_view(value).substr(2) : value,
                                      StartsWith(value, "0x") ? 16 : 10);
      if (!index) continue;
      Result<GpuSnapshot*> gpu = GpuAt(*index, snapshot);
      if (!gpu) return gpu.error();
      (*gpu)->MarkUnreadable(AccessErrorFromReason(reason), std::string(text));
      current = nullptr;
      ++recognised;
    }
  }
  return recognised;
}

}  // namespace gpudoctor::smi
