// AllocationLedger: what the records of a traced program say. It pairs every
// free with its allocation, keeps the bytes outstanding by kind, by call site
// and over time, and holds the sites' raw frames and the modules they point
// into for symbolising later. Pure logic over records, so tests feed it
// records directly.
//
//   AllocationLedger ledger;
//   ledger.Add(record);                          // every record, in ring order
//   IntervalSummary now = ledger.CloseInterval(clock_ns);  // every --interval
//   ledger.Finish(end_ns);                       // then read sites(), kinds(), ...
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "trace_alloc/trace_records.h"

namespace gpudoctor {

struct KindTotals {
  uint64_t outstanding_bytes = 0;
  uint64_t outstanding_count = 0;
  uint64_t peak_bytes = 0;
  uint64_t allocations = 0;  // successful
  uint64_t bytes_allocated = 0;
  uint64_t frees = 0;  // successful frees of an allocation seen
  uint64_t failed_allocations = 0;
};

struct SiteFrame {
  uint32_t module = 0;  // 0: no module holds the address
  uint64_t offset = 0;  // from the module's load bias (the address itself without a module)
};

// One call stack that allocated.
struct SiteStats {
  uint32_t site = 0;  // 0: stacks beyond the library's site table
  uint32_t pid = 0;   // the process that first used it
  trace_wire::Api api = trace_wire::Api::kNone;  // the entry point of its first allocation
  trace_wire::Kind kind = trace_wire::Kind::kNone;
  uint64_t allocations = 0;
  uint64_t bytes_allocated = 0;
  uint64_t frees = 0;
  uint64_t failed_allocations = 0;
  int32_t last_error = 0;
  uint64_t outstanding_bytes = 0;
  uint64_t outstanding_count = 0;
  uint64_t peak_outstanding_bytes = 0;
  // Growth of its outstanding bytes in the last few intervals, oldest first.
  std::vector<int64_t> recent_growth;
  uint64_t outstanding_at_last_interval = 0;
  uint32_t intervals_growing = 0;  // intervals in a row whose growth was positive, up to now
};

struct ModuleInfo {
  uint64_t load_bias = 0;
  uint64_t path_length = 0;  // as announced
  std::string path;
};

struct TracedProcess {
  uint32_t pid = 0;
  uint32_t parent = 0;
  std::string executable;
  bool exited_normally = false;  // its library's destructor ran
};

struct SiteGrowth {
  uint32_t site = 0;
  int64_t growth_bytes = 0;  // in the interval
  uint64_t outstanding_bytes = 0;
  uint32_t intervals_growing = 0;
};

struct IntervalSummary {
  uint64_t start_ns = 0, end_ns = 0;
  std::array<KindTotals, trace_wire::kKindCount> kinds{};
  std::array<int64_t, trace_wire::kKindCount> growth_bytes{};  // per kind, in the interval
  uint64_t outstanding_bytes = 0;  // every kind
  int64_t growth_total_bytes = 0;
  uint64_t peak_bytes = 0;  // every kind, since the start
  uint64_t allocations = 0, frees = 0;  // in the interval
  std::vector<SiteGrowth> growing;  // sites whose outstanding bytes grew in each of their last intervals (up to 3)
};

// Outstanding bytes over time, kept as the lowest and highest value of each
// time bucket; buckets double in width when they run out, so memory stays
// bounded however long the program runs and every trough and peak is kept.
class EnvelopeSeries {
 public:
  static constexpr size_t kBuckets = 2048;
  void Add(uint64_t time_ns, double value);
  // (time, value) points: each bucket's low and high, empty buckets carrying
  // the value before them, and the last value at `end_ns`.
  std::vector<std::pair<uint64_t, double>> Points(uint64_t end_ns) const;
  uint64_t start_ns() const { return start_ns_; }
  bool empty() const { return !started_; }

