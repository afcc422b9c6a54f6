// The contract every HistoryStore keeps, run against SQLite and the in-memory twin.
#include <gtest/gtest.h>

#include <memory>

#include "store/memory_store.h"
#include "store/snapshot_samples.h"
#include "store/sqlite_store.h"
#include "store/test_support.h"

namespace gpudoctor {
namespace {

using namespace std::chrono_literals;
using testing::MakeFinding;
using testing::Sample;
using testing::T0;

struct MemoryFactory {
  std::unique_ptr<HistoryStore> Make(RetentionPolicy retention) { return std::make_unique<MemoryHistoryStore>(retention); }
};

struct SqliteFactory {
  testing::ScratchDir dir;
  std::unique_ptr<HistoryStore> Make(RetentionPolicy retention) {
    SqliteStoreOptions options;
    options.retention = retention;
    auto store = SqliteHistoryStore::Open(dir.File("history.db"), options, T0());
    EXPECT_TRUE(store.ok()) << store.error().message;
    return std::move(*store);
  }
};

template <typename Factory>
class HistoryStoreContract : public ::testing::Test {
 protected:
  std::unique_ptr<HistoryStore> Make(RetentionPolicy retention = {}) { return factory_.Make(retention); }
  Factory factory_;
};

using Factories = ::testing::Types<MemoryFactory, SqliteFactory>;
TYPED_TEST_SUITE(HistoryStoreContract, Factories);

std::vector<double> Averages(const Series& series) {
  std::vector<double> values;
  for (const SeriesPoint& point : series.points) values.push_back(point.avg);
  return values;
}

TYPED_TEST(HistoryStoreContract, RawSeriesByIndexOrUuid) {
  auto store = this->Make();
  std::vector<GpuSample> samples;
  for (int i = 0; i < 3; ++i) {
    samples.push_back(Sample(T0() + i * 5s, 0, 50 + i, 10));
    samples.push_back(Sample(T0() + i * 5s, 1, 70 + i, 90));
  }
  ASSERT_TRUE(store->Append(samples, {}).ok());

  auto series = store->QuerySeries({.gpu = "1", .metric = Metric::kTemperatureC, .from = T0(), .until = T0() + 1h});
  ASSERT_TRUE(series.ok()) << series.error().message;
  EXPECT_EQ(series->resolution, Resolution::kRaw);
  EXPECT_EQ(series->gpu.index, 1u);
  EXPECT_EQ(Averages(*series), (std::vector<double>{70, 71, 72}));
  EXPECT_EQ(series->points[1].time, T0() + 5s);

  auto by_uuid = store->QuerySeries(
      {.gpu = samples[0].uuid, .metric = Metric::kUtilizationGpuPercent, .from = T0() + 5s, .until = T0() + 10s});
  ASSERT_TRUE(by_uuid.ok());
  EXPECT_EQ(Averages(*by_uuid), (std::vector<double>{10}));  // [from, until)

  auto power = store->QuerySeries({.gpu = "0", .metric = Metric::kPowerW, .from = T0(), .until = T0() + 1h});
  ASSERT_TRUE(power.ok());
  EXPECT_DOUBLE_EQ(power->points[0].avg, 250.5);

  EXPECT_FALSE(store->QuerySeries({.gpu = "7", .metric = Metric::kPowerW, .from = T0(), .until = T0() + 1h}).ok());
  auto gpus = store->ListGpus();
  ASSERT_TRUE(gpus.ok());
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[1].uuid, samples[1].uuid);
}

TYPED_TEST(HistoryStoreContract, NewestSampleTimeOutlivesTheRawRetention) {
  RetentionPolicy retention;
  retention.raw = 1h;
  auto store = this->Make(retention);
  auto empty = store->NewestSampleTime();
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, std::nullopt);

  ASSERT_TRUE(store->Append(std::vector{Sample(T0() + 2h, 0, 40, 5), Sample(T0() + 1h, 1, 40, 5)}, {}).ok());
  ASSERT_TRUE(store->Append(std::vector{Sample(T0(), 0, 40, 5)}, {}).ok());  // an older one, late
  for (int step = 0; step < 10; ++step) {
    auto report = store->Maintain(T0() + 5h);
    ASSERT_TRUE(report.ok());
    if (!report->more_work) break;
  }
  auto newest = store->NewestSampleTime();
  ASSERT_TRUE(newest.ok()) << newest.error().message;
  EXPECT_EQ(*newest, std::optional<WallTime>(T0() + 2h));
}

