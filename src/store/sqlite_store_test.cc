// What only the SQLite store does: files, schema, durability and size.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <span>

#include "store/schema.h"
#include "store/sqlite_store.h"
#include "store/test_support.h"

namespace gpudoctor {
namespace {

using namespace std::chrono_literals;
using testing::MakeFinding;
using testing::Sample;
using testing::ScratchDir;
using testing::T0;

// Runs SQL on a file through a separate connection, the way another process would.
std::vector<std::string> RawSql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  std::vector<std::string> rows;
  char* error = nullptr;
  sqlite3_exec(
      db, sql.c_str(),
      [](void* out, int columns, char** values, char**) {
        std::string row;
        for (int i = 0; i < columns; ++i) row += (i ? "|" : "") + std::string(values[i] ? values[i] : "NULL");
        static_cast<std::vector<std::string>*>(out)->push_back(row);
        return 0;
      },
      &rows, &error);
  if (error) ADD_FAILURE() << sql << ": " << error;
  sqlite3_free(error);
  sqlite3_close(db);
  return rows;
}

// Turns a current history back into what version `version` wrote: the
// tables and findings columns later versions added are dropped.
void DowngradeTo(const std::string& path, int version) {
  struct Added {
    int version;
    const char* tables;  // quoted, comma-separated
  };
  static constexpr Added kTables[] = {
      {1, "'gpus', 'samples_raw', 'process_memory', 'downsample_progress', 'findings', 'samples_1m', 'samples_1h', "
          "'schema_migrations', 'sqlite_sequence'"},
      {3, "'events'"},
      {4, "'boots', 'remediations'"},
      {5, "'maintenance_done', 'host_facts'"},
  };
  static constexpr Added kFindingColumns[] = {
      {1, "'id', 'incident_key', 'rule_id', 'gpu_index', 'gpu_uuid', 'gpu_pci_bus_id', 'gpu_serial', 'has_gpu', "
          "'severity', 'summary', 'evidence', 'cause', 'actions', 'opened_at', 'last_seen', 'resolved_at', 'state'"},
      {2, "'subject'"},
      {4, "'part_of', 'newest_event_at'"},
  };
  static constexpr Added kGpuColumns[] = {
      {1, "'id', 'gpu_index', 'uuid', 'last_seen'"},
      {7, "'serial', 'pci_bus_id', 'name'"},
  };
  auto kept = [version](std::span<const Added> added) {
    std::string names;
    for (const Added& a : added)
      if (a.version <= version) names += (names.empty() ? "" : ", ") + std::string(a.tables);
    return names;
  };
  for (const std::string& table : RawSql(
           path, "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT IN (" + kept(kTables) + ")"))
    RawSql(path, "DROP TABLE " + table);
  for (const std::string& column : RawSql(path, "SELECT name FROM pragma_table_info('findings') WHERE name NOT IN (" +
                                                    kept(kFindingColumns) + ")"))
    RawSql(path, "ALTER TABLE findings DROP COLUMN " + column);
  for (const std::string& column :
       RawSql(path, "SELECT name FROM pragma_table_info('gpus') WHERE name NOT IN (" + kept(kGpuColumns) + ")"))
    RawSql(path, "ALTER TABLE gpus DROP COLUMN " + column);
  RawSql(path, "DELETE FROM schema_migrations WHERE version > " + std::to_string(version));
}

std::vector<std::string> EveryVersionApplied(int64_t applied_ms) {
  std::vector<std::string> rows;
  for (int version = 1; version <= kSchemaVersion; ++version)
    rows.push_back(std::to_string(version) + "|" + std::to_string(applied_ms));
  return rows;
}

TEST(SqliteStore, CreatesAVersionedWalHistory) {
  ScratchDir dir;
  const std::string path = dir.File("h.db");
  {
    auto store = SqliteHistoryStore::Open(path, {}, T0());
    ASSERT_TRUE(store.ok()) << store.error().message;
  }
  EXPECT_EQ(RawSql(path, "PRAGMA journal_mode"), std::vector<std::string>{"wal"});
  EXPECT_EQ(RawSql(path, "PRAGMA auto_vacuum"), std::vector<std::string>{"2"});  // incremental
  EXPECT_EQ(RawSql(path, "PRAGMA application_id"), std::vector<std::string>{std::to_string(0x47504448)});
  EXPECT_EQ(RawSql(path, "SELECT version, applied_at FROM schema_migrations ORDER BY version"),
            EveryVersionApplied(ToUnixMillis(T0())));
  // Reopening applies nothing twice.
  ASSERT_TRUE(SqliteHistoryStore::Open(path, {}, T0() + 1h).ok());
  EXPECT_EQ(RawSql(path, "SELECT count(*) FROM schema_migrations"),
            std::vector<std::string>{std::to_string(kSchemaVersion)});
}

TEST(SqliteStore, UpgradesAVersion1History) {
  ScratchDir dir;
  const std::string path = dir.File("h.db");
  {
    auto store = SqliteHistoryStore::Open(path, {}, T0());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->UpsertFindings(std::vector{MakeFinding("temperature_high", 0)}, T0()).ok());
  }
  DowngradeTo(path, 1);  // no subject column

