// libFuzzer target for the TOML config, read as the agent reads one file for
// all three of its parts: the health config (rules, host, checklist), the
// [detectors] trend config and [alerts]. Any bytes must give a config or an
// error with a message, never a crash, hang, leak or undefined behaviour.
//
//   fuzz_config -max_total_time=300 corpus/ testdata/fuzz_seeds/fuzz_config/

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/alert_config.h"
#include "health/detectors/trend_config.h"
#include "health/health_config.h"

namespace {

template <typename T>
void CheckResult(const gpudoctor::Result<T>& result) {
  if (!result && result.error().message.empty()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const gpudoctor::Result<gpudoctor::HealthConfig> health =
      gpudoctor::ApplyHealthConfig(gpudoctor::DefaultHealthConfig(), text, "fuzz");
  CheckResult(health);
  // A config that loads keeps a remedy for every rule the checks report.
  if (health && health->rules.size() < gpudoctor::DefaultHealthConfig().rules.size()) __builtin_trap();
  CheckResult(gpudoctor::ParseTrendConfig(text));
  CheckResult(gpudoctor::ParseAlertConfig(text));
  return 0;
}