TYPED_TEST(HistoryStoreContract, MissingReadingsNeverBecomeZero) {
  auto store = this->Make();
  GpuSample with_fan = Sample(T0(), 0, 40, 5);
  with_fan[Metric::kFanPercent] = 30;
  GpuSample without = Sample(T0() + 5s, 0, 41, 5);  // no fan reading
  GpuSample late = Sample(T0() + 10s, 0, 42, 5);
  late[Metric::kFanPercent] = 0;  // a real zero stays
  ASSERT_TRUE(store->Append(std::vector{with_fan, without, late}, {}).ok());
  auto fan = store->QuerySeries({.gpu = "0", .metric = Metric::kFanPercent, .from = T0(), .until = T0() + 1min});
  ASSERT_TRUE(fan.ok());
  ASSERT_EQ(fan->points.size(), 2u);
  EXPECT_EQ(fan->points[0].time, T0());
  EXPECT_EQ(fan->points[1].time, T0() + 10s);
  EXPECT_EQ(fan->points[1].avg, 0);
}

TYPED_TEST(HistoryStoreContract, SameGpuAndTimeReplaces) {
  auto store = this->Make();
  ASSERT_TRUE(store->Append(std::vector{Sample(T0(), 0, 40, 5)}, {}).ok());
  ASSERT_TRUE(store->Append(std::vector{Sample(T0(), 0, 45, 5)}, {}).ok());
  auto series = store->QuerySeries({.gpu = "0", .metric = Metric::kTemperatureC, .from = T0(), .until = T0() + 1s});
  ASSERT_TRUE(series.ok());
  EXPECT_EQ(Averages(*series), (std::vector<double>{45}));
}

TYPED_TEST(HistoryStoreContract, IncidentsOpenRefreshAndResolve) {
  auto store = this->Make();
  const Finding hot = MakeFinding("temperature_high", 0);
  const Finding leak = MakeFinding("memory_leak", 1);
  const Finding host = MakeFinding("job_stall", std::nullopt, Severity::kCritical);

  auto first = store->UpsertFindings(std::vector{hot, leak, host}, T0());
  ASSERT_TRUE(first.ok()) << first.error().message;
  ASSERT_EQ(first->size(), 3u);
  for (const FindingTransition& t : *first) EXPECT_EQ(t.kind, FindingTransition::Kind::kOpened);
  EXPECT_EQ((*first)[0].incident.finding, hot);
  EXPECT_LT((*first)[0].incident.incident_id, (*first)[1].incident.incident_id);

  // Unchanged findings produce no transitions.
  auto same = store->UpsertFindings(std::vector{hot, leak, host}, T0() + 5s);
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->empty());

  Finding hotter = hot;
  hotter.severity = Severity::kCritical;
  hotter.summary = "hotter";
  auto second = store->UpsertFindings(std::vector{hotter, host}, T0() + 10s);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->size(), 2u);
  EXPECT_EQ((*second)[0].kind, FindingTransition::Kind::kSeverityChanged);
  EXPECT_EQ((*second)[0].incident.finding.summary, "hotter");
  EXPECT_EQ((*second)[0].incident.opened_at, T0());
  EXPECT_EQ((*second)[1].kind, FindingTransition::Kind::kResolved);
  EXPECT_EQ((*second)[1].incident.finding.id, "memory_leak");
  EXPECT_EQ((*second)[1].incident.resolved_at, T0() + 10s);
  EXPECT_EQ((*second)[1].incident.last_seen, T0() + 5s);

  // A finding that comes back is a new incident.
  auto third = store->UpsertFindings(std::vector{leak}, T0() + 20s);
  ASSERT_TRUE(third.ok());
  ASSERT_EQ(third->size(), 3u);
  const FindingTransition& reopened = third->back();
  EXPECT_EQ(reopened.kind, FindingTransition::Kind::kOpened);
  EXPECT_GT(reopened.incident.incident_id, (*first)[2].incident.incident_id);

  auto all = store->QueryFindings({.from = T0(), .until = T0() + 1h});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].incident_id, reopened.incident.incident_id);  // newest first
  EXPECT_TRUE((*all)[0].open());
  EXPECT_EQ((*all)[3].finding, hotter);
  EXPECT_EQ((*all)[3].last_seen, T0() + 10s);
  EXPECT_EQ((*all)[3].resolved_at, T0() + 20s);
  EXPECT_EQ((*all)[3].key, "temperature_high@" + hot.gpu->uuid);

  auto open = store->QueryFindings({.from = T0(), .until = T0() + 1h, .open_only = true});
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->size(), 1u);
  EXPECT_EQ(open->front().finding, leak);

  auto gpu0 = store->QueryFindings({.from = T0(), .until = T0() + 1h, .gpu = "0"});
  ASSERT_TRUE(gpu0.ok());
  ASSERT_EQ(gpu0->size(), 1u);
  EXPECT_EQ(gpu0->front().finding.id, "temperature_high");

  // Time window: the first memory_leak incident, resolved before `from`, is left out.
  auto later = store->QueryFindings({.from = T0() + 15s, .until = T0() + 1h});
  ASSERT_TRUE(later.ok());
  ASSERT_EQ(later->size(), 3u);
  for (const StoredFinding& incident : *later) EXPECT_NE(incident.incident_id, (*first)[1].incident.incident_id);
}

