// libFuzzer target for the readers of other tools' reports (dcgmi diag, dcgmi health, gpu_burn's output): any
// bytes must give records or an error with a message, never a crash, hang, leak or undefined behaviour.
//
//   fuzz_dcgmi -max_total_time=300 corpus/ testdata/captures/dcgmi_diag/ testdata/captures/gpu_burn/

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "capture/dcgmi.h"
#include "capture/gpu_burn.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  namespace dcgmi = gpudoctor::dcgmi;
  if (dcgmi::LooksLikeDiag(text) || size % 2 == 0) {
    auto records = dcgmi::ParseDiag(text);
    if (!records && records.error().message.empty()) __builtin_trap();
    if (records) {
      for (const gpudoctor::DiagnosticRecord& record : *records) {
        // Contracts a caller relies on: a test name and a state the rules know.
        if (record.test.empty()) __builtin_trap();
        if (record.state != "passed" && record.state != "faulty" && record.state != "could_not_run") __builtin_trap();
      }
    }
  }
  if (dcgmi::LooksLikeHealth(text) || size % 2 == 1) {
    auto conditions = dcgmi::ParseHealth(text);
    if (!conditions && conditions.error().message.empty()) __builtin_trap();
    if (conditions)
      for (const gpudoctor::ReportedCondition& condition : *conditions)
        if (condition.rule_id.empty()) __builtin_trap();
  }
  if (gpudoctor::gpu_burn::LooksLikeGpuBurn(text) || size % 3 == 0) {
    auto records = gpudoctor::gpu_burn::ParseGpuBurn(text);
    if (!records && records.error().message.empty()) __builtin_trap();
    if (records) {
      for (const gpudoctor::DiagnosticRecord& record : *records) {
        if (record.test != "burn" || record.summary.empty()) __builtin_trap();
        if (record.state != "passed" && record.state != "faulty" && record.state != "could_not_run" &&
            record.state != "interrupted")
          __builtin_trap();
      }
    }
  }
  return 0;
}