  auto store = SqliteHistoryStore::Open(path, {}, T0() + 1h);
  ASSERT_TRUE(store.ok()) << store.error().message;
  EXPECT_EQ(RawSql(path, "SELECT max(version) FROM schema_migrations"),
            std::vector<std::string>{std::to_string(kSchemaVersion)});
  auto findings = (*store)->QueryFindings({.from = T0(), .until = T0() + 1s, .open_only = true});
  ASSERT_TRUE(findings.ok()) << findings.error().message;
  ASSERT_EQ(findings->size(), 1u);
  EXPECT_EQ(findings->front().finding, MakeFinding("temperature_high", 0));
  EXPECT_EQ(findings->front().finding.subject, "");
}

TEST(SqliteStore, ReadsAVersion1HistoryWithoutUpgradingIt) {
  ScratchDir dir;
  const std::string path = dir.File("h.db");
  {
    auto store = SqliteHistoryStore::Open(path, {}, T0());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Append(std::vector{Sample(T0(), 0, 55, 99)}, {}).ok());
    ASSERT_TRUE((*store)->UpsertFindings(std::vector{MakeFinding("temperature_high", 0)}, T0()).ok());
  }
  DowngradeTo(path, 1);

  SqliteStoreOptions read_only;
  read_only.read_only = true;
  auto store = SqliteHistoryStore::Open(path, read_only, T0() + 1h);
  ASSERT_TRUE(store.ok()) << store.error().message;
  auto findings = (*store)->QueryFindings({.from = T0(), .until = T0() + 1s, .open_only = true});
  ASSERT_TRUE(findings.ok()) << findings.error().message;
  ASSERT_EQ(findings->size(), 1u);
  EXPECT_EQ(findings->front().finding, MakeFinding("temperature_high", 0));
  auto gpus = (*store)->ListGpus();
  ASSERT_TRUE(gpus.ok()) << gpus.error().message;
  EXPECT_EQ(gpus->size(), 1u);
  // Read as it was: no migration, no new column.
  EXPECT_EQ(RawSql(path, "SELECT max(version) FROM schema_migrations"), std::vector<std::string>{"1"});
  EXPECT_EQ(RawSql(path, "SELECT count(*) FROM pragma_table_info('findings') WHERE name = 'subject'"),
            std::vector<std::string>{"0"});
}

