// The parent's reading of a diagnostic worker's output (one JSON line at a
// time), the worker's command line and a child diag's summary line: arbitrary
// bytes must never crash, and a settled outcome must be consistent.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "diag/diag_run.h"
#include "diag/diag_summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  for (gpudoctor::DiagTest test :
       {gpudoctor::DiagTest::kMemtest, gpudoctor::DiagTest::kBurn, gpudoctor::DiagTest::kPcie}) {
    gpudoctor::DiagOutcome outcome{.test = test, .devices = {0}};
    gpudoctor::DiagProgress progress;
    for (size_t start = 0; start <= input.size();) {
      const size_t end = std::min(input.find('\n', start), input.size());
      const auto read = gpudoctor::ReadWorkerLine(input.substr(start, end - start), outcome, progress);
      // A settled outcome holds at most the result of its own test.
      if (read == gpudoctor::WorkerLine::kFinal && (outcome.memtest.has_value() + outcome.burn.has_value() +
                                                    outcome.pcie.has_value()) > 1)
        __builtin_trap();
      start = end + 1;
    }
  }
  // The same bytes as a command line, split at NULs.
  std::vector<std::string> arguments;
  for (size_t start = 0; start <= input.size();) {
    const size_t end = std::min(input.find('\0', start), input.size());
    arguments.emplace_back(input.substr(start, end - start));
    start = end + 1;
  }
  (void)gpudoctor::ParseDiagWorkerArguments(arguments);
  // The same bytes as a child diag's output, read for its summary line.
  (void)gpudoctor::FindDiagSummary(input);
  return 0;
}
