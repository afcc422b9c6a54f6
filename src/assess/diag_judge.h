// Judging a diagnostic with what only the command knows, beyond the worker's
// own verdict (diag/diag_run.h): the other GPUs (a burn more than 10% slower
// than its peers), NVML before, during and after (new uncorrectable ECC
// errors, retired pages or row remaps; a throttle that is neither thermal nor
// the power cap), the kernel log (an Xid during the test) and the link each
// GPU sits on (pcie bandwidth against what its generation and width allow).
//
//   std::vector<DiagVerdict> verdicts = VerdictsOf(outcomes);
//   JudgeCounters(before, after, verdicts);
//   JudgeXids(events, snapshot, verdicts);
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "diag/diag_run.h"
#include "logs/event.h"
#include "model/pcie_link.h"
#include "model/snapshot.h"

namespace gpudoctor {

// One GPU's result of one test.
struct DiagVerdict {
  int gpu = 0;
  DiagTest test = DiagTest::kMemtest;
  DiagState state = DiagState::kCouldNotRun;
  std::vector<std::string> problems;  // why it is not passed
  std::vector<std::string> notes;     // worth knowing, not faults
  std::string summary;                // one line: what was tested and measured
};

// Marks a verdict faulty with `problem` (a hung or untested GPU stays as it is).
void AddProblem(DiagVerdict& verdict, std::string problem);

// One verdict per GPU of every outcome, with the worker's state and findings.
std::vector<DiagVerdict> VerdictsOf(const std::vector<DiagOutcome>& outcomes);

// The device each worker opened must be NVML's GPU of the same index (by
// PCI bus): a result from another device is not that GPU's, and its verdict
// becomes could_not_run.
void JudgeIdentity(const std::vector<DiagOutcome>& outcomes, const Snapshot& snapshot,
                   std::vector<DiagVerdict>& verdicts);

// A GPU whose verified throughput in a precision is more than 10% below the
// median of the other GPUs that ran it with the same engine is faulty.
inline constexpr double kPeerShortfall = 0.10;
void JudgeBurnPeers(const std::vector<DiagOutcome>& outcomes, std::vector<DiagVerdict>& verdicts);

// What NVML read while the test ran, per GPU index.
struct GpuReadings {
  std::optional<uint32_t> max_temperature_c;
  std::optional<double> max_power_w;
  std::optional<uint32_t> min_sm_clock_mhz, max_sm_clock_mhz;
  uint64_t clock_events = 0;  // every clock_event reason seen
  int samples = 0;
};
void AddReading(const Snapshot& snapshot, std::map<int, GpuReadings>& readings);
// A hardware slowdown or power brake during a burn is a fault; thermal and
// power-cap throttling are notes, as are the figures.
void JudgeReadings(const std::map<int, GpuReadings>& readings, std::vector<DiagVerdict>& verdicts);

// New uncorrectable ECC errors, retired pages (either kind) or row remaps
// between two snapshots are faults; new corrected errors are notes.
void JudgeCounters(const Snapshot& before, const Snapshot& after, std::vector<DiagVerdict>& verdicts);

// An Xid, or the GPU falling off the bus, in the kernel log during the test.
void JudgeXids(const std::vector<LogEvent>& events, const Snapshot& snapshot, std::vector<DiagVerdict>& verdicts);

// Below this share of what the link allows, a direction is a fault; below
// kLinkHealthyShare it is a note (healthy links reach 85-90%).
inline constexpr double kLinkFaultShare = 0.60;
inline constexpr double kLinkHealthyShare = 0.85;
// Pairs far slower than the median pair (below half) are faults.
void JudgeLinks(const std::vector<DiagOutcome>& outcomes, const Snapshot& snapshot, std::vector<DiagVerdict>& verdicts);

}  // namespace gpudoctor
