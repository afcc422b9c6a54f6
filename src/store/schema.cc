#include "store/schema.h"

#include <string>
#include <vector>

namespace gpudoctor {
namespace {

// Version 1. Sample tables are keyed by (t, gpu_id) so inserts append at the
// end of the B-tree and pruning deletes from its start. Metric columns carry
// the names of kMetrics; NULL is a reading the GPU did not give.
constexpr const char* kMigration1 = R"sql(
CREATE TABLE gpus (
  id INTEGER PRIMARY KEY,
  gpu_index INTEGER NOT NULL,
  uuid TEXT NOT NULL,
  last_seen INTEGER NOT NULL,
  UNIQUE (gpu_index, uuid)
);
CREATE TABLE samples_raw (
  t INTEGER NOT NULL,
  gpu_id INTEGER NOT NULL,
  temperature_c, memory_temperature_c, power_w, utilization_gpu_percent, utilization_memory_percent,
  memory_used_bytes, memory_total_bytes, fan_percent, sm_clock_mhz, memory_clock_mhz,
  ecc_corrected, ecc_uncorrected, pcie_replays, nvlink_errors, xid_events,
  PRIMARY KEY (t, gpu_id)
) WITHOUT ROWID;
CREATE TABLE process_memory (
  t INTEGER NOT NULL,
  gpu_id INTEGER NOT NULL,
  pid INTEGER NOT NULL,
  name TEXT NOT NULL,
  used_bytes INTEGER,
  PRIMARY KEY (t, gpu_id, pid)
) WITHOUT ROWID;
CREATE TABLE downsample_progress (
  resolution TEXT PRIMARY KEY,
  done_until INTEGER NOT NULL
);
CREATE TABLE findings (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  incident_key TEXT NOT NULL,
  rule_id TEXT NOT NULL,
  gpu_index INTEGER,
  gpu_uuid TEXT,
  gpu_pci_bus_id TEXT,
  gpu_serial TEXT,
  has_gpu INTEGER NOT NULL,
  severity TEXT NOT NULL,
  summary TEXT NOT NULL,
  evidence TEXT NOT NULL,
  cause TEXT NOT NULL,
  actions TEXT NOT NULL,
  opened_at INTEGER NOT NULL,
  last_seen INTEGER NOT NULL,
  resolved_at INTEGER,
  state TEXT NOT NULL CHECK (state IN ('open', 'resolved'))
);
CREATE UNIQUE INDEX findings_one_open_per_key ON findings (incident_key) WHERE state = 'open';
CREATE INDEX findings_by_time ON findings (opened_at);
)sql";

// The aggregate tables: min/avg/max of each metric per bucket.
std::string AggregateTable(const char* name) {
  std::string sql = std::string("CREATE TABLE ") + name + " (\n  t INTEGER NOT NULL,\n  gpu_id INTEGER NOT NULL,\n"
                    "  samples INTEGER NOT NULL,\n";
  for (const char* metric : {"temperature_c", "memory_temperature_c", "power_w", "utilization_gpu_percent",
                             "utilization_memory_percent", "memory_used_bytes", "memory_total_bytes", "fan_percent",
                             "sm_clock_mhz", "memory_clock_mhz", "ecc_corrected", "ecc_uncorrected", "pcie_replays",
                             "nvlink_errors", "xid_events"}) {
    for (const char* suffix : {"_min", "_avg", "_max"}) sql += std::string("  ") + metric + suffix + ",\n";
  }
  sql += "  PRIMARY KEY (t, gpu_id)\n) WITHOUT ROWID;\n";
  return sql;
}

// Version 2. A finding's subject besides its GPU (a training job's name),
// part of its incident key since several jobs may stall at once.
constexpr const char* kMigration2 = "ALTER TABLE findings ADD COLUMN subject TEXT NOT NULL DEFAULT '';\n";

// Version 3. The events the windowed rules judge (Xids from NVML's event API
// and kernel-log events), so an agent that restarts judges the same window.
// `t` is when the agent received the event; `body` is event_records.h's JSON.
constexpr const char* kMigration3 = R"sql(
CREATE TABLE events (
  t INTEGER NOT NULL,
  source TEXT NOT NULL CHECK (source IN ('nvml', 'log')),
  body TEXT NOT NULL
);
CREATE INDEX events_by_time ON events (t);
)sql";

// Version 4. One story per incident and what was done about it: the root
// a finding is part of and its newest event; the host's boots, so an Xid can
// be seen to outlive a reboot; and remediations (acknowledgements, reboots
// after a critical finding), which resolve incidents and are counted.
constexpr const char* kMigration4 = R"sql(
ALTER TABLE findings ADD COLUMN part_of TEXT NOT NULL DEFAULT '';
ALTER TABLE findings ADD COLUMN newest_event_at INTEGER;
CREATE TABLE boots (
  boot_id TEXT PRIMARY KEY,
  booted_at INTEGER NOT NULL,
  recorded_at INTEGER NOT NULL
);
CREATE INDEX boots_by_time ON boots (booted_at);
CREATE TABLE remediations (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL CHECK (kind IN ('ack', 'reboot')),
  at INTEGER NOT NULL,
  incident_id INTEGER NOT NULL,
  incident_key TEXT NOT NULL,
  severity TEXT NOT NULL,
  has_gpu INTEGER NOT NULL,
  gpu_index INTEGER,
  gpu_uuid TEXT NOT NULL,
  gpu_pci_bus_id TEXT NOT NULL,
  gpu_serial TEXT NOT NULL,
  gpu_reset INTEGER NOT NULL,
  actor TEXT NOT NULL,
  note TEXT NOT NULL
);
CREATE INDEX remediations_by_time ON remediations (at);
)sql";

