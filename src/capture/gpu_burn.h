// gpu_burn's output (github.com/wilicc/gpu-burn) as an operator pastes it, read into one "burn" record per GPU.
// Pure: text in, records out; no I/O, no clock.
//
//   GPU 0: Tesla T4 (UUID: GPU-899f...)                 the nvidia-smi -L it runs first
//   11.0%  proc'd: 150 (3392 Gflop/s)   errors: 30472096  (WARNING!)  temps: 63 C
//   ...                                                 one progress record per GPU column, \r or \n apart
//   Tested 1 GPUs:
//           GPU 0: FAULTY
//
// gpu_burn's own verdict is not taken as it is: it calls a GPU OK whose worker died during the burn ("(DIED!)",
// processed -1), and one it never loaded (processed 0: "Couldn't init a GPU test"), and it leaves no verdict at
// all when every worker died ("No clients are alive!  Aborting"). Here a GPU that computed wrong results
// (FAULTY) or whose worker died under load failed the burn; a GPU that did no work could not be tested.
#pragma once

#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/diagnostic.h"

namespace gpudoctor::gpu_burn {

inline constexpr std::string_view kTool = "gpu_burn";

// Whether `text` is gpu_burn's output: its progress records, its final verdict or its abort message.
bool LooksLikeGpuBurn(std::string_view text);

// One record per GPU the output names (the verdict's, else the progress columns', else the GPU list's): test
// "burn", state "faulty", "passed", "could_not_run" or "interrupted" (the output ends before a verdict), with
// what gpu_burn said of that GPU as the summary. The records have no time (the output has none). Fails when the
// output names no GPU.
Result<std::vector<DiagnosticRecord>> ParseGpuBurn(std::string_view text);

}  // namespace gpudoctor::gpu_burn