TEST(SqliteStore, ReadsAVersion3HistoryWithoutUpgradingItAsOneWithNoAcknowledgementsOrBoots) {
  ScratchDir dir;
  const std::string path = dir.File("h.db");
  {
    auto store = SqliteHistoryStore::Open(path, {}, T0());
    ASSERT_TRUE(store.ok());
    Finding member = MakeFinding("temperature_high", 0);
    member.part_of = "facility_cooling";
    ASSERT_TRUE((*store)->UpsertFindings(std::vector{member}, T0()).ok());
  }
  DowngradeTo(path, 3);

  SqliteStoreOptions read_only;
  read_only.read_only = true;
  auto store = SqliteHistoryStore::Open(path, read_only, T0() + 1h);
  ASSERT_TRUE(store.ok()) << store.error().message;
  auto findings = (*store)->QueryFindings({.from = T0(), .until = T0() + 1s});
  ASSERT_TRUE(findings.ok()) << findings.error().message;
  ASSERT_EQ(findings->size(), 1u);
  EXPECT_EQ(findings->front().finding, MakeFinding("temperature_high", 0));  // part of nothing
  auto remediations = (*store)->QueryRemediations({.from = WallTime{}, .until = WallTime::max()});
  auto boots = (*store)->QueryBoots(WallTime{}, WallTime::max());
  ASSERT_TRUE(remediations.ok() && boots.ok());
  EXPECT_TRUE(remediations->empty());
  EXPECT_TRUE(boots->empty());
  EXPECT_EQ(RawSql(path, "SELECT max(version) FROM schema_migrations"), std::vector<std::string>{"3"});
}

TEST(SqliteStore, UpgradesAVersion5HistoryToOneThatKeepsDiagnostics) {
  ScratchDir dir;
  const std::string path = dir.File("h.db");
  {
    auto store = SqliteHistoryStore::Open(path, {}, T0());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->RecordMaintenance({"dust_cleaning", T0() - 24h, "rack 4"}, T0()).ok());
  }
  DowngradeTo(path, 5);
  ASSERT_EQ(RawSql(path, "SELECT count(*) FROM sqlite_schema WHERE name = 'diagnostics'"),
            std::vector<std::string>{"0"});

  {
    // Read as it is, a version-5 history has no diagnostics and stays version 5.
    SqliteStoreOptions read_only;
    read_only.read_only = true;
    auto store = SqliteHistoryStore::Open(path, read_only, T0() + 1h);
    ASSERT_TRUE(store.ok()) << store.error().message;
    auto latest = (*store)->LatestDiagnostics();
    ASSERT_TRUE(latest.ok()) << latest.error().message;
    EXPECT_TRUE(latest->empty());
    EXPECT_EQ(RawSql(path, "SELECT max(version) FROM schema_migrations"), std::vector<std::string>{"5"});
  }

  auto store = SqliteHistoryStore::Open(path, {}, T0() + 1h);
  ASSERT_TRUE(store.ok()) << store.error().message;
  EXPECT_EQ(RawSql(path, "SELECT version, applied_at FROM schema_migrations WHERE version > 4 ORDER BY version"),
            (std::vector<std::string>{"5|" + std::to_string(ToUnixMillis(T0())),
                                      "6|" + std::to_string(ToUnixMillis(T0() + 1h)),
                                      "7|" + std::to_string(ToUnixMillis(T0() + 1h))}));
  const DiagnosticRecord record{.finished_at = T0() + 1h,
                                .gpu_index = 3,
                                .uuid = "GPU-3",
                                .pci_bus_id = "00000000:1A:00.0",
                                .test = "memtest",
                                .state = "faulty",
                                .summary = "2 of 9 patterns found bad bits",
                                .command = "gpudoctor diag memtest --gpu 3"};
  ASSERT_TRUE((*store)->RecordDiagnostic(record).ok());
  auto latest = (*store)->LatestDiagnostics();
  ASSERT_TRUE(latest.ok()) << latest.error().message;
  EXPECT_EQ(*latest, std::vector<DiagnosticRecord>{record});
  auto maintenance = (*store)->QueryMaintenance();  // what version 5 kept is still there
  ASSERT_TRUE(maintenance.ok());
  EXPECT_EQ(*maintenance, (std::vector<MaintenanceDone>{{"dust_cleaning", T0() - 24h, "rack 4"}}));
}

