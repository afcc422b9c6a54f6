// What `gpudoctor trace-alloc` reports: the live line of each interval, and at
// the end what was never freed, by call site, with a verdict in the words of
// the agent's memory_leak finding (health/detectors/memory_leak.h: rate,
// unreleased between phases, peak), judged by the same analysis over the
// whole run.
//
//   TraceReport report = BuildTraceReport(ledger, symbolizer, facts, MemoryLeakConfig{});
//   std::fputs(RenderTraceReport(report).c_str(), stderr);   // or TraceReportJson(report)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "health/detectors/memory_leak.h"
#include "trace_alloc/allocation_ledger.h"
#include "trace_alloc/elf_symbols.h"
#include "trace_alloc/trace_ring.h"
#include "trace_alloc/traced_program.h"

namespace gpudoctor {

// How the run went, besides what the records say.
struct TraceRunFacts {
  std::vector<std::string> command;
  std::string program_path;
  std::optional<ProgramStatus> status;  // nullopt: it never started
  uint64_t duration_ns = 0;
  RingCounters counters;
  bool counters_known = true;   // false when the ring's counters could not be trusted
  std::string ring_corruption;  // why the ring was given up on (TraceRing::corruption()); empty when sound
  uint64_t malformed_slots = 0;
  uint64_t skipped_slots = 0;
  uint32_t intervals = 0;       // live intervals closed before the end
  std::string library_problem;  // why the library could not follow the program; empty when it did
};

struct FrameReport {
  std::string function;  // demangled; empty when no symbol covers the address
  std::string module;    // the file's path; empty when no module holds the address
  uint64_t offset = 0;   // in the module (the address without one)
};

struct SiteReport {
  SiteStats stats;
  std::vector<FrameReport> frames;  // innermost first: frames[0] called the CUDA function
  bool kept_growing = false;        // its bytes rose through the last live intervals
};

enum class TraceVerdict { kLeak, kNeverFreed, kClean, kNothingRecorded };
const char* TraceVerdictName(TraceVerdict verdict);  // "leak", "never_freed", "clean", "nothing_recorded"

struct TraceReport {
  TraceRunFacts facts;
  std::vector<TracedProcess> processes;
  std::array<KindTotals, trace_wire::kKindCount> kinds{};
  uint64_t outstanding_bytes = 0;
  uint64_t peak_bytes = 0;
  uint64_t frees_of_unknown = 0;
  uint64_t failed_frees = 0;
  uint64_t records = 0;
  uint64_t records_over_limits = 0;  // ignored at a LedgerLimits bound
  std::vector<SiteReport> never_freed;  // sites still holding memory at the end, most bytes first
  std::vector<SiteReport> sites;        // every site, most bytes allocated first
  std::optional<GrowthAnalysis> growth;
  TraceVerdict verdict = TraceVerdict::kNothingRecorded;
  std::string verdict_text;
  std::vector<std::string> notes;
};

// The growth analysis of memory_leak over the whole run (window and minimum
// span are the run; rate and trough thresholds are `config`'s).
TraceReport BuildTraceReport(const AllocationLedger& ledger, Symbolizer& symbolizer, TraceRunFacts facts,
                             const MemoryLeakConfig& config);
std::string RenderTraceReport(const TraceReport& report);
nlohmann::ordered_json TraceReportJson(const TraceReport& report);

// One live line (and the sites growing), `elapsed_ns` after the start.
std::string RenderInterval(const IntervalSummary& interval, const AllocationLedger& ledger, Symbolizer& symbolizer,
                           uint64_t elapsed_ns);
nlohmann::ordered_json IntervalJson(const IntervalSummary& interval, const AllocationLedger& ledger,
                                    Symbolizer& symbolizer, uint64_t elapsed_ns);


}  // namespace gpudoctor