TYPED_TEST(HistoryStoreContract, DuplicateKeysCollapseToTheWorst) {
  auto store = this->Make();
  auto transitions = store->UpsertFindings(
      std::vector{MakeFinding("ecc_rate", 2), MakeFinding("ecc_rate", 2, Severity::kCritical)}, T0());
  ASSERT_TRUE(transitions.ok());
  ASSERT_EQ(transitions->size(), 1u);
  EXPECT_EQ(transitions->front().incident.finding.severity, Severity::kCritical);
}

TYPED_TEST(HistoryStoreContract, OneRuleWithTwoSubjectsIsTwoIncidents) {
  auto store = this->Make();
  Finding llama = MakeFinding("job_stall", std::nullopt, Severity::kCritical);
  llama.subject = "llama";
  Finding mixtral = llama;
  mixtral.subject = "mixtral";
  auto opened = store->UpsertFindings(std::vector{llama, mixtral}, T0());
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  ASSERT_EQ(opened->size(), 2u);
  EXPECT_EQ((*opened)[0].incident.key, "job_stall/llama");
  EXPECT_EQ((*opened)[1].incident.key, "job_stall/mixtral");

  // One job recovers: only its incident resolves.
  auto next = store->UpsertFindings(std::vector{mixtral}, T0() + 5s);
  ASSERT_TRUE(next.ok());
  ASSERT_EQ(next->size(), 1u);
  EXPECT_EQ(next->front().kind, FindingTransition::Kind::kResolved);
  EXPECT_EQ(next->front().incident.finding.subject, "llama");

  auto open = store->QueryFindings({.from = T0(), .until = T0() + 1h, .open_only = true});
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->size(), 1u);
  EXPECT_EQ(open->front().finding, mixtral);  // the subject round-trips
}

TYPED_TEST(HistoryStoreContract, DownsamplesToMinuteAndHourBuckets) {
  auto store = this->Make();
  // Two hours of 5 s samples on GPU 0; temperature ramps within each minute.
  std::vector<GpuSample> samples;
  for (int i = 0; i < 2 * 720; ++i) {
    GpuSample sample = Sample(T0() + i * 5s, 0, 40 + i % 12, 50);
    if (i % 12 == 11) sample[Metric::kTemperatureC].reset();  // missing: not part of min/avg/max
    samples.push_back(sample);
  }
  ASSERT_TRUE(store->Append(samples, {}).ok());
  const WallTime now = T0() + 2h + 30s;
  MaintenanceReport total;
  for (int step = 0; step < 10; ++step) {
    auto report = store->Maintain(now);
    ASSERT_TRUE(report.ok()) << report.error().message;
    total.buckets_written += report->buckets_written;
    if (!report->more_work) break;
  }
  // T0 is 22:13:20: 1-minute buckets 22:13 to 00:12 (120); hours 22:00 (partly filled) and 23:00.
  auto minutes = store->QuerySeries({.gpu = "0",
                                     .metric = Metric::kTemperatureC,
                                     .from = T0() - 1h,
                                     .until = now,
                                     .resolution = Resolution::kMinute});
  ASSERT_TRUE(minutes.ok());
  ASSERT_EQ(minutes->points.size(), 120u);
  const SeriesPoint& full = minutes->points[1];  // 22:14:00 .. 22:15:00
  EXPECT_EQ(full.time, FromUnixMillis((ToUnixMillis(T0()) / 60000 + 1) * 60000));
  EXPECT_EQ(full.min, 40);
  EXPECT_EQ(full.max, 50);
  EXPECT_DOUBLE_EQ(full.avg, 45);
  auto hours = store->QuerySeries({.gpu = "0",
                                   .metric = Metric::kUtilizationGpuPercent,
                                   .from = T0() - 1h,
                                   .until = now,
                                   .resolution = Resolution::kHour});
  ASSERT_TRUE(hours.ok());
  ASSERT_EQ(hours->points.size(), 2u);  // 22:00 and 23:00; 00:00 is not complete
  EXPECT_EQ(hours->points[1].avg, 50);
  EXPECT_EQ(total.buckets_written, 120 + 2);

  // Nothing new to fold: a further Maintain writes nothing.
  auto again = store->Maintain(now);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->buckets_written, 0);
}

