#include "trace_alloc/allocation_ledger.h"

#include <algorithm>

namespace gpudoctor {

using namespace trace_wire;

// ---- EnvelopeSeries ----

void EnvelopeSeries::Include(size_t index, double value) {
  Bucket& bucket = buckets_[index];
  if (!bucket.used) {
    bucket = {value, value, value, true};
    return;
  }
  bucket.low = std::min(bucket.low, value);
  bucket.high = std::max(bucket.high, value);
  bucket.last = value;
}

void EnvelopeSeries::Add(uint64_t time_ns, double value) {
  if (!started_) {
    started_ = true;
    start_ns_ = time_ns;
    buckets_.assign(kBuckets, {});
    buckets_[0] = {0, 0, 0, true};  // nothing was allocated before the first record
  }
  time_ns = std::max(time_ns, start_ns_);
  while ((time_ns - start_ns_) / width_ns_ >= kBuckets) {
    std::vector<Bucket> merged(kBuckets);
    for (size_t i = 0; i < kBuckets / 2; ++i) {
      const Bucket &a = buckets_[2 * i], &b = buckets_[2 * i + 1];
      if (a.used && b.used) merged[i] = {std::min(a.low, b.low), std::max(a.high, b.high), b.last, true};
      else merged[i] = a.used ? a : b;
    }
    buckets_ = std::move(merged);
    width_ns_ *= 2;
  }
  const size_t index = (time_ns - start_ns_) / width_ns_;
  Include(index, last_);  // the value before the change held in this bucket too
  Include(index, value);
  last_ = value;
}

std::vector<std::pair<uint64_t, double>> EnvelopeSeries::Points(uint64_t end_ns) const {
  std::vector<std::pair<uint64_t, double>> points;
  if (!started_) return points;
  end_ns = std::max(end_ns, start_ns_);
  const size_t last_index = std::min<size_t>((end_ns - start_ns_) / width_ns_, kBuckets - 1);
  double carried = 0;
  for (size_t i = 0; i <= last_index; ++i) {
    const uint64_t middle = start_ns_ + i * width_ns_ + width_ns_ / 2;
    const uint64_t at = std::min(middle, end_ns);
    const Bucket& bucket = buckets_[i];
    if (!bucket.used) {
      points.emplace_back(at, carried);
      continue;
    }
    points.emplace_back(at, bucket.low);
    if (bucket.high != bucket.low) points.emplace_back(at, bucket.high);
    carried = bucket.last;
  }
  points.emplace_back(end_ns, last_);
  return points;
}

// ---- AllocationLedger ----

void AllocationLedger::Note(uint64_t time_ns) {
  if (time_ns == 0) return;
  if (first_ns_ == 0) {
    first_ns_ = time_ns;
    if (interval_start_ns_ == 0) interval_start_ns_ = time_ns;
  }
  last_ns_ = std::max(last_ns_, time_ns);
}

template <typename Table, typename EntryKey>
typename Table::mapped_type* AllocationLedger::Entry(Table& table, const EntryKey& key, size_t limit) {
  auto found = table.find(key);
  if (found != table.end()) return &found->second;
  if (table.size() >= limit) {
    ++over_limits_;
    return nullptr;
  }
  return &table[key];
}

SiteStats* AllocationLedger::Site(uint32_t site, const TraceRecord& r) {
  const bool known = sites_.contains(site);
  SiteStats* stats = Entry(sites_, site, limits_.sites);
  if (stats != nullptr && !known) {
    stats->site = site;
    stats->pid = r.pid;
    stats->api = r.api;
    stats->kind = r.kind;
  }
  return stats;
}

void AllocationLedger::Add(const TraceRecord& r) {
  ++records_;
  switch (r.type) {
    case RecordType::kAlloc: return OnAlloc(r);
    case RecordType::kFree: return OnFree(r);
    case RecordType::kMap: return OnMap(r);
    case RecordType::kUnmap: return OnUnmap(r);
    case RecordType::kText: return OnText(r);
    case RecordType::kAttach: {
      TracedProcess* process = Entry(processes_, r.pid, limits_.processes);
      if (process == nullptr) return;
      process->pid = r.pid;
      process->parent = static_cast<uint32_t>(r.extra);
      process->executable.clear();  // an exec replaces what the pid ran
      process->exited_normally = false;
      Note(r.time_ns);
      return;
    }
    case RecordType::kDetach:
      if (TracedProcess* process = Entry(processes_, r.pid, limits_.processes)) process->exited_normally = true;
      return;
    case RecordType::kSite:
      if (std::vector<SiteFrame>* frames = Entry(frames_, r.site, limits_.sites))
        frames->resize(std::min<uint64_t>(r.bytes, kMaxFrames));
      return;
    case RecordType::kFrame: {
      if (r.index >= kMaxFrames) return;
      std::vector<SiteFrame>* frames = Entry(frames_, r.site, limits_.sites);
      if (frames == nullptr) return;
      if (frames->size() <= r.index) frames->resize(r.index + 1u);
      (*frames)[r.index] = {static_cast<uint32_t>(r.extra), r.address};
      return;
    }
    case RecordType::kModule: {
      ModuleInfo* module = Entry(modules_, static_cast<uint32_t>(r.extra), limits_.modules);
      if (module == nullptr) return;
      module->load_bias = r.address;
      module->path_length = r.bytes;
      return;
    }
    case RecordType::kEmpty: return;
  }
}

void AllocationLedger::OnText(const TraceRecord& r) {
  std::string* target = nullptr;
  size_t limit = 4096;
  if (r.text_owner == TextOwner::kModulePath) {
    auto found = modules_.find(r.text_id);
    if (found == modules_.end()) return;
    target = &found->second.path;
    limit = std::min<uint64_t>(found->second.path_length, limit);
  } else {
    TracedProcess* process = Entry(processes_, r.text_id, limits_.processes);
    if (process == nullptr) return;
    target = &process->executable;
  }
  // Pieces come in order from one writer; a piece out of place is dropped.
  if (static_cast<size_t>(r.index) * kTextBytes != target->size() || target->size() + r.text.size() > limit) return;
  target->append(r.text);
}

void AllocationLedger::OnAlloc(const TraceRecord& r) {
  Note(r.time_ns);
  const size_t kind_index = static_cast<size_t>(r.kind);
  SiteStats* site_entry = Site(r.site, r);
  if (site_entry == nullptr) return;
  SiteStats& site = *site_entry;
  if (r.result != 0) {
    ++kinds_[kind_index].failed_allocations;
    ++site.failed_allocations;
    site.last_error = r.result;
    return;
  }
  const bool handle = r.api == Api::kCuMemCreate;
  const Key key{r.pid, handle, r.address};
  auto existing = live_.find(key);
  if (existing != live_.end()) Drop(existing);  // freed where the tracer could not see it
  if (live_.size() >= limits_.live_allocations) {
    ++over_limits_;
    return;
  }
  live_.emplace(key, Live{r.bytes, r.site, r.kind});
  KindTotals& kind = kinds_[kind_index];
  ++kind.allocations;
  kind.bytes_allocated += r.bytes;
  kind.outstanding_bytes += r.bytes;
  ++kind.outstanding_count;
  kind.peak_bytes = std::max(kind.peak_bytes, kind.outstanding_bytes);
  ++site.allocations;
  site.bytes_allocated += r.bytes;
  site.outstanding_bytes += r.bytes;
  ++site.outstanding_count;
  site.peak_outstanding_bytes = std::max(site.peak_outstanding_bytes, site.outstanding_bytes);
  outstanding_ += r.bytes;
  peak_ = std::max(peak_, outstanding_);
  ++interval_allocations_;
  series_.Add(r.time_ns, static_cast<double>(outstanding_));
}

void AllocationLedger::Drop(std::unordered_map<Key, Live, KeyHash>::iterator it) {
  const Live& live = it->second;
  KindTotals& kind = kinds_[static_cast<size_t>(live.kind)];
  kind.outstanding_bytes -= live.bytes;
  --kind.outstanding_count;
  ++kind.frees;
  auto site = sites_.find(live.site);
  if (site != sites_.end()) {
    site->second.outstanding_bytes -= live.bytes;
    --site->second.outstanding_count;
    ++site->second.frees;
  }
  outstanding_ -= live.bytes;
  ++interval_frees_;
  live_.erase(it);
  series_.Add(last_ns_, static_cast<double>(outstanding_));
}

void AllocationLedger::Unreference(const Key& key) {
  auto it = live_.find(key);
  if (it == live_.end()) return;
  if (--it->second.references == 0) Drop(it);
}

void AllocationLedger::OnFree(const TraceRecord& r) {
  Note(r.time_ns);
  if (r.address == 0 && r.api != Api::kCuMemRelease) return;  // freeing null does nothing
  if (r.result != 0) {
    ++failed_frees_;
    return;
  }
  const bool handle = r.api == Api::kCuMemRelease;
  const Key key{r.pid, handle, r.address};
  auto it = live_.find(key);
  if (it == live_.end()) {
    ++frees_of_unknown_;
    return;
  }
  if (!handle) return Drop(it);
  if (it->second.released) return;
  it->second.released = true;
  Unreference(key);  // the memory stays while a mapping holds it
}

void AllocationLedger::OnMap(const TraceRecord& r) {
  Note(r.time_ns);
  if (r.result != 0) return;
  ++maps_;
  const Key key{r.pid, true, r.extra};
  auto it = live_.find(key);
  if (it == live_.end()) return;  // a handle created before tracing, or imported
  Mapping* mapping = Entry(mappings_, std::pair{r.pid, r.address}, limits_.mappings);
  if (mapping == nullptr) return;
  ++it->second.references;
  *mapping = {r.bytes, r.extra};
}

void AllocationLedger::OnUnmap(const TraceRecord& r) {
  Note(r.time_ns);
  if (r.result != 0) {
    ++failed_frees_;
    return;
  }
  // Every mapping that starts in the range goes.
  auto it = mappings_.lower_bound({r.pid, r.address});
  while (it != mappings_.end() && it->first.first == r.pid && it->first.second - r.address < r.bytes) {
    const uint64_t handle = it->second.handle;
    it = mappings_.erase(it);
    Unreference({r.pid, true, handle});
  }
}

std::vector<SiteFrame> AllocationLedger::FramesOf(uint32_t site) const {
  auto found = frames_.find(site);
  return found == frames_.end() ? std::vector<SiteFrame>{} : found->second;
}

namespace {

// How far `now` is above `before`, signed. Subtracted as unsigned and converted, which wraps (defined since C++20):
// sizes a hostile peer reports can put both near 2^63, where subtracting them as signed would overflow.
int64_t Growth(uint64_t now, uint64_t before) { return static_cast<int64_t>(now - before); }

}  // namespace

IntervalSummary AllocationLedger::CloseInterval(uint64_t now_ns) {
  IntervalSummary summary;
  summary.start_ns = interval_start_ns_ != 0 ? interval_start_ns_ : now_ns;
  summary.end_ns = now_ns;
  summary.kinds = kinds_;
  for (int i = 0; i < kKindCount; ++i) {
    summary.growth_bytes[i] = Growth(kinds_[i].outstanding_bytes, kind_at_interval_[i]);
    kind_at_interval_[i] = kinds_[i].outstanding_bytes;
  }
  summary.outstanding_bytes = outstanding_;
  summary.growth_total_bytes = Growth(outstanding_, total_at_interval_);
  total_at_interval_ = outstanding_;
  summary.peak_bytes = peak_;
  summary.allocations = interval_allocations_;
  summary.frees = interval_frees_;
  interval_allocations_ = interval_frees_ = 0;
  interval_start_ns_ = now_ns;

  constexpr size_t kRemembered = 3;
  for (auto& [id, site] : sites_) {
    const int64_t growth = Growth(site.outstanding_bytes, site.outstanding_at_last_interval);
    site.outstanding_at_last_interval = site.outstanding_bytes;
    if (site.recent_growth.empty() && growth == 0) continue;  // nothing since it was first seen
    site.recent_growth.push_back(growth);
    if (site.recent_growth.size() > kRemembered) site.recent_growth.erase(site.recent_growth.begin());
    site.intervals_growing = growth > 0 ? site.intervals_growing + 1 : 0;
    if (growth > 0 && std::all_of(site.recent_growth.begin(), site.recent_growth.end(),
                                  [](int64_t g) { return g > 0; }))
      summary.growing.push_back({id, growth, site.outstanding_bytes, site.intervals_growing});
  }
  std::sort(summary.growing.begin(), summary.growing.end(), [](const SiteGrowth& a, const SiteGrowth& b) {
    return a.growth_bytes != b.growth_bytes ? a.growth_bytes > b.growth_bytes : a.site < b.site;
  });
  return summary;
}

void AllocationLedger::Finish(uint64_t end_ns) {
  end_ns_ = std::max(end_ns, last_ns_);
  if (!series_.empty()) series_.Add(end_ns_, static_cast<double>(outstanding_));
}

}  // namespace gpudoctor
