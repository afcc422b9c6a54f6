#include "agent/history_recorder.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include "agent/testing/synthetic_agent.h"
#include "agent/testing/test_start.h"
#include "store/memory_store.h"
#include "store/sqlite_store.h"
#include "store/test_support.h"
#include "store/testing/faulty_vfs.h"

namespace gpudoctor {
namespace {

using namespace std::chrono_literals;
using Kind = FindingTransition::Kind;

using agent_testing::kStart;

// The in-memory store, with writes that fail while `failure` is set, as the
// SQLite store's do on a full disk.
class FlakyStore final : public HistoryStore {
 public:
  std::optional<std::string> failure;
  MemoryHistoryStore inner;

  Status Append(std::span<const GpuSample> gpus, std::span<const ProcessMemorySample> processes) override {
    if (failure) return Error{*failure};
    return inner.Append(gpus, processes);
  }
  Status RecordIncidents(std::span<const StoredFinding> incidents) override {
    if (failure) return Error{*failure};
    return inner.RecordIncidents(incidents);
  }
  Status AppendEvents(const RecentEvents& events, WallTime received_at) override {
    if (failure) return Error{*failure};
    return inner.AppendEvents(events, received_at);
  }
  Result<MaintenanceReport> Maintain(WallTime now) override {
    if (failure) return Error{*failure};
    return inner.Maintain(now);
  }
  Result<bool> RecordBoot(const BootRecord& boot, WallTime now) override {
    if (failure) return Error{*failure};
    return inner.RecordBoot(boot, now);
  }
  Result<int64_t> RecordRemediation(const Remediation& remediation) override {
    if (failure) return Error{*failure};
    return inner.RecordRemediation(remediation);
  }
  Status RecordMaintenance(const MaintenanceDone& done, WallTime recorded_at) override {
    if (failure) return Error{*failure};
    return inner.RecordMaintenance(done, recorded_at);
  }
  Result<bool> LearnGpuCount(uint32_t count, WallTime at) override {
    if (failure) return Error{*failure};
    return inner.LearnGpuCount(count, at);
  }
  Status RecordDiagnostic(const DiagnosticRecord& record) override {
    if (failure) return Error{*failure};
    return inner.RecordDiagnostic(record);
  }
  Result<std::vector<MaintenanceDone>> QueryMaintenance() const override { return inner.QueryMaintenance(); }
  Result<std::vector<DiagnosticRecord>> LatestDiagnostics() const override { return inner.LatestDiagnostics(); }
  Result<std::optional<LearnedGpuCount>> QueryLearnedGpuCount() const override {
    return inner.QueryLearnedGpuCount();
  }
  Result<std::vector<BootRecord>> QueryBoots(WallTime from, WallTime until) const override {
    return inner.QueryBoots(from, until);
  }
  Result<std::vector<Remediation>> QueryRemediations(const RemediationQuery& query) const override {
    return inner.QueryRemediations(query);
  }
  Result<std::vector<StoredFinding>> OpenIncidents() const override { return inner.OpenIncidents(); }
  Result<int64_t> LastIncidentId() const override { return inner.LastIncidentId(); }
  Result<RecentEvents> QueryEvents(WallTime from, WallTime until) const override {
    return inner.QueryEvents(from, until);
  }
  Result<std::vector<GpuIdentity>> ListGpus() const override { return inner.ListGpus(); }
  Result<std::optional<WallTime>> NewestSampleTime() const override { return inner.NewestSampleTime(); }
  Result<Series> QuerySeries(const SeriesQuery& query) const override { return inner.QuerySeries(query); }
  Result<std::vector<ProcessMemorySample>> QueryProcessMemory(std::string_view gpu, WallTime from,
                                                              WallTime until) const override {
    return inner.QueryProcessMemory(gpu, from, until);
  }
  Result<std::vector<StoredFinding>> QueryFindings(const FindingQuery& query) const override {
    return inner.QueryFindings(query);
  }
};

Finding Hot(uint32_t gpu) { return testing::MakeFinding("temperature_high", gpu, Severity::kCritical); }

bool HasOpen(const HistoryRecorder& history, std::string_view id) {
  const auto& open = history.open_incidents();
  return std::any_of(open.begin(), open.end(), [&](const StoredFinding& f) { return f.finding.id == id; });
}

std::vector<std::string> Ids(const std::vector<FindingTransition>& transitions, Kind kind) {
  std::vector<std::string> ids;
  for (const FindingTransition& t : transitions)
    if (t.kind == kind) ids.push_back(t.incident.finding.id);
  return ids;
}

size_t SamplesOf(const HistoryStore& store, uint32_t gpu) {
  auto series = store.QuerySeries({.gpu = std::to_string(gpu),
                                   .metric = Metric::kTemperatureC,
                                   .from = kStart - 1h,
                                   .until = kStart + 1h,
                                   .resolution = Resolution::kRaw});
  return series ? series->points.size() : 0;
}

class HistoryRecorderTest : public ::testing::Test {
 protected:
  HistoryRecorderTest()
      : history_([this]() -> Result<std::shared_ptr<HistoryStore>> {
                   ++open_attempts_;
                   if (open_failure_) return Error{*open_failure_};
                   return std::shared_ptr<HistoryStore>(store_);
                 },
                 {.path = "/var/lib/gpudoctor/history.db", .max_queued_rows = 40}) {}