TYPED_TEST(HistoryStoreContract, CatchesUpInBoundedSteps) {
  auto store = this->Make();
  std::vector<GpuSample> samples;
  for (int i = 0; i < 48; ++i) samples.push_back(Sample(T0() + i * 30min, 0, 40, 50));
  ASSERT_TRUE(store->Append(samples, {}).ok());
  int calls = 0;
  for (;; ++calls) {
    auto report = store->Maintain(T0() + 25h);
    ASSERT_TRUE(report.ok());
    if (!report->more_work) break;
    ASSERT_LT(calls, 100);
  }
  EXPECT_GE(calls, 3);  // a day of 1-minute buckets takes several 6-hour steps
  auto minutes = store->QuerySeries({.gpu = "0", .metric = Metric::kTemperatureC, .from = T0() - 1h,
                                     .until = T0() + 25h, .resolution = Resolution::kMinute});
  ASSERT_TRUE(minutes.ok());
  EXPECT_EQ(minutes->points.size(), 48u);
}

TYPED_TEST(HistoryStoreContract, RetentionPrunesRawButKeepsAggregates) {
  RetentionPolicy retention;
  retention.raw = 1h;
  retention.minute = 3h;
  retention.hour = 24h;
  auto store = this->Make(retention);
  std::vector<GpuSample> samples;
  for (int i = 0; i < 6 * 60; ++i) samples.push_back(Sample(T0() + i * 1min, 0, 30 + i % 7, 50));
  ASSERT_TRUE(store->Append(samples, {}).ok());
  std::vector<ProcessMemorySample> processes = {{T0(), 0, samples[0].uuid, 42, "python", 1 << 20},
                                                {T0() + 5h, 0, samples[0].uuid, 42, "python", 2 << 20}};
  ASSERT_TRUE(store->Append({}, processes).ok());
  const WallTime now = T0() + 6h;
  for (int step = 0; step < 10; ++step) {
    auto report = store->Maintain(now);
    ASSERT_TRUE(report.ok());
    if (!report->more_work) break;
  }
  auto raw = store->QuerySeries({.gpu = "0", .metric = Metric::kTemperatureC, .from = T0(), .until = now,
                                 .resolution = Resolution::kRaw});
  ASSERT_TRUE(raw.ok());
  ASSERT_FALSE(raw->points.empty());
  EXPECT_GE(raw->points.front().time, now - 1h);
  auto minutes = store->QuerySeries({.gpu = "0", .metric = Metric::kTemperatureC, .from = T0(), .until = now,
                                     .resolution = Resolution::kMinute});
  ASSERT_TRUE(minutes.ok());
  ASSERT_FALSE(minutes->points.empty());
  EXPECT_GE(minutes->points.front().time, now - 3h);
  auto hours = store->QuerySeries({.gpu = "0", .metric = Metric::kTemperatureC, .from = T0() - 1h, .until = now,
                                   .resolution = Resolution::kHour});
  ASSERT_TRUE(hours.ok());
  EXPECT_EQ(hours->points.size(), 6u);

  // An automatic query over pruned raw data falls back to buckets.
  auto automatic = store->QuerySeries({.gpu = "0", .metric = Metric::kTemperatureC, .from = T0(), .until = T0() + 1h});
  ASSERT_TRUE(automatic.ok());
  EXPECT_EQ(automatic->resolution, Resolution::kHour);

  auto kept = store->QueryProcessMemory("0", T0(), now);
  ASSERT_TRUE(kept.ok());
  ASSERT_EQ(kept->size(), 1u);
  EXPECT_EQ(kept->front().used_bytes, uint64_t{2} << 20);
}

