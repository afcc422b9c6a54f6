#include "trace_alloc/allocation_ledger.h"

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

using namespace trace_wire;

constexpr uint64_t kMs = 1'000'000;

TraceRecord Alloc(uint64_t address, uint64_t bytes, uint32_t site, uint64_t time_ns, Api api = Api::kCudaMalloc,
                  Kind kind = Kind::kDevice, uint32_t pid = 100) {
  TraceRecord r;
  r.type = RecordType::kAlloc;
  r.api = api;
  r.kind = kind;
  r.pid = pid;
  r.address = address;
  r.bytes = bytes;
  r.site = site;
  r.time_ns = time_ns;
  return r;
}

TraceRecord Free(uint64_t address, uint64_t time_ns, Api api = Api::kCudaFree, int result = 0, uint32_t pid = 100) {
  TraceRecord r;
  r.type = RecordType::kFree;
  r.api = api;
  r.pid = pid;
  r.address = address;
  r.time_ns = time_ns;
  r.result = result;
  return r;
}

TEST(AllocationLedger, PairsFreesWithAllocationsByKindAndSite) {
  AllocationLedger ledger;
  ledger.Add(Alloc(0x1000, 100, 1, 1 * kMs));
  ledger.Add(Alloc(0x2000, 50, 2, 2 * kMs, Api::kCudaMallocManaged, Kind::kManaged));
  ledger.Add(Alloc(0x3000, 30, 1, 3 * kMs));
  ledger.Add(Free(0x1000, 4 * kMs));
  ledger.Add(Free(0x9999, 5 * kMs));                  // never seen allocated
  ledger.Add(Free(0x3000, 6 * kMs, Api::kCudaFree, 1));  // the call failed: still held

  const KindTotals& device = ledger.kinds()[static_cast<size_t>(Kind::kDevice)];
  EXPECT_EQ(device.allocations, 2u);
  EXPECT_EQ(device.frees, 1u);
  EXPECT_EQ(device.outstanding_bytes, 30u);
  EXPECT_EQ(device.peak_bytes, 130u);
  EXPECT_EQ(ledger.kinds()[static_cast<size_t>(Kind::kManaged)].outstanding_bytes, 50u);
  EXPECT_EQ(ledger.outstanding_bytes(), 80u);
  EXPECT_EQ(ledger.peak_bytes(), 180u);
  EXPECT_EQ(ledger.frees_of_unknown(), 1u);
  EXPECT_EQ(ledger.failed_frees(), 1u);
  const SiteStats& site = ledger.sites().at(1);
  EXPECT_EQ(site.allocations, 2u);
  EXPECT_EQ(site.frees, 1u);
  EXPECT_EQ(site.outstanding_bytes, 30u);
  EXPECT_EQ(site.peak_outstanding_bytes, 130u);
}

TEST(AllocationLedger, ProcessesHaveTheirOwnAddresses) {
  AllocationLedger ledger;
  ledger.Add(Alloc(0x1000, 10, 1, kMs, Api::kCudaMalloc, Kind::kDevice, 100));
  ledger.Add(Alloc(0x1000, 20, 1, kMs, Api::kCudaMalloc, Kind::kDevice, 200));  // a forked child
  ledger.Add(Free(0x1000, 2 * kMs, Api::kCudaFree, 0, 200));
  EXPECT_EQ(ledger.outstanding_bytes(), 10u);
}

TEST(AllocationLedger, FailedAllocationsAreCountedNotHeld) {
  AllocationLedger ledger;
  TraceRecord failed = Alloc(0, 1 << 30, 3, kMs);
  failed.result = 2;  // out of memory
  ledger.Add(failed);
  EXPECT_EQ(ledger.outstanding_bytes(), 0u);
  EXPECT_EQ(ledger.sites().at(3).failed_allocations, 1u);
  EXPECT_EQ(ledger.sites().at(3).last_error, 2);
  EXPECT_EQ(ledger.kinds()[static_cast<size_t>(Kind::kDevice)].failed_allocations, 1u);
}

TEST(AllocationLedger, PhysicalMemoryStaysWhileMappedAfterRelease) {
  AllocationLedger ledger;
  ledger.Add(Alloc(7, 64, 1, kMs, Api::kCuMemCreate));  // handle 7
  TraceRecord map;
  map.type = RecordType::kMap;
  map.pid = 100;
  map.address = 0x10000;
  map.bytes = 64;
  map.extra = 7;
  ledger.Add(map);
  ledger.Add(Free(7, 2 * kMs, Api::kCuMemRelease));
  EXPECT_EQ(ledger.outstanding_bytes(), 64u) << "released but still mapped";
  TraceRecord unmap;
  unmap.type = RecordType::kUnmap;
  unmap.pid = 100;
  unmap.address = 0x10000;
  unmap.bytes = 64;
  ledger.Add(unmap);
  EXPECT_EQ(ledger.outstanding_bytes(), 0u);
  EXPECT_EQ(ledger.sites().at(1).frees, 1u);
  // A pointer with the handle's value is another thing.
  ledger.Add(Alloc(7, 5, 2, 3 * kMs));
  ledger.Add(Free(7, 4 * kMs, Api::kCuMemRelease));
  EXPECT_EQ(ledger.outstanding_bytes(), 5u);
  EXPECT_EQ(ledger.frees_of_unknown(), 1u);
}

