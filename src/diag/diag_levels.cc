#include "diag/diag_levels.h"

#include <fmt/format.h>

namespace gpudoctor {

namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

// Level 1 is a quick proof: the patterns that catch a dead cell, a stuck
// bit and an address fault, a burn long enough to verify every precision's
// products, and every link. Level 3 holds the GPUs at full load for the
// length of a job's first hour.
const DiagPlan kLevels[kDiagLevelCount] = {
    {.level = 1,
     .memtest_patterns = {"own_address", "moving_inversions_ones", "moving_inversions_zeros", "random_sequence"},
     .memtest_share = 0.5,
     .burn_duration = seconds(10),
     .transfer_mib = 64,
     .expected = seconds(20),
     .deadline = minutes(5),
     .about = "about 20 s"},
    {.level = 2,
     .memtest_share = 0.9,
     .burn_duration = minutes(2),
     .transfer_mib = 256,
     .expected = minutes(3),
     .deadline = minutes(20),
     .about = "about 3 min"},
    {.level = 3,
     .memtest_share = 0.9,
     .memtest_duration = minutes(20),
     .burn_duration = minutes(40),
     .transfer_mib = 1024,
     .expected = hours(1),
     .deadline = hours(2),
     .about = "about 1 h"},
};

const DiagPlan kDefault = {.level = 0,
                           .memtest_share = 0.9,
                           .burn_duration = minutes(1),
                           .transfer_mib = 256,
                           .expected = minutes(2),
                           .deadline = minutes(20),
                           .about = "about 2 min"};

// "10 s", "20 min", "1 h": the whole unit a level's lengths are written in.
std::string Spoken(Duration duration) {
  const auto s = std::chrono::duration_cast<seconds>(duration).count();
  if (s % 3600 == 0 && s > 0) return fmt::format("{} h", s / 3600);
  if (s % 60 == 0 && s > 0) return fmt::format("{} min", s / 60);
  return fmt::format("{} s", s);
}

}  // namespace

const DiagPlan* FindDiagLevel(int level) {
  if (level < 1 || level > kDiagLevelCount) return nullptr;
  return &kLevels[level - 1];
}

const DiagPlan& DefaultDiagPlan() { return kDefault; }

std::string DescribeDiagLevels() {
  std::string text;
  for (const DiagPlan& plan : kLevels) {
    const std::string patterns =
        plan.memtest_patterns.empty() ? "every pattern" : fmt::format("{} patterns", plan.memtest_patterns.size());
    const std::string memtest =
        plan.memtest_duration == Duration::zero()
            ? fmt::format("memtest ({} over {:.0f}% of free memory, one pass)", patterns, 100 * plan.memtest_share)
            : fmt::format("memtest ({} over {:.0f}% of free memory, repeated for {})", patterns,
                          100 * plan.memtest_share, Spoken(plan.memtest_duration));
    text += fmt::format("  --level {}  {}: {}, a {} verified burn, pcie ({} MiB copies)\n", plan.level, plan.about,
                        memtest, Spoken(plan.burn_duration), plan.transfer_mib);
  }
  return text;
}

}  // namespace gpudoctor