TYPED_TEST(HistoryStoreContract, ResolvedIncidentsAgeOut) {
  RetentionPolicy retention;
  retention.resolved_findings = 24h;
  auto store = this->Make(retention);
  ASSERT_TRUE(store->UpsertFindings(std::vector{MakeFinding("a", 0), MakeFinding("b", 0)}, T0()).ok());
  ASSERT_TRUE(store->UpsertFindings(std::vector{MakeFinding("b", 0)}, T0() + 1h).ok());
  ASSERT_TRUE(store->Maintain(T0() + 30h).ok());
  auto left = store->QueryFindings({.from = T0(), .until = T0() + 40h});
  ASSERT_TRUE(left.ok());
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ(left->front().finding.id, "b");  // open incidents stay, however old
}

TYPED_TEST(HistoryStoreContract, RecordedIncidentsAreKeptByIdAndIdsAreNeverReused) {
  RetentionPolicy retention;
  retention.resolved_findings = 24h;
  auto store = this->Make(retention);
  StoredFinding hot{.incident_id = 7, .key = "temperature_high@GPU-0", .finding = MakeFinding("temperature_high", 0),
                    .opened_at = T0(), .last_seen = T0()};
  StoredFinding leak{.incident_id = 9, .key = "memory_leak@GPU-1", .finding = MakeFinding("memory_leak", 1),
                     .opened_at = T0(), .last_seen = T0() + 5s, .resolved_at = T0() + 5s};
  ASSERT_TRUE(store->RecordIncidents(std::vector{leak, hot}).ok());
  auto last = store->LastIncidentId();
  ASSERT_TRUE(last.ok()) << last.error().message;
  EXPECT_EQ(*last, 9);
  auto open = store->OpenIncidents();
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(*open, std::vector{hot});

  // Writing an incident again replaces it.
  hot.last_seen = T0() + 10s;
  hot.finding.severity = Severity::kCritical;
  hot.resolved_at = T0() + 10s;
  ASSERT_TRUE(store->RecordIncidents(std::vector{hot}).ok());
  auto all = store->QueryFindings({.from = T0(), .until = T0() + 1h});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, (std::vector{leak, hot}));  // highest id first

  // Pruning every incident leaves the ids used.
  ASSERT_TRUE(store->Maintain(T0() + 48h).ok());
  auto none = store->QueryFindings({.from = T0(), .until = T0() + 48h});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(*store->LastIncidentId(), 9);
  auto next = store->UpsertFindings(std::vector{MakeFinding("temperature_high", 0)}, T0() + 49h);
  ASSERT_TRUE(next.ok());
  ASSERT_EQ(next->size(), 1u);
  EXPECT_EQ(next->front().incident.incident_id, 10);
}

TYPED_TEST(HistoryStoreContract, MaintenanceRecordsComeBackOldestFirstAndAreKept) {
  auto store = this->Make();
  ASSERT_TRUE(store->RecordMaintenance({"power_and_cabling", T0() - 24h, ""}, T0()).ok());
  ASSERT_TRUE(store->RecordMaintenance({"dust_cleaning", T0() - 72h, "filters of rack 4"}, T0()).ok());
  ASSERT_TRUE(store->RecordMaintenance({"dust_cleaning", T0(), ""}, T0()).ok());
  ASSERT_TRUE(store->Maintain(T0() + 24h * 365).ok());  // retention never drops them
  auto records = store->QueryMaintenance();
  ASSERT_TRUE(records.ok()) << records.error().message;
  ASSERT_EQ(records->size(), 3u);
  EXPECT_EQ((*records)[0], (MaintenanceDone{"dust_cleaning", T0() - 72h, "filters of rack 4"}));
  EXPECT_EQ((*records)[1].task, "power_and_cabling");
  EXPECT_EQ((*records)[2], (MaintenanceDone{"dust_cleaning", T0(), ""}));
}

TYPED_TEST(HistoryStoreContract, TheFirstLearnedGpuCountStays) {
  auto store = this->Make();
  auto none = store->QueryLearnedGpuCount();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none);
  auto first = store->LearnGpuCount(8, T0());
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(*first);
  auto second = store->LearnGpuCount(7, T0() + 1h);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second);
  auto learned = store->QueryLearnedGpuCount();
  ASSERT_TRUE(learned.ok() && *learned);
  EXPECT_EQ(**learned, (LearnedGpuCount{8, T0()}));
}