TEST(SqliteStore, ReadOnlyRefusesAHistoryFromANewerGpudoctor) {
  ScratchDir dir;
  const std::string path = dir.File("h.db");
  ASSERT_TRUE(SqliteHistoryStore::Open(path, {}, T0()).ok());
  RawSql(path, "INSERT INTO schema_migrations (version, applied_at) VALUES (99, 0)");
  SqliteStoreOptions read_only;
  read_only.read_only = true;
  auto store = SqliteHistoryStore::Open(path, read_only, T0());
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.error().message.find("version 99"), std::string::npos) << store.error().message;
  EXPECT_NE(store.error().message.find("upgrade gpudoctor"), std::string::npos) << store.error().message;
}

TEST(SqliteStore, EveryMetricHasAColumnAtEveryResolution) {
  ScratchDir dir;
  const std::string path = dir.File("h.db");
  ASSERT_TRUE(SqliteHistoryStore::Open(path, {}, T0()).ok());
  for (const MetricInfo& metric : kMetrics) {
    const std::string name(metric.name);
    EXPECT_EQ(RawSql(path, "SELECT count(*) FROM pragma_table_info('samples_raw') WHERE name = '" + name + "'"),
              std::vector<std::string>{"1"}) << name;
    for (const char* table : {"samples_1m", "samples_1h"}) {
      EXPECT_EQ(RawSql(path, std::string("SELECT count(*) FROM pragma_table_info('") + table + "') WHERE name IN ('" +
                                 name + "_min', '" + name + "_avg', '" + name + "_max')"),
                std::vector<std::string>{"3"}) << table << " " << name;
    }
  }
}

TEST(SqliteStore, KeepsEverythingAcrossReopen) {
  ScratchDir dir;
  const std::string path = dir.File("h.db");
  int64_t incident = 0;
  {
    auto store = SqliteHistoryStore::Open(path, {}, T0());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Append(std::vector{Sample(T0(), 0, 55, 99)}, {}).ok());
    auto opened = (*store)->UpsertFindings(std::vector{MakeFinding("temperature_high", 0)}, T0());
    ASSERT_TRUE(opened.ok());
    incident = opened->front().incident.incident_id;
  }
  SqliteStoreOptions read_only;
  read_only.read_only = true;
  auto store = SqliteHistoryStore::Open(path, read_only);
  ASSERT_TRUE(store.ok()) << store.error().message;
  auto findings = (*store)->QueryFindings({.from = T0(), .until = T0() + 1s});
  ASSERT_TRUE(findings.ok());
  ASSERT_EQ(findings->size(), 1u);
  EXPECT_EQ(findings->front().incident_id, incident);
  EXPECT_EQ(findings->front().finding, MakeFinding("temperature_high", 0));  // evidence JSON round-trips
  auto series = (*store)->QuerySeries({.gpu = "0", .metric = Metric::kTemperatureC, .from = T0(), .until = T0() + 1s});
  ASSERT_TRUE(series.ok());
  ASSERT_EQ(series->points.size(), 1u);
  EXPECT_EQ(series->points[0].avg, 55);
  // Read-only means read-only.
  EXPECT_FALSE((*store)->Append(std::vector{Sample(T0() + 5s, 0, 55, 99)}, {}).ok());
}

TEST(SqliteStore, RefusesFilesThatAreNotItsHistory) {
  ScratchDir dir;
  const std::string text = dir.File("notes.txt");
  std::ofstream(text) << "this is not a database, just some text that is long enough to look like a header\n";
  auto from_text = SqliteHistoryStore::Open(text, {});
  ASSERT_FALSE(from_text.ok());
  EXPECT_NE(from_text.error().message.find("not a gpudoctor history"), std::string::npos) << from_text.error().message;

  const std::string other = dir.File("other.db");
  RawSql(other, "CREATE TABLE customers (name TEXT)");
  auto from_other = SqliteHistoryStore::Open(other, {});
  ASSERT_FALSE(from_other.ok());
  EXPECT_NE(from_other.error().message.find("not a gpudoctor history"), std::string::npos);
  EXPECT_EQ(RawSql(other, "SELECT count(*) FROM sqlite_schema"), std::vector<std::string>{"1"});  // untouched

  SqliteStoreOptions read_only;
  read_only.read_only = true;
  EXPECT_FALSE(SqliteHistoryStore::Open(dir.File("missing.db"), read_only).ok());
  EXPECT_FALSE(std::filesystem::exists(dir.File("missing.db")));
}

