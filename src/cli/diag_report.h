// How `gpudoctor diag` tells its verdicts: a block of text per GPU and test
// for the person, or one JSON object per GPU and test for scripts, each with
// the details of its test (bad words, products, links) and NVML's memory
// error state before and after; and at the end of every run, the summary
// (diag/diag_summary.h): a table of every GPU and test and one line.
#pragma once

#include <cstdio>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "assess/diag_judge.h"
#include "diag/diag_summary.h"
#include "model/snapshot.h"

namespace gpudoctor {

// `outcome` may be null: a GPU refused before any test ran.
nlohmann::ordered_json DiagVerdictJson(const DiagVerdict& verdict, const DiagOutcome* outcome, const Snapshot& before,
                                       const Snapshot& after);
void PrintDiagVerdict(const DiagVerdict& verdict, const DiagOutcome* outcome, const Snapshot& before,
                      const Snapshot& after);

// One row per verdict, with the key figure of what its worker measured.
DiagSummary SummarizeDiag(const std::vector<std::pair<const DiagVerdict*, const DiagOutcome*>>& results,
                          int exit_code, std::optional<int> level);
void PrintDiagSummary(std::FILE* out, const DiagSummary& summary);

}  // namespace gpudoctor