TYPED_TEST(HistoryStoreContract, EventsComeBackInTheOrderTheyArrivedAndAgeOut) {
  auto store = this->Make();
  LogEvent xid;
  xid.kind = "xid";
  xid.severity = EventSeverity::kCritical;
  xid.time = T0() - 2s;
  xid.xid = 79;
  xid.pci_bus_id = "0000:1b:00.0";
  xid.fields = {{"pid", "1173"}, {"name", "python"}};
  xid.raw = "NVRM: Xid (PCI:0000:1b:00): 79, pid=1173, GPU has fallen off the bus.";
  LogEvent untimed;
  untimed.kind = "hung_task";
  untimed.severity = EventSeverity::kWarning;
  RecentEvents first{.nvml_xids = {XidEvent{.gpu_index = 3, .xid = 48, .time = T0()}}, .log = {xid}};
  RecentEvents second{.nvml_xids = {}, .log = {untimed}};
  ASSERT_TRUE(store->AppendEvents(first, T0()).ok());
  ASSERT_TRUE(store->AppendEvents(second, T0() + 1h).ok());

  auto both = store->QueryEvents(T0(), T0() + 2h);
  ASSERT_TRUE(both.ok()) << both.error().message;
  EXPECT_EQ(both->nvml_xids, first.nvml_xids);
  ASSERT_EQ(both->log.size(), 2u);
  EXPECT_EQ(both->log[0].kind, "xid");
  EXPECT_EQ(both->log[0].time, xid.time);
  EXPECT_EQ(both->log[0].xid, 79u);
  EXPECT_EQ(both->log[0].fields, xid.fields);
  EXPECT_EQ(both->log[0].raw, xid.raw);
  EXPECT_EQ(both->log[1].kind, "hung_task");
  EXPECT_FALSE(both->log[1].time.has_value());
  auto later = store->QueryEvents(T0() + 1s, T0() + 2h);
  ASSERT_TRUE(later.ok());
  EXPECT_TRUE(later->nvml_xids.empty());
  EXPECT_EQ(later->log.size(), 1u);

  ASSERT_TRUE(store->Maintain(T0() + RetentionPolicy{}.raw + 30min).ok());
  auto kept = store->QueryEvents(T0(), T0() + 2h);
  ASSERT_TRUE(kept.ok());
  EXPECT_TRUE(kept->nvml_xids.empty());
  EXPECT_EQ(kept->log.size(), 1u);  // received later, still within the raw retention
}

TYPED_TEST(HistoryStoreContract, SnapshotRowsWithProcesses) {
  auto store = this->Make();
  Snapshot snapshot;
  snapshot.taken_at = T0();
  GpuSnapshot& gpu = snapshot.gpus.emplace_back();
  gpu.index = 3;
  gpu.uuid = Field<std::string>::Value("GPU-abc");
  gpu.temperature_c = Field<uint32_t>::Value(61);
  gpu.processes = Field<std::vector<ProcessInfo>>::Value(
      {{.pid = 10, .name = "train", .used_memory_bytes = Field<uint64_t>::Value(1000)},
       {.pid = 11, .name = "", .used_memory_bytes = Field<uint64_t>::NotSupported()}});
  ASSERT_TRUE(AppendSnapshot(*store, snapshot).ok());

  auto processes = store->QueryProcessMemory("GPU-abc", T0(), T0() + 1s);
  ASSERT_TRUE(processes.ok()) << processes.error().message;
  ASSERT_EQ(processes->size(), 2u);
  EXPECT_EQ((*processes)[0].name, "train");
  EXPECT_EQ((*processes)[0].used_bytes, 1000u);
  EXPECT_EQ((*processes)[0].gpu_index, 3u);
  EXPECT_FALSE((*processes)[1].used_bytes.has_value());
  auto power = store->QuerySeries({.gpu = "3", .metric = Metric::kPowerW, .from = T0(), .until = T0() + 1s});
  ASSERT_TRUE(power.ok());
  EXPECT_TRUE(power->points.empty());  // not reported: absent, not 0
}

