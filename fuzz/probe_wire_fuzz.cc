// libFuzzer target for the probe's wire format: whatever bytes arrive on the
// pipe, the collector's frame reader and decoder must reject or decode them
// without a crash, a leak or undefined behaviour, and what decodes must encode
// back to the same frame. A GPU frame must also decode over the GPU decoded
// before it (the collector refills its snapshot's GPUs) to exactly what it
// decodes to alone.
//
//   fuzz_probe_wire -max_total_time=300 corpus/

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <variant>

#include "nvml/probe_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  gpudoctor::ProbeFrameBuffer frames;
  // Fed in two pieces, as a pipe may deliver them.
  frames.Append(bytes.substr(0, size / 2));
  while (frames.Next()) {
  }
  frames.Append(bytes.substr(size / 2));
  gpudoctor::GpuSnapshot reused;  // refilled by every GPU frame in turn
  while (auto payload = frames.Next()) {
    gpudoctor::ProbeMessage message, decoded;
    gpudoctor::Status status = gpudoctor::DecodeProbeMessage(*payload, message);
    if (gpudoctor::IsGpuSnapshotFrame(*payload)) {
      const bool refilled = gpudoctor::DecodeGpuSnapshot(*payload, reused).ok();
      if (refilled != status.ok()) __builtin_trap();
      if (refilled && !(std::get<gpudoctor::GpuSnapshot>(message) == reused)) __builtin_trap();
    }
    if (!status.ok()) {
      if (status.error().message.empty()) __builtin_trap();
      continue;
    }
    const std::string again = gpudoctor::EncodeProbeMessage(message);
    status = gpudoctor::DecodeProbeMessage(std::string_view(again).substr(sizeof(uint32_t)), decoded);
    if (!status.ok() || !(decoded == message)) __builtin_trap();
  }
  return 0;
}
