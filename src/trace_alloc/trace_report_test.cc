#include "trace_alloc/trace_report.h"

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

using namespace trace_wire;

constexpr uint64_t kNsPerMs = 1'000'000;
constexpr uint64_t kMiB = 1 << 20;

TraceRecord Event(RecordType type, uint64_t address, uint64_t bytes, uint32_t site, uint64_t time_ns,
                  Kind kind = Kind::kDevice) {
  TraceRecord r;
  r.type = type;
  r.api = type == RecordType::kAlloc ? Api::kCudaMalloc : Api::kCudaFree;
  r.kind = kind;
  r.pid = 10;
  r.address = address;
  r.bytes = bytes;
  r.site = site;
  r.time_ns = time_ns;
  return r;
}

TraceRunFacts Facts() {
  TraceRunFacts facts;
  facts.command = {"./train", "--epochs", "it's 3"};
  facts.status = ProgramStatus{0, 0, false};
  facts.duration_ns = 2'000 * kNsPerMs;
  facts.counters.processes_attached = 1;
  return facts;
}

TEST(TraceReport, GrowthThatPersistsIsALeakInTheAgentsWords) {
  AllocationLedger ledger;
  // 200 steps of 10 ms: 1 MiB kept, 4 MiB scratch freed.
  for (uint64_t i = 0; i < 200; ++i) {
    ledger.Add(Event(RecordType::kAlloc, 0x100000 + i, kMiB, 1, (i * 10 + 1) * kNsPerMs));
    ledger.Add(Event(RecordType::kAlloc, 0x900000, 4 * kMiB, 2, (i * 10 + 2) * kNsPerMs));
    ledger.Add(Event(RecordType::kFree, 0x900000, 0, 0, (i * 10 + 3) * kNsPerMs));
  }
  ledger.Finish(2'000 * kNsPerMs);
  Symbolizer symbolizer;
  TraceReport report = BuildTraceReport(ledger, symbolizer, Facts(), MemoryLeakConfig{});
  EXPECT_EQ(report.verdict, TraceVerdict::kLeak);
  ASSERT_TRUE(report.growth);
  EXPECT_NEAR(report.growth->rate_bytes_per_min / kMiB, 6000, 150);  // 100 MiB/s
  EXPECT_EQ(report.growth->peak_bytes, 204.0 * kMiB);
  EXPECT_EQ(report.growth->latest_bytes, 200.0 * kMiB);
  EXPECT_NE(report.verdict_text.find("memory leak: CUDA memory keeps growing: rate"), std::string::npos);
  EXPECT_NE(report.verdict_text.find("unreleased between phases"), std::string::npos);
  EXPECT_NE(report.verdict_text.find("200.0 MiB never freed at exit, in 200 allocations from 1 site"),
            std::string::npos)
      << report.verdict_text;
  ASSERT_EQ(report.never_freed.size(), 1u);
  EXPECT_EQ(report.never_freed[0].stats.site, 1u);
  EXPECT_EQ(report.never_freed[0].stats.outstanding_count, 200u);

  const std::string text = RenderTraceReport(report);
  EXPECT_NE(text.find("./train --epochs 'it'\\''s 3' exited with status 0 after 2s"), std::string::npos) << text;
  EXPECT_NE(text.find("Never freed at exit: 200.0 MiB in 200 allocations from 1 site"), std::string::npos) << text;
  EXPECT_NE(text.find("200.0 MiB in 200 allocations by cudaMalloc (device); 200 made, 0 freed"), std::string::npos)
      << text;
  EXPECT_NE(text.find("(call stack not recorded)"), std::string::npos) << text;

  nlohmann::ordered_json json = TraceReportJson(report);
  EXPECT_EQ(json["verdict"]["state"], "leak");
  EXPECT_EQ(json["totals"]["allocations"], 400);
  EXPECT_EQ(json["totals"]["frees"], 200);
  EXPECT_EQ(json["kinds"]["device"]["outstanding_bytes"], 200 * kMiB);
  EXPECT_EQ(json["kinds"]["device"]["peak_bytes"], 204 * kMiB);
  EXPECT_EQ(json["never_freed"][0]["outstanding_allocations"], 200);
  EXPECT_EQ(json["status"]["exit_code"], 0);
  EXPECT_TRUE(json["library"]["loaded"]);
}

TEST(TraceReport, OneAllocationKeptIsNeverFreedButNoLeak) {
  AllocationLedger ledger;
  ledger.Add(Event(RecordType::kAlloc, 0x1, 64 * kMiB, 1, 1 * kNsPerMs, Kind::kManaged));
  for (uint64_t i = 0; i < 100; ++i) {
    ledger.Add(Event(RecordType::kAlloc, 0x2, kMiB, 2, (i * 10 + 5) * kNsPerMs));
    ledger.Add(Event(RecordType::kFree, 0x2, 0, 0, (i * 10 + 6) * kNsPerMs));
  }
  ledger.Finish(1'000 * kNsPerMs);
  Symbolizer symbolizer;
  TraceReport report = BuildTraceReport(ledger, symbolizer, Facts(), MemoryLeakConfig{});
  EXPECT_EQ(report.verdict, TraceVerdict::kNeverFreed);
  EXPECT_EQ(report.verdict_text.rfind("no steady growth, but 64.0 MiB never freed at exit, in 1 allocation from 1 site", 0),
            0u)
      << report.verdict_text;
  EXPECT_EQ(report.kinds[static_cast<size_t>(Kind::kManaged)].outstanding_bytes, 64 * kMiB);
}

TEST(TraceReport, CleanAndNothingRecorded) {
  Symbolizer symbolizer;
  AllocationLedger clean;
  clean.Add(Event(RecordType::kAlloc, 0x1, 3 * kMiB, 1, kNsPerMs));
  clean.Add(Event(RecordType::kFree, 0x1, 0, 0, 2 * kNsPerMs));
  clean.Finish(3 * kNsPerMs);
  TraceReport report = BuildTraceReport(clean, symbolizer, Facts(), MemoryLeakConfig{});
  EXPECT_EQ(report.verdict, TraceVerdict::kClean);
  EXPECT_EQ(report.verdict_text, "no leak: every allocation was freed (peak 3.0 MiB)");

  AllocationLedger nothing;
  nothing.Finish(kNsPerMs);
  TraceRunFacts facts = Facts();
  facts.library_problem = "the tracing library could not load: it is statically linked";
  report = BuildTraceReport(nothing, symbolizer, facts, MemoryLeakConfig{});
  EXPECT_EQ(report.verdict, TraceVerdict::kNothingRecorded);
  const std::string text = RenderTraceReport(report);
  EXPECT_NE(text.find("Note: the tracing library could not load: it is statically linked"), std::string::npos) << text;
  EXPECT_FALSE(TraceReportJson(report)["library"]["loaded"]);
}

TEST(TraceReport, IntervalLinesNameGrowingSites) {
  AllocationLedger ledger;
  ledger.Add(Event(RecordType::kAlloc, 0x1, 2 * kMiB, 5, 1 * kNsPerMs));
  IntervalSummary summary = ledger.CloseInterval(1'001 * kNsPerMs);
  Symbolizer symbolizer;
  const std::string line = RenderInterval(summary, ledger, symbolizer, 1'000 * kNsPerMs);
  EXPECT_NE(line.find("device 2.0 MiB (+2.0 MiB, 2.0 MiB/s)"), std::string::npos) << line;
  EXPECT_NE(line.find("growing: +2.0 MiB (holds 2.0 MiB, 1 interval in a row)"), std::string::npos) << line;
  nlohmann::ordered_json json = IntervalJson(summary, ledger, symbolizer, 1'000 * kNsPerMs);
  EXPECT_EQ(json["event"], "interval");
  EXPECT_EQ(json["growth_bytes"], 2 * kMiB);
  EXPECT_EQ(json["growing_sites"][0]["site"], 5);
}

}  // namespace
}  // namespace gpudoctor