TYPED_TEST(HistoryStoreContract, FindingsKeepTheRootTheyArePartOfAndTheirNewestEvent) {
  auto store = this->Make();
  Finding member = MakeFinding("temperature_high", 3, Severity::kCritical);
  member.part_of = "facility_cooling";
  member.newest_event_at = T0() - 1min;
  Finding root = MakeFinding("facility_cooling", std::nullopt, Severity::kCritical);
  ASSERT_TRUE(store->UpsertFindings(std::vector<Finding>{member, root}, T0()).ok());
  auto open = store->OpenIncidents();
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->size(), 2u);
  EXPECT_EQ((*open)[0].finding, member);
  EXPECT_EQ((*open)[1].finding, root);
}

TYPED_TEST(HistoryStoreContract, BootsAreRecordedOnceAndComeBackOldestFirst) {
  auto store = this->Make();
  const BootRecord second{"b-2", T0() - 1h}, first{"b-1", T0() - 30h};
  auto recorded = [&](const BootRecord& boot, WallTime now) {
    auto result = store->RecordBoot(boot, now);
    EXPECT_TRUE(result.ok()) << result.error().message;
    return result.ok() && *result;
  };
  EXPECT_TRUE(recorded(second, T0()));
  EXPECT_TRUE(recorded(first, T0()));
  EXPECT_FALSE(recorded(second, T0() + 1h));  // a restarted agent, the same boot
  auto boots = store->QueryBoots(T0() - 48h, T0());
  ASSERT_TRUE(boots.ok());
  EXPECT_EQ(*boots, (std::vector<BootRecord>{first, second}));
  auto recent = store->QueryBoots(T0() - 2h, T0());
  ASSERT_TRUE(recent.ok());
  EXPECT_EQ(*recent, std::vector<BootRecord>{second});
}

TYPED_TEST(HistoryStoreContract, RemediationsGetIdsAndCanBeReadAfterOne) {
  auto store = this->Make();
  Remediation ack{.kind = Remediation::Kind::kAck,
                  .at = T0(),
                  .incident_id = 7,
                  .incident_key = "xid_recent@GPU-3/79",
                  .severity = Severity::kCritical,
                  .gpu = GpuRef{.index = 3, .uuid = "GPU-3", .pci_bus_id = "0000:3b:00.0"},
                  .gpu_reset = true,
                  .actor = "alice",
                  .note = "reseated; \"quoted\""};
  Remediation reboot{.kind = Remediation::Kind::kReboot, .at = T0() - 1h, .incident_id = 5, .incident_key = "psu_fault"};
  auto first = store->RecordRemediation(ack);
  auto second = store->RecordRemediation(reboot);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_GT(*second, *first);
  ack.id = *first;
  reboot.id = *second;

  auto all = store->QueryRemediations({.from = T0() - 24h, .until = T0() + 1s});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, (std::vector<Remediation>{reboot, ack}));  // by time
  auto newer = store->QueryRemediations({.from = WallTime{}, .until = WallTime::max(), .after_id = *first});
  ASSERT_TRUE(newer.ok());
  EXPECT_EQ(*newer, std::vector<Remediation>{reboot});
  EXPECT_EQ(DescribeRemediation(ack),
            "acknowledged incident 7 (xid_recent@GPU-3/79) by alice, GPU reset: reseated; \"quoted\"");
  EXPECT_EQ(DescribeRemediation(reboot), "reboot while incident 5 (psu_fault) was warning");
}

TYPED_TEST(HistoryStoreContract, BootsAndRemediationsAreKeptAsLongAsResolvedIncidents) {
  RetentionPolicy retention;
  retention.resolved_findings = 48h;
  auto store = this->Make(retention);
  ASSERT_TRUE(store->RecordBoot({"old", T0() - 72h}, T0()).ok());
  ASSERT_TRUE(store->RecordBoot({"new", T0() - 1h}, T0()).ok());
  ASSERT_TRUE(store->RecordRemediation({.at = T0() - 72h, .incident_id = 1, .incident_key = "a"}).ok());
  ASSERT_TRUE(store->RecordRemediation({.at = T0() - 1h, .incident_id = 2, .incident_key = "b"}).ok());
  ASSERT_TRUE(store->Maintain(T0()).ok());
  auto boots = store->QueryBoots(WallTime{}, WallTime::max());
  auto remediations = store->QueryRemediations({.from = WallTime{}, .until = WallTime::max()});
  ASSERT_TRUE(boots.ok() && remediations.ok());
  ASSERT_EQ(boots->size(), 1u);
  EXPECT_EQ(boots->front().boot_id, "new");
  ASSERT_EQ(remediations->size(), 1u);
  EXPECT_EQ(remediations->front().incident_key, "b");
}