TEST(AllocationLedger, IntervalsNameTheSitesThatKeepGrowing) {
  AllocationLedger ledger;
  uint64_t address = 0x1000, t = kMs;
  for (int interval = 0; interval < 3; ++interval) {
    for (int i = 0; i < 4; ++i) ledger.Add(Alloc(address++, 10, 1, t++));  // site 1 only grows
    ledger.Add(Alloc(0x9000, 100, 2, t++));                                 // site 2 allocates and frees
    ledger.Add(Free(0x9000, t++));
    IntervalSummary summary = ledger.CloseInterval(t++);
    EXPECT_EQ(summary.growth_total_bytes, 40);
    EXPECT_EQ(summary.allocations, 5u);
    EXPECT_EQ(summary.frees, 1u);
    ASSERT_EQ(summary.growing.size(), 1u);
    EXPECT_EQ(summary.growing[0].site, 1u);
    EXPECT_EQ(summary.growing[0].growth_bytes, 40);
    EXPECT_EQ(summary.growing[0].intervals_growing, static_cast<uint32_t>(interval + 1));
  }
  // A quiet interval ends the run of growth.
  IntervalSummary quiet = ledger.CloseInterval(t + kMs);
  EXPECT_TRUE(quiet.growing.empty());
  EXPECT_EQ(ledger.sites().at(1).intervals_growing, 0u);
}

TEST(AllocationLedger, SitesFramesModulesAndTextsAreAssembled) {
  AllocationLedger ledger;
  TraceRecord site;
  site.type = RecordType::kSite;
  site.site = 4;
  site.bytes = 2;
  ledger.Add(site);
  TraceRecord frame;
  frame.type = RecordType::kFrame;
  frame.site = 4;
  frame.index = 1;
  frame.extra = 9;
  frame.address = 0x40;
  ledger.Add(frame);
  TraceRecord module;
  module.type = RecordType::kModule;
  module.extra = 9;
  module.address = 0x7f0000;
  module.bytes = 45;
  ledger.Add(module);
  const std::string path = "/opt/very/long/path/to/some/library/libx.so.12";  // 46: one byte over the length sent
  for (size_t piece = 0; piece * kTextBytes < path.size(); ++piece) {
    TraceRecord text;
    text.type = RecordType::kText;
    text.text_owner = TextOwner::kModulePath;
    text.text_id = 9;
    text.index = static_cast<uint16_t>(piece);
    text.text = path.substr(piece * kTextBytes, kTextBytes);
    ledger.Add(text);
  }
  ASSERT_EQ(ledger.FramesOf(4).size(), 2u);
  EXPECT_EQ(ledger.FramesOf(4)[1].module, 9u);
  EXPECT_EQ(ledger.FramesOf(4)[1].offset, 0x40u);
  EXPECT_EQ(ledger.modules().at(9).load_bias, 0x7f0000u);
  EXPECT_EQ(ledger.modules().at(9).path, path.substr(0, kTextBytes)) << "a piece beyond the announced length is dropped";
}

TEST(EnvelopeSeries, KeepsEveryTroughAndPeakWhenBucketsMerge) {
  EnvelopeSeries series;
  // A saw-tooth for 10 s (far beyond 2048 buckets of 1 ms): 100 up, back to a
  // trough that rises by 1 each second.
  for (uint64_t second = 0; second < 10; ++second) {
    series.Add(second * 1'000 * kMs, static_cast<double>(second));
    series.Add(second * 1'000 * kMs + 500 * kMs, static_cast<double>(second + 100));
    series.Add(second * 1'000 * kMs + 900 * kMs, static_cast<double>(second));
  }
  const auto points = series.Points(10'000 * kMs);
  double low = 1e9, high = 0;
  for (const auto& [t, v] : points) {
    low = std::min(low, v);
    high = std::max(high, v);
  }
  EXPECT_EQ(low, 0);
  EXPECT_EQ(high, 109);
  EXPECT_EQ(points.back().second, 9);
  EXPECT_LE(points.size(), 2 * EnvelopeSeries::kBuckets + 1);
}

// Records come from memory the program can write: however many distinct ids
// it forges, the ledger keeps no more than its limits and counts the rest.
TEST(AllocationLedger, ForgedRecordsCannotGrowItPastItsLimits) {
  AllocationLedger ledger(LedgerLimits{.live_allocations = 4, .mappings = 2, .sites = 3, .modules = 2, .processes = 2});
  for (uint32_t i = 0; i < 100; ++i) ledger.Add(Alloc(0x1000 * (i + 1), 10, 1 + i % 2, (i + 1) * kMs));
  EXPECT_EQ(ledger.kinds()[static_cast<size_t>(Kind::kDevice)].outstanding_count, 4u);
  EXPECT_EQ(ledger.outstanding_bytes(), 40u);
  for (uint32_t site = 10; site < 110; ++site) {
    TraceRecord frame;
    frame.type = RecordType::kFrame;
    frame.site = site;
    frame.index = 3;
    ledger.Add(frame);
    TraceRecord module;
    module.type = RecordType::kModule;
    module.extra = site;
    ledger.Add(module);
    TraceRecord attach;
    attach.type = RecordType::kAttach;
    attach.pid = site;
    ledger.Add(attach);
  }
  EXPECT_LE(ledger.sites().size(), 3u);
  EXPECT_EQ(ledger.modules().size(), 2u);
  EXPECT_EQ(ledger.processes().size(), 2u);
  EXPECT_GT(ledger.over_limits(), 300u);
}

}  // namespace
}  // namespace gpudoctor