  // One cycle at kStart + n * 5 s with 2 synthetic GPUs.
  std::vector<FindingTransition> Cycle(int n, std::vector<Finding> findings, RecentEvents events = {}) {
    const WallTime now = kStart + n * 5s;
    history_.Connect(now);
    return history_.Record(SyntheticSnapshot(2, now), std::move(findings), events, now);
  }

  HistoryRecorder::StoreOpener Reopen() {
    return [this]() -> Result<std::shared_ptr<HistoryStore>> { return std::shared_ptr<HistoryStore>(store_); };
  }

  std::shared_ptr<FlakyStore> store_ = std::make_shared<FlakyStore>();
  std::optional<std::string> open_failure_;
  int open_attempts_ = 0;
  HistoryRecorder history_;
};

TEST_F(HistoryRecorderTest, FindingsReachTheCallerWhileTheStoreFailsAndTheStoreCatchesUp) {
  EXPECT_TRUE(Cycle(0, {}).empty());
  EXPECT_TRUE(history_.health().ok);

  store_->failure = "database or disk is full";
  auto opened = Cycle(1, {Hot(0)});
  // The GPU's finding is not held back, and the failing store is a finding of its own.
  EXPECT_EQ(Ids(opened, Kind::kOpened), (std::vector<std::string>{"temperature_high", "history_store_failing"}));
  EXPECT_TRUE(HasOpen(history_, "temperature_high"));
  const StoreHealth& failing = history_.health();
  EXPECT_FALSE(failing.ok);
  EXPECT_EQ(failing.path, "/var/lib/gpudoctor/history.db");
  EXPECT_NE(failing.last_error.find("database or disk is full"), std::string::npos) << failing.last_error;
  EXPECT_EQ(failing.failing_since, kStart + 5s);
  EXPECT_GT(failing.errors_total, 0u);
  EXPECT_GT(failing.queued, 0u);
  const Finding& finding = history_.open_incidents().back().finding;
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_NE(finding.summary.find("database or disk is full"), std::string::npos);
  EXPECT_FALSE(finding.actions.empty());

  Cycle(2, {Hot(0)});
  EXPECT_EQ(SamplesOf(store_->inner, 0), 1u);  // only the sample from before the failure

  store_->failure.reset();
  auto recovered = Cycle(3, {Hot(0)});
  EXPECT_EQ(Ids(recovered, Kind::kResolved), std::vector<std::string>{"history_store_failing"});
  EXPECT_TRUE(history_.health().ok);
  EXPECT_EQ(history_.health().queued, 0u);
  EXPECT_TRUE(history_.health().last_error.empty());
  EXPECT_EQ(history_.health().dropped_total, 0u);
  EXPECT_EQ(SamplesOf(store_->inner, 0), 4u);  // every queued sample, none lost
  // The store holds the incidents as decided, the failure's own included.
  auto stored = store_->inner.QueryFindings({.from = kStart, .until = kStart + 1h});
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 2u);
  EXPECT_EQ((*stored)[0].finding.id, "history_store_failing");
  EXPECT_EQ((*stored)[0].resolved_at, kStart + 15s);
  EXPECT_EQ((*stored)[1].finding.id, "temperature_high");
  EXPECT_EQ((*stored)[1].opened_at, kStart + 5s);
  EXPECT_TRUE((*stored)[1].open());
}

TEST_F(HistoryRecorderTest, AFullQueueDropsTheOldestSamplesAndCountsThem) {
  store_->failure = "disk I/O error";
  for (int n = 0; n < 30; ++n) Cycle(n, {});  // 4 rows a cycle, room for 40
  const StoreHealth& health = history_.health();
  EXPECT_EQ(health.dropped_total, 80u);  // 20 cycles of 2 GPU and 2 process rows
  store_->failure.reset();
  Cycle(30, {});
  EXPECT_EQ(SamplesOf(store_->inner, 0), 11u);  // the newest 10 cycles that waited, and this one
  EXPECT_EQ(history_.health().dropped_total, 80u);
}

TEST_F(HistoryRecorderTest, AStoreThatOpensLateTakesUpWhatWaitedWithIdsAfterItsOwn) {
  // An earlier run left incident 7 open, for a GPU that is fine now, and an Xid.
  const StoredFinding earlier{.incident_id = 7,
                              .key = FindingKey(Hot(1)),
                              .finding = Hot(1),
                              .opened_at = kStart - 1h,
                              .last_seen = kStart - 1h};
  ASSERT_TRUE(store_->inner.RecordIncidents(std::vector{earlier}).ok());
  ASSERT_TRUE(store_->inner.AppendEvents({.nvml_xids = {{1, 48, kStart - 30min}}}, kStart - 30min).ok());
  open_failure_ = "unable to open database file";

  auto opened = Cycle(0, {Hot(0)});
  EXPECT_EQ(Ids(opened, Kind::kOpened), (std::vector<std::string>{"temperature_high", "history_store_failing"}));
  EXPECT_LT(opened[0].incident.incident_id, 0);  // provisional until a store numbers it
  EXPECT_NE(history_.health().last_error.find("unable to open database file"), std::string::npos);

  // Tried again after 1 s, 2 s, 4 s...
  EXPECT_EQ(open_attempts_, 1);
  history_.Connect(kStart + 500ms);
  EXPECT_EQ(open_attempts_, 1);
  history_.Connect(kStart + 1s);
  EXPECT_EQ(open_attempts_, 2);
  history_.Connect(kStart + 2s);
  EXPECT_EQ(open_attempts_, 2);
  history_.Connect(kStart + 3s);
  EXPECT_EQ(open_attempts_, 3);
  open_failure_.reset();
  EXPECT_TRUE(history_.Connect(kStart + 6s).empty());
  EXPECT_EQ(open_attempts_, 3);
  RecentEvents restored = history_.Connect(kStart + 31s);
  EXPECT_EQ(open_attempts_, 4);
  EXPECT_EQ(restored.nvml_xids, (std::vector<XidEvent>{{1, 48, kStart - 30min}}));
  auto later = history_.Record(SyntheticSnapshot(2, kStart + 31s), {Hot(0)}, {}, kStart + 31s);
  // The earlier run's incident is over; the failing store is fixed.
  EXPECT_EQ(Ids(later, Kind::kResolved), (std::vector<std::string>{"temperature_high", "history_store_failing"}));
  EXPECT_EQ(later[0].incident.incident_id, 7);
  ASSERT_EQ(history_.open_incidents().size(), 1u);
  EXPECT_EQ(history_.open_incidents()[0].incident_id, 8);
  auto stored = store_->inner.QueryFindings({.from = kStart - 2h, .until = kStart + 1h});
  ASSERT_TRUE(stored.ok());
  std::vector<int64_t> ids;
  for (const StoredFinding& f : *stored) ids.push_back(f.incident_id);
  EXPECT_EQ(ids, (std::vector<int64_t>{9, 8, 7}));
  EXPECT_EQ(SamplesOf(store_->inner, 0), 2u);
}

TEST_F(HistoryRecorderTest, ARestartedAgentContinuesTheIncidentsAndEventsOfTheLastRun) {
  const RecentEvents xid{.nvml_xids = {{0, 79, kStart}}};
  Cycle(0, {Hot(0)}, xid);
  HistoryRecorder restarted(Reopen(), {.path = "h"});
  RecentEvents restored = restarted.Connect(kStart + 1h);
  EXPECT_EQ(restored.nvml_xids, xid.nvml_xids);
  auto same = restarted.Record(SyntheticSnapshot(2, kStart + 1h), {Hot(0)}, {}, kStart + 1h);
  EXPECT_TRUE(same.empty());  // still the incident of the last run: nothing to alert
  ASSERT_EQ(restarted.open_incidents().size(), 1u);
  EXPECT_EQ(restarted.open_incidents()[0].incident_id, 1);
  EXPECT_EQ(restarted.open_incidents()[0].opened_at, kStart);
  HistoryRecorder narrow(Reopen(), {.path = "h", .events_window = 30min});
  EXPECT_TRUE(narrow.Connect(kStart + 1h).empty());  // the Xid is older than the window
}

// gpudoctor diag writes into the history from its own process; the agent
// reads the newest results back, once a minute, for the rules.
TEST_F(HistoryRecorderTest, DiagnosticsWrittenByAnotherProcessReachTheRulesWithinAMinute) {
  Cycle(0, {});
  EXPECT_TRUE(history_.LatestDiagnostics(kStart).empty());
  ASSERT_TRUE(store_->inner
                  .RecordDiagnostic({.finished_at = kStart + 5s,
                                     .gpu_index = 3,
                                     .test = "memtest",
                                     .state = "faulty",
                                     .summary = "104 memory errors",
                                     .command = "gpudoctor diag memtest --gpu 3"})
                  .ok());
  EXPECT_TRUE(history_.LatestDiagnostics(kStart + 30s).empty());  // read less than a minute ago
  const std::vector<DiagnosticRecord>& latest = history_.LatestDiagnostics(kStart + 61s);
  ASSERT_EQ(latest.size(), 1u);
  EXPECT_EQ(latest[0].state, "faulty");
  EXPECT_EQ(latest[0].gpu_index, 3u);
}

// The real store on a disk that fills up and is freed again.
// The first healthy sample decides the host's expected GPU count, once: a
// later sample with a GPU gone never becomes the expectation, and a write
// that fails is tried again with the next healthy sample.
TEST_F(HistoryRecorderTest, TheFirstHealthyGpuCountIsLearnedOnceAndKept) {
  Cycle(0, {});
  history_.LearnGpuCount(std::nullopt, kStart);  // not healthy: nothing to learn
  EXPECT_FALSE(history_.learned_gpu_count());

  store_->failure = "database or disk is full";
  history_.LearnGpuCount(8, kStart + 5s);
  EXPECT_FALSE(history_.learned_gpu_count());
  EXPECT_FALSE(history_.health().ok);
  store_->failure.reset();

  Cycle(2, {});
  history_.LearnGpuCount(8, kStart + 10s);
  ASSERT_TRUE(history_.learned_gpu_count());
  EXPECT_EQ(history_.learned_gpu_count()->count, 8u);
  history_.LearnGpuCount(7, kStart + 15s);  // a GPU fell off later: the expectation stays
  EXPECT_EQ(history_.learned_gpu_count()->count, 8u);
  auto stored = store_->inner.QueryLearnedGpuCount();
  ASSERT_TRUE(stored.ok());
  ASSERT_TRUE(stored->has_value());
  EXPECT_EQ((*stored)->count, 8u);
  EXPECT_EQ((*stored)->learned_at, kStart + 10s);

  // A restarted agent reads it back when its store opens.
  HistoryRecorder restarted(Reopen(), {.path = "/var/lib/gpudoctor/history.db"});
  restarted.Connect(kStart + 20s);
  ASSERT_TRUE(restarted.learned_gpu_count());
  EXPECT_EQ(restarted.learned_gpu_count()->count, 8u);
}

TEST(HistoryRecorderOnSqlite, RecoversFromAFullDiskWithoutReopening) {
  testing::ScratchDir dir;
  testing::FaultyVfs vfs;
  const std::string path = dir.File("history.db");
  HistoryRecorder history(OpenSqliteHistory(path), {.path = path});
  auto cycle = [&](int n, std::vector<Finding> findings) {
    const WallTime now = kStart + n * 5s;
    history.Connect(now);
    return history.Record(SyntheticSnapshot(2, now), std::move(findings), {}, now);
  };
  cycle(0, {});
  vfs.FailWrites(SQLITE_FULL);
  auto opened = cycle(1, {Hot(0)});
  EXPECT_EQ(Ids(opened, Kind::kOpened), (std::vector<std::string>{"temperature_high", "history_store_failing"}));
  EXPECT_NE(history.health().last_error.find("database or disk is full"), std::string::npos)
      << history.health().last_error;
  cycle(2, {Hot(0)});
  vfs.Heal();
  cycle(3, {Hot(0)});
  EXPECT_TRUE(history.health().ok) << history.health().last_error;
  EXPECT_EQ(SamplesOf(*history.store(), 1), 4u);
  auto open = history.store()->OpenIncidents();
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->size(), 1u);
  EXPECT_EQ(open->front().finding.id, "temperature_high");
}

}  // namespace
}  // namespace gpudoctor