DiagnosticRecord Diagnostic(WallTime finished_at, uint32_t gpu, std::string uuid, std::string test, std::string state) {
  return {.finished_at = finished_at,
          .gpu_index = gpu,
          .uuid = std::move(uuid),
          .pci_bus_id = "00000000:" + std::to_string(17 + gpu) + ":00.0",
          .test = test,
          .state = state,
          .summary = test + " " + state + " on GPU " + std::to_string(gpu),
          .command = "gpudoctor diag " + test + " --gpu " + std::to_string(gpu)};
}

TYPED_TEST(HistoryStoreContract, LatestDiagnosticsAreTheNewestOfEachGpuAndTest) {
  auto store = this->Make();
  auto none = store->LatestDiagnostics();
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_TRUE(none->empty());

  const DiagnosticRecord newest_memtest = Diagnostic(T0() - 1h, 0, "GPU-a", "memtest", "faulty");
  const DiagnosticRecord burn = Diagnostic(T0() - 3h, 0, "GPU-a", "burn", "passed");
  // The same board after renumbering: still GPU-a, so it replaces the older memtest.
  const DiagnosticRecord renumbered = Diagnostic(T0(), 2, "GPU-a", "memtest", "passed");
  const DiagnosticRecord other_board = Diagnostic(T0() - 5h, 1, "GPU-b", "memtest", "hung");
  // No UUID: known by its index alone, apart from GPU-b at the same index.
  const DiagnosticRecord no_uuid = Diagnostic(T0() - 6h, 1, "", "memtest", "could_not_run");
  for (const DiagnosticRecord& record : {newest_memtest, Diagnostic(T0() - 48h, 0, "GPU-a", "memtest", "passed"), burn,
                                         other_board, no_uuid, Diagnostic(T0() - 2h, 1, "GPU-b", "memtest", "passed")})
    ASSERT_TRUE(store->RecordDiagnostic(record).ok());
  auto latest = store->LatestDiagnostics();
  ASSERT_TRUE(latest.ok()) << latest.error().message;
  EXPECT_EQ(*latest, (std::vector<DiagnosticRecord>{burn, newest_memtest, no_uuid,
                                                    Diagnostic(T0() - 2h, 1, "GPU-b", "memtest", "passed")}));

  ASSERT_TRUE(store->RecordDiagnostic(renumbered).ok());
  latest = store->LatestDiagnostics();
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(*latest, (std::vector<DiagnosticRecord>{burn, no_uuid, Diagnostic(T0() - 2h, 1, "GPU-b", "memtest", "passed"),
                                                    renumbered}));
}

TYPED_TEST(HistoryStoreContract, OfTwoDiagnosticsAsNewTheLastRecordedWins) {
  auto store = this->Make();
  DiagnosticRecord first = Diagnostic(T0(), 3, "GPU-c", "pcie", "passed");
  DiagnosticRecord second = Diagnostic(T0(), 3, "GPU-c", "pcie", "interrupted");
  ASSERT_TRUE(store->RecordDiagnostic(first).ok());
  ASSERT_TRUE(store->RecordDiagnostic(second).ok());
  auto latest = store->LatestDiagnostics();
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(*latest, std::vector<DiagnosticRecord>{second});
}

TYPED_TEST(HistoryStoreContract, DiagnosticsAreKeptAsLongAsResolvedIncidents) {
  RetentionPolicy retention;
  retention.resolved_findings = 48h;
  auto store = this->Make(retention);
  ASSERT_TRUE(store->RecordDiagnostic(Diagnostic(T0() - 72h, 0, "GPU-a", "burn", "faulty")).ok());
  ASSERT_TRUE(store->RecordDiagnostic(Diagnostic(T0() - 73h, 0, "GPU-a", "memtest", "faulty")).ok());
  const DiagnosticRecord recent = Diagnostic(T0() - 1h, 0, "GPU-a", "memtest", "passed");
  ASSERT_TRUE(store->RecordDiagnostic(recent).ok());
  auto report = store->Maintain(T0());
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_EQ(report->rows_pruned, 2);
  auto latest = store->LatestDiagnostics();
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(*latest, std::vector<DiagnosticRecord>{recent});
}

}  // namespace
}  // namespace gpudoctor
