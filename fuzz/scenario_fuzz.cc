// libFuzzer target for the fake NVML library's scenario format
// (testing/fake_nvml/scenario.h, docs/scenarios.md). Any bytes must give a
// scenario or an error with a message; a scenario that parses must answer
// every reading at any time without a crash or undefined behaviour.
//
//   fuzz_scenario -max_total_time=300 corpus/ testdata/fuzz_seeds/fuzz_scenario/

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpudoctor::fake_nvml;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const gpudoctor::Result<Scenario> scenario = ParseScenario(text, "fuzz");
  if (!scenario) {
    if (scenario.error().message.empty()) __builtin_trap();
    return 0;
  }
  // The library reads numbers at scenario times around the clock's start.
  for (const GpuSpec& gpu : scenario->gpus) {
    for (double t : {0.0, scenario->start, scenario->start + 1e3, 1e9}) {
      for (size_t i = 0; i < kGpuFieldCount; ++i) {
        const auto field = static_cast<GpuField>(i);
        if (KindOf(field) == FieldKind::kNumber) (void)gpu.Number(field, t);
      }
      for (const ProcessSpec& process : gpu.processes) (void)process.used_memory_mib.At(t);
      for (const NvLinkSpec& link : gpu.nvlinks)
        for (const Track& counter : link.errors) (void)counter.At(t);
    }
  }
  return 0;
}