TEST(SqliteStore, RefusesAHistoryFromANewerVersion) {
  ScratchDir dir;
  const std::string path = dir.File("h.db");
  ASSERT_TRUE(SqliteHistoryStore::Open(path, {}, T0()).ok());
  RawSql(path, "INSERT INTO schema_migrations VALUES (99, 0)");
  auto store = SqliteHistoryStore::Open(path, {});
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.error().message.find("newer"), std::string::npos) << store.error().message;
}

TEST(SqliteStore, SizeLimitDropsTheOldestSamplesFirst) {
  ScratchDir dir;
  SqliteStoreOptions options;
  options.retention.max_bytes = 512 * 1024;
  auto store = SqliteHistoryStore::Open(dir.File("h.db"), options, T0());
  ASSERT_TRUE(store.ok());
  // Four days of samples every 10 s for 2 GPUs: several MB, far over the limit.
  const WallTime end = T0() + 96h;
  std::vector<GpuSample> batch;
  for (WallTime t = T0(); t < end; t += 10s) {
    batch.push_back(Sample(t, 0, 40, 50));
    batch.push_back(Sample(t, 1, 41, 51));
    if (batch.size() >= 2000) {
      ASSERT_TRUE((*store)->Append(batch, {}).ok());
      batch.clear();
    }
  }
  ASSERT_TRUE((*store)->Append(batch, {}).ok());
  auto before = (*store)->UsedBytes();
  ASSERT_TRUE(before.ok());
  ASSERT_GT(*before, options.retention.max_bytes);
  for (int i = 0; i < 20; ++i) {
    auto report = (*store)->Maintain(end);
    ASSERT_TRUE(report.ok()) << report.error().message;
    if (!report->more_work) break;
  }
  auto after = (*store)->UsedBytes();
  ASSERT_TRUE(after.ok());
  // Raw data is kept down to its one-day floor, which alone is over this tiny limit.
  auto raw = (*store)->QuerySeries({.gpu = "0", .metric = Metric::kTemperatureC, .from = T0(), .until = end,
                                    .resolution = Resolution::kRaw});
  ASSERT_TRUE(raw.ok());
  ASSERT_FALSE(raw->points.empty());
  EXPECT_GE(raw->points.front().time, end - 25h);
  EXPECT_LT(*after, *before);
  // Buckets were written before the raw samples went, and are under their 7-day floor.
  auto minutes = (*store)->QuerySeries({.gpu = "0", .metric = Metric::kTemperatureC, .from = T0(), .until = end,
                                        .resolution = Resolution::kMinute});
  ASSERT_TRUE(minutes.ok());
  ASSERT_FALSE(minutes->points.empty());
  EXPECT_LT(minutes->points.front().time, T0() + 1min);
  auto check = (*store)->IntegrityCheck();
  ASSERT_TRUE(check.ok());
  EXPECT_EQ(*check, "ok");
}

TEST(SqliteStore, ReadersSeeCommittedDataWhileTheWriterWorks) {
  ScratchDir dir;
  const std::string path = dir.File("h.db");
  auto writer = SqliteHistoryStore::Open(path, {}, T0());
  ASSERT_TRUE(writer.ok());
  SqliteStoreOptions read_only;
  read_only.read_only = true;
  auto reader = SqliteHistoryStore::Open(path, read_only);
  ASSERT_TRUE(reader.ok()) << reader.error().message;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE((*writer)->Append(std::vector{Sample(T0() + i * 5s, 0, 40 + i, 1)}, {}).ok());
    auto series = (*reader)->QuerySeries({.gpu = "0", .metric = Metric::kTemperatureC, .from = T0(), .until = T0() + 1h});
    ASSERT_TRUE(series.ok());
    EXPECT_EQ(series->points.size(), static_cast<size_t>(i + 1));
  }
}

}  // namespace
}  // namespace gpudoctor
