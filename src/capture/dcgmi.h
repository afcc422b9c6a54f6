// DCGM's own reports as an operator pastes them: `dcgmi diag` (its tests' results) and `dcgmi health -c` (what
// its health watches found). Pure: text in, records out; no I/O, no clock.
//
//   +---------------------------+------------------------------------------------+
//   | Diagnostic                | Result                                         |
//   +===========================+================================================+
//   |-----  Deployment  --------+------------------------------------------------|
//   | Denylist                  | Pass                                           |
//   +-----  Hardware  ----------+------------------------------------------------+
//   | GPU Memory                | Pass - GPUs: 1, 2, 3                           |
//   |                           | Fail - GPU: 0                                  |
//   | Warning                   | GPU 0 Thermal violations totaling 13.3 second  |
//   |                           | s started at 9.7 seconds into the test for GP  |
//
// DCGM wraps a message over the rows at a fixed width, inside words; the reader joins it back. Its 2.x and
// 3.x reports give a test's result per GPU list ("Fail - GPU: 0", "Pass - All"), its 4.x reports one line per
// GPU ("GPU0: Fail"). `dcgmi diag -j` gives the same results as a JSON document (2.x and 3.x under "DCGM GPU
// Diagnostic", GPUs as "gpu_ids" or "gpu_id"; 4.x under "DCGM Diagnostic", GPUs as entities), read whole when it
// is whole and key by key when it is an excerpt. A test becomes the gpudoctor test that tries the same thing
// (memory -> memtest, the stress tests -> burn, PCIe -> pcie, the checks of the software set-up -> software), or
// keeps DCGM's name ("inforom").
#pragma once

#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/diagnostic.h"
#include "model/reported_condition.h"

namespace gpudoctor::dcgmi {

// Whether `text` (its first lines are enough) is a `dcgmi diag` report, whole or an excerpt of its rows.
bool LooksLikeDiag(std::string_view text);

// One record per GPU and test DCGM ran: "faulty" for Fail, "could_not_run" for Skip, else "passed", with the
// warnings and errors DCGM printed for that GPU as the summary. A result for "All" GPUs stands for each GPU
// the report names anywhere; a report that names none gives GPU 0. The records have no time (the report has
// none): the caller stamps them. Fails when no test result is found.
Result<std::vector<DiagnosticRecord>> ParseDiag(std::string_view text);

// Whether `text` is a `dcgmi health -c` report (its table, or `-j`'s JSON), or the error dcgmi health prints
// instead of one.
bool LooksLikeHealth(std::string_view text);

// What DCGM's health watches found, one condition per GPU and watched system, under the rule that judges the
// same thing live. A healthy report gives none. Fails when no "Overall Health" line is found, with dcgmi's
// own error line when it printed one instead ("Error: Health watches not enabled. ...").
Result<std::vector<ReportedCondition>> ParseHealth(std::string_view text);

}  // namespace gpudoctor::dcgmi