// Version 5. What operators did to keep the host up (gpudoctor maintenance
// done TASK), and facts the agent learned about the host: the GPU count of
// its first healthy sample, kept under the name 'gpu_count'.
constexpr const char* kMigration5 = R"sql(
CREATE TABLE maintenance_done (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  task TEXT NOT NULL,
  done_at INTEGER NOT NULL,
  note TEXT NOT NULL,
  recorded_at INTEGER NOT NULL
);
CREATE INDEX maintenance_done_by_task ON maintenance_done (task, done_at);
CREATE TABLE host_facts (
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL,
  learned_at INTEGER NOT NULL
);
)sql";

// Version 6. The outcome of each `gpudoctor diag` test on each GPU, so that
// status, check and the dashboard can say "memtest passed 2 days ago". Every
// run is kept (until the resolved-findings retention); readers want the newest
// per GPU and test, a GPU being its UUID or, without one, its index.
constexpr const char* kMigration6 = R"sql(
CREATE TABLE diagnostics (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  finished_at INTEGER NOT NULL,
  gpu_index INTEGER NOT NULL,
  gpu_uuid TEXT NOT NULL,
  gpu_pci_bus_id TEXT NOT NULL,
  test TEXT NOT NULL,
  state TEXT NOT NULL,
  summary TEXT NOT NULL,
  command TEXT NOT NULL
);
CREATE INDEX diagnostics_by_time ON diagnostics (finished_at);
)sql";

// Version 7. What each GPU was last seen as (serial, PCI bus id, model), so
// that a GPU which stops answering is still named by its card and slot.
constexpr const char* kMigration7 = R"sql(
ALTER TABLE gpus ADD COLUMN serial TEXT NOT NULL DEFAULT '';
ALTER TABLE gpus ADD COLUMN pci_bus_id TEXT NOT NULL DEFAULT '';
ALTER TABLE gpus ADD COLUMN name TEXT NOT NULL DEFAULT '';
)sql";

struct Migration {
  int version;
  std::string sql;
};

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration> migrations = {
      {1, kMigration1 + AggregateTable("samples_1m") + AggregateTable("samples_1h")},
      {2, kMigration2},
      {3, kMigration3},
      {4, kMigration4},
      {5, kMigration5},
      {6, kMigration6},
      {7, kMigration7},
  };
  return migrations;
}

}  // namespace

Result<DatabaseState> InspectDatabase(SqliteConnection& db) {
  // The first read of a file that is not SQLite fails here ("file is not a database").
  auto tables = db.QueryInt("SELECT count(*) FROM sqlite_schema");
  if (!tables) return Error{"not a gpudoctor history database: " + tables.error().message};
  auto application_id = db.QueryInt("PRAGMA application_id");
  if (!application_id) return application_id.error();
  if (application_id->value_or(0) == kApplicationId) return DatabaseState::kHistory;
  if (tables->value_or(0) == 0 && application_id->value_or(0) == 0) return DatabaseState::kEmpty;
  return Error{"not a gpudoctor history database (it holds other tables)"};
}

Result<int> SchemaVersion(SqliteConnection& db) {
  auto exists = db.QueryInt("SELECT count(*) FROM sqlite_schema WHERE name = 'schema_migrations'");
  if (!exists) return exists.error();
  if (exists->value_or(0) == 0) return 0;
  auto version = db.QueryInt("SELECT max(version) FROM schema_migrations");
  if (!version) return version.error();
  return static_cast<int>(version->value_or(0));
}

Status MigrateSchema(SqliteConnection& db, int64_t now_ms) {
  auto current = SchemaVersion(db);
  if (!current) return current.error();
  if (*current > kSchemaVersion) {
    return Error{"history schema version " + std::to_string(*current) + " is newer than this gpudoctor (" +
                 std::to_string(kSchemaVersion) + "); upgrade gpudoctor"};
  }
  for (const Migration& migration : Migrations()) {
    if (migration.version <= *current) continue;
    auto transaction = SqliteTransaction::Begin(db);
    if (!transaction) return transaction.error();
    std::string sql = migration.sql;
    if (migration.version == 1) {
      sql += "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);\n";
      sql += "PRAGMA application_id = " + std::to_string(kApplicationId) + ";\n";
    }
    sql += "INSERT INTO schema_migrations (version, applied_at) VALUES (" + std::to_string(migration.version) +
           ", " + std::to_string(now_ms) + ");";
    if (Status status = db.Execute(sql); !status)
      return Error{"schema migration " + std::to_string(migration.version) + " failed: " + status.error().message};
    if (Status status = transaction->Commit(); !status) return status;
  }
  return Status::Ok();
}

}  // namespace gpudoctor
