// The run lengths of `gpudoctor diag --level 1|2|3`, in the shape of
// `dcgmi diag -r 1|2|3`: level 1 proves in seconds that the GPUs work, level
// 2 takes minutes, level 3 about an hour. Each level is data: which patterns
// over how much memory for how long, how long the burn runs, how much each
// copy moves. docs/diag.md shows the same table; an explicit option on the
// command line overrides the level's value.
//
//   const DiagPlan* plan = FindDiagLevel(2);        // nullptr: no such level
//   run.memtest.patterns = plan->memtest_patterns;
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"

namespace gpudoctor {

struct DiagPlan {
  int level = 0;  // 0: the plan without --level
  std::vector<std::string> memtest_patterns;  // empty: every pattern
  double memtest_share = 0.9;                 // of each GPU's free memory
  Duration memtest_duration{};                // zero: one pass; else repeat until spent
  Duration burn_duration = std::chrono::minutes(1);
  uint64_t transfer_mib = 256;                // per pcie copy
  // Roughly how long a run of the three tests takes, and the longest it may
  // take before a caller that runs it for someone else (gpudoctor slurm, the
  // agent's schedule) ends it.
  Duration expected{};
  Duration deadline{};
  std::string_view about;  // "about 20 s", for --help and the docs
};

inline constexpr int kDiagLevelCount = 3;

// Level 1 to kDiagLevelCount, or nullptr.
const DiagPlan* FindDiagLevel(int level);
// What `gpudoctor diag` runs without --level.
const DiagPlan& DefaultDiagPlan();

// One line per level for --help: "  --level 1  about 20 s: memtest (4 patterns over 50% ...), ...".
std::string DescribeDiagLevels();

}  // namespace gpudoctor
