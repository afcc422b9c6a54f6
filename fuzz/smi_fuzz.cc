// libFuzzer target for ParseNvidiaSmi: any bytes must give a snapshot or an
// error with a message, never a crash, hang, leak or undefined behaviour.
//
//   smi_fuzz -max_total_time=300 corpus/ testdata/nvidia_smi/

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "smi/nvidia_smi.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const gpudoctor::Result<gpudoctor::Snapshot> snapshot = gpudoctor::ParseNvidiaSmi(text, "fuzz");
  if (!snapshot) {
    if (snapshot.error().message.empty()) __builtin_trap();
    return 0;
  }
  // Contracts a caller relies on.
  if (snapshot->source != "nvidia-smi:fuzz" || snapshot->gpus.size() > 1024) __builtin_trap();
  for (const gpudoctor::GpuSnapshot& gpu : snapshot->gpus) {
    if (gpu.pci_bus_id.has_value() && gpu.pci_bus_id.value().size() != 12) __builtin_trap();  // "dddd:bb:dd.f"
  }
  return 0;
}
