// What every `gpudoctor diag` run ends with: one row per GPU and test (the
// GPU, the test, its state, the key figure and the one-line reason) and a
// line that counts them. cli/diag_report.h makes it from the verdicts and
// prints it as a table; with --json it is one {"event":"summary",...} line,
// which `gpudoctor slurm --diag-level` and the agent's diag schedule read back
// from a child `gpudoctor diag --json --quiet`.
//
//   std::puts(DiagSummaryJsonText(summary).c_str());
//   Result<DiagSummary> read = FindDiagSummary(child_output);
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "diag/diag_run.h"

namespace gpudoctor {

struct DiagSummaryRow {
  int gpu = 0;
  DiagTest test = DiagTest::kMemtest;
  DiagState state = DiagState::kCouldNotRun;
  // The key figure: the slowest pattern's GB/s, the slowest precision's
  // TFLOP/s, the link's slower direction in GB/s, or the count of errors or
  // wrong products when there are any; nullopt when the test gave none.
  std::optional<double> value;
  std::string unit;    // "GB/s", "TFLOP/s", "errors", "wrong products"; empty without a value
  std::string figure;  // as shown: "fp64 51.2 TFLOP/s", "3 errors"
  std::string reason;  // the first problem; empty when passed
};

struct DiagSummary {
  std::vector<DiagSummaryRow> rows;  // by GPU, then in the order the tests ran
  int gpus = 0;                      // distinct GPUs in the rows
  int passed = 0, faulty = 0, hung = 0, could_not_run = 0, interrupted = 0;
  int exit_code = 0;
  std::optional<int> level;  // --level, when given
  std::string line;          // "4 GPUs, 12 results: 9 passed, 3 FAULTY (GPU 1 memtest, GPU 2 burn, GPU 3 pcie)"
};

// Counts the rows' states and writes the summary line; rows and the rest are the caller's.
void CountDiagSummary(DiagSummary& summary);

// "PASSED", "FAULTY", "HUNG", "COULD NOT RUN", "INTERRUPTED"
const char* DiagStateLabel(DiagState state);

// {"event":"summary","level":..,"gpus":..,"passed":..,...,"exit_code":..,"line":..,
//  "results":[{"gpu","test","state","value","unit","figure","reason"}]}
std::string DiagSummaryJsonText(const DiagSummary& summary);

// The summary line among a run's JSON lines (the last one when there are
// several); an error when there is none or it cannot be read.
Result<DiagSummary> FindDiagSummary(std::string_view json_lines);

}  // namespace gpudoctor
