// How `gpudoctor diag` tells its verdicts: a block of text per GPU and test
// for the person, or one JSON object per GPU and test for scripts, each with
// the details of its test (bad words, products, links) and NVML's memory
// error state before and after.
#pragma once

#include <nlohmann/json.hpp>

#include "cli/diag_judge.h"
#include "model/snapshot.h"

namespace gpudoctor {

// `outcome` may be null: a GPU refused before any test ran.
nlohmann::ordered_json DiagVerdictJson(const DiagVerdict& verdict, const DiagOutcome* outcome, const Snapshot& before,
                                       const Snapshot& after);
void PrintDiagVerdict(const DiagVerdict& verdict, const DiagOutcome* outcome, const Snapshot& before,
                      const Snapshot& after);

}  // namespace gpudoctor