 private:
  struct Bucket {
    double low = 0, high = 0, last = 0;
    bool used = false;
  };
  void Include(size_t index, double value);
  bool started_ = false;
  uint64_t start_ns_ = 0;
  uint64_t width_ns_ = 1'000'000;  // 1 ms, doubling
  double last_ = 0;
  std::vector<Bucket> buckets_;
};

// How much the ledger keeps, at most. The traced program writes the records,
// so one that scribbles over its ring must not grow gpudoctor without bound:
// a record that would need an entry past a limit is counted in
// over_limits() and otherwise ignored. The limits are far beyond real
// programs (the library itself keeps 65,536 sites and 1,024 modules a
// process); at them the ledger holds about 400 MB.
struct LedgerLimits {
  size_t live_allocations = 1 << 22;
  size_t mappings = 1 << 20;
  size_t sites = 1 << 17;
  size_t modules = 1 << 14;
  size_t processes = 1 << 14;
};

class AllocationLedger {
 public:
  explicit AllocationLedger(LedgerLimits limits = {}) : limits_(limits) {}
  void Add(const TraceRecord& record);
  // Closes the interval that ends at `now_ns`: what changed since the last one.
  IntervalSummary CloseInterval(uint64_t now_ns);
  // The program ended at `end_ns`: the series gets its last point.
  void Finish(uint64_t end_ns);

  const std::array<KindTotals, trace_wire::kKindCount>& kinds() const { return kinds_; }
  uint64_t outstanding_bytes() const { return outstanding_; }
  uint64_t peak_bytes() const { return peak_; }
  const std::map<uint32_t, SiteStats>& sites() const { return sites_; }
  // The frames of a site, outermost last; empty when it was never described.
  std::vector<SiteFrame> FramesOf(uint32_t site) const;
  const std::map<uint32_t, ModuleInfo>& modules() const { return modules_; }
  const std::map<uint32_t, TracedProcess>& processes() const { return processes_; }
  const EnvelopeSeries& series() const { return series_; }
  uint64_t first_time_ns() const { return first_ns_; }
  uint64_t last_time_ns() const { return last_ns_; }
  uint64_t end_ns() const { return end_ns_; }

  uint64_t records() const { return records_; }
  uint64_t frees_of_unknown() const { return frees_of_unknown_; }  // pointers allocated before or outside tracing
  uint64_t failed_frees() const { return failed_frees_; }
  uint64_t maps() const { return maps_; }
  uint64_t over_limits() const { return over_limits_; }  // records ignored at a LedgerLimits bound

 private:
  struct Key {
    uint32_t pid;
    bool handle;  // a cuMemCreate handle, not an address
    uint64_t value;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<uint64_t>()(k.value * 31 + k.pid * 2 + k.handle); }
  };
  struct Live {
    uint64_t bytes = 0;
    uint32_t site = 0;
    trace_wire::Kind kind = trace_wire::Kind::kNone;
    uint32_t references = 1;  // a handle: itself, until released, and each mapping of it
    bool released = false;
  };
  struct Mapping {
    uint64_t bytes = 0;
    uint64_t handle = 0;
  };

  void OnAlloc(const TraceRecord& r);
  void OnFree(const TraceRecord& r);
  void OnMap(const TraceRecord& r);
  void OnUnmap(const TraceRecord& r);
  void OnText(const TraceRecord& r);
  void Drop(std::unordered_map<Key, Live, KeyHash>::iterator it);  // the memory is gone
  void Unreference(const Key& key);
  SiteStats* Site(uint32_t site, const TraceRecord& r);  // null past the limit
  // The entry for `key` in `table`, made when there is room; null (and the
  // record counted as over the limits) when not.
  template <typename Table, typename EntryKey>
  typename Table::mapped_type* Entry(Table& table, const EntryKey& key, size_t limit);
  void Note(uint64_t time_ns);

  LedgerLimits limits_;
  uint64_t over_limits_ = 0;

  std::unordered_map<Key, Live, KeyHash> live_;
  std::map<std::pair<uint32_t, uint64_t>, Mapping> mappings_;  // (pid, address) -> handle
  std::array<KindTotals, trace_wire::kKindCount> kinds_{};
  std::map<uint32_t, SiteStats> sites_;
  std::map<uint32_t, std::vector<SiteFrame>> frames_;
  std::map<uint32_t, ModuleInfo> modules_;
  std::map<uint32_t, TracedProcess> processes_;
  EnvelopeSeries series_;
  uint64_t outstanding_ = 0, peak_ = 0;
  uint64_t first_ns_ = 0, last_ns_ = 0, end_ns_ = 0;
  uint64_t records_ = 0, frees_of_unknown_ = 0, failed_frees_ = 0, maps_ = 0;
  // The interval being filled.
  uint64_t interval_start_ns_ = 0, interval_allocations_ = 0, interval_frees_ = 0;
  std::array<uint64_t, trace_wire::kKindCount> kind_at_interval_{};
  uint64_t total_at_interval_ = 0;
};

}  // namespace gpudoctor
