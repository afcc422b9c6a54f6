#include "store/sqlite_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <map>

#include <nlohmann/json.hpp>

#include "common/json_text.h"
#include "common/text.h"
#include "store/event_records.h"
#include "store/maintenance_plan.h"
#include "store/schema.h"
#include "store/sqlite_connection.h"

namespace gpudoctor {
namespace {

constexpr int64_t kMillisPerHour = 3'600'000;
constexpr int64_t kMillisPerDay = 24 * kMillisPerHour;

int64_t Millis(Duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

// A history may hold what only its owner should read, so a new one is created
// 0600 (less the umask); SQLite gives the -wal and -shm files the database
// file's mode. An existing file keeps its mode. A failure here is left to the
// open that follows, which says why in SQLite's words.
void CreatePrivatelyIfMissing(const std::string& path) {
  if (path.empty() || path == ":memory:") return;  // SQLite's temporary and in-memory databases
  const int fd = open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) close(fd);
}

const char* AggregateTable(Resolution resolution) {
  return resolution == Resolution::kMinute ? "samples_1m" : "samples_1h";
}

std::string RawInsertSql() {
  std::string columns = "t, gpu_id", placeholders = "?, ?";
  for (const MetricInfo& metric : kMetrics) {
    columns += ", " + std::string(metric.name);
    placeholders += ", ?";
  }
  return "INSERT OR REPLACE INTO samples_raw (" + columns + ") VALUES (" + placeholders + ")";
}

// Folds raw samples in [?1, ?2) into buckets; SQL's min/avg/max skip NULLs.
std::string AggregateInsertSql(Resolution resolution) {
  const std::string width = std::to_string(Millis(BucketWidth(resolution)));
  std::string columns = "t, gpu_id, samples", select = "t - t % " + width + ", gpu_id, count(*)";
  for (const MetricInfo& metric : kMetrics) {
    const std::string name(metric.name);
    columns += ", " + name + "_min, " + name + "_avg, " + name + "_max";
    select += ", min(" + name + "), avg(" + name + "), max(" + name + ")";
  }
  return std::string("INSERT OR REPLACE INTO ") + AggregateTable(resolution) + " (" + columns + ") SELECT " + select +
         " FROM samples_raw WHERE t >= ?1 AND t < ?2 GROUP BY t - t % " + width + ", gpu_id";
}

// The columns ReadIncident reads, in its order. An older history, read
// without upgrading it, lacks the later columns: a version-1 finding's
// subject is empty, a version-3 finding is part of nothing.
std::string IncidentColumns(int schema_version) {
  return std::string(
             "id, incident_key, rule_id, has_gpu, gpu_index, gpu_uuid, gpu_pci_bus_id, gpu_serial, severity, summary, "
             "evidence, cause, actions, opened_at, last_seen, resolved_at, ") +
         (schema_version >= 2 ? "subject" : "'' AS subject") +
         (schema_version >= 4 ? ", part_of, newest_event_at" : ", '' AS part_of, NULL AS newest_event_at");
}

std::vector<std::string> StringsFromJson(const std::string& text) {
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_array()) return {text};  // hand-edited or damaged: keep what is there
  std::vector<std::string> strings;
  for (const auto& item : parsed) strings.push_back(item.is_string() ? item.get<std::string>() : ToJsonText(item));
  return strings;
}

std::string JsonFromStrings(const std::vector<std::string>& strings) {
  return ToJsonText(nlohmann::json(strings));
}

// A GPU reference from columns first..first+4: has_gpu, gpu_index, gpu_uuid, gpu_pci_bus_id, gpu_serial.
std::optional<GpuRef> ReadGpu(const SqliteStatement& row, int first) {
  if (row.Int(first) == 0) return std::nullopt;
  GpuRef gpu;
  if (auto index = row.OptionalInt(first + 1)) gpu.index = static_cast<uint32_t>(*index);
  gpu.uuid = row.Text(first + 2);
  gpu.pci_bus_id = row.Text(first + 3);
  gpu.serial = row.Text(first + 4);
  return gpu;
}

// Binds a GPU reference to parameters first..first+4, in ReadGpu's order.
void BindGpu(SqliteStatement& statement, int first, const std::optional<GpuRef>& ref) {
  statement.Bind(first, int64_t{ref.has_value()});
  const GpuRef gpu = ref.value_or(GpuRef{});
  if (gpu.index) statement.Bind(first + 1, int64_t{*gpu.index});
  else statement.BindNull(first + 1);
  statement.Bind(first + 2, gpu.uuid);
  statement.Bind(first + 3, gpu.pci_bus_id);
  statement.Bind(first + 4, gpu.serial);
}

void BindTime(SqliteStatement& statement, int index, const std::optional<WallTime>& time) {
  if (time) statement.Bind(index, ToUnixMillis(*time));
  else statement.BindNull(index);
}

StoredFinding ReadIncident(const SqliteStatement& row) {
  StoredFinding incident;
  incident.incident_id = row.Int(0);
  incident.key = row.Text(1);
  Finding& finding = incident.finding;
  finding.id = row.Text(2);
  finding.gpu = ReadGpu(row, 3);
  finding.severity = SeverityFromName(row.Text(8)).value_or(Severity::kUnknown);
  finding.summary = row.Text(9);
  finding.evidence = StringsFromJson(row.Text(10));
  finding.cause = row.Text(11);
  finding.actions = StringsFromJson(row.Text(12));
  incident.opened_at = FromUnixMillis(row.Int(13));
  incident.last_seen = FromUnixMillis(row.Int(14));
  if (auto resolved = row.OptionalInt(15)) incident.resolved_at = FromUnixMillis(*resolved);
  finding.subject = row.Text(16);
  finding.part_of = row.Text(17);
  if (auto newest = row.OptionalInt(18)) finding.newest_event_at = FromUnixMillis(*newest);
  return incident;
}

// Binds the finding's content to parameters first..first+12.
void BindFinding(SqliteStatement& statement, int first, const Finding& finding) {
  BindGpu(statement, first, finding.gpu);
  statement.Bind(first + 5, std::string_view(SeverityName(finding.severity)));
  statement.Bind(first + 6, finding.summary);
  statement.Bind(first + 7, JsonFromStrings(finding.evidence));
  statement.Bind(first + 8, finding.cause);
  statement.Bind(first + 9, JsonFromStrings(finding.actions));
  statement.Bind(first + 10, finding.subject);
  statement.Bind(first + 11, finding.part_of);
  BindTime(statement, first + 12, finding.newest_event_at);
}

const char* const kRemediationColumns =
    "id, kind, at, incident_id, incident_key, severity, has_gpu, gpu_index, gpu_uuid, gpu_pci_bus_id, gpu_serial, "
    "gpu_reset, actor, note";

Remediation ReadRemediation(const SqliteStatement& row) {
  Remediation remediation;
  remediation.id = row.Int(0);
  remediation.kind = row.Text(1) == "reboot" ? Remediation::Kind::kReboot : Remediation::Kind::kAck;
  remediation.at = FromUnixMillis(row.Int(2));
  remediation.incident_id = row.Int(3);
  remediation.incident_key = row.Text(4);
  remediation.severity = SeverityFromName(row.Text(5)).value_or(Severity::kUnknown);
  remediation.gpu = ReadGpu(row, 6);
  remediation.gpu_reset = row.Int(11) != 0;
  remediation.actor = row.Text(12);
  remediation.note = row.Text(13);
  return remediation;
}

// Restores synchronous=NORMAL however the durable section ends.
class FullSyncScope {
 public:
  explicit FullSyncScope(SqliteConnection& db) : db_(db) { status_ = db_.Execute("PRAGMA synchronous = FULL"); }
  ~FullSyncScope() { (void)db_.Execute("PRAGMA synchronous = NORMAL"); }
  const Status& status() const { return status_; }

 private:
  SqliteConnection& db_;
  Status status_;
};

}  // namespace

SqliteHistoryStore::SqliteHistoryStore(std::unique_ptr<SqliteConnection> db, SqliteStoreOptions options,
                                       int schema_version)
    : db_(std::move(db)),
      options_(options),
      incident_columns_(IncidentColumns(schema_version)),
      schema_version_(schema_version) {}

SqliteHistoryStore::~SqliteHistoryStore() = default;

Result<std::unique_ptr<SqliteHistoryStore>> SqliteHistoryStore::Open(const std::string& path,
                                                                     SqliteStoreOptions options, WallTime now) {
  const int flags = options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  if (!options.read_only) CreatePrivatelyIfMissing(path);
  auto db = SqliteConnection::Open(path, flags | SQLITE_OPEN_NOMUTEX);
  if (!db) return db.error();
  sqlite3_busy_timeout((*db)->handle(), static_cast<int>(Millis(options.busy_timeout)));
  if (options.cache_kib > 0) {
    if (Status status = (*db)->Execute("PRAGMA cache_size = -" + std::to_string(options.cache_kib)); !status)
      return Error{path + ": " + status.error().message};
  }

  auto state = InspectDatabase(**db);
  if (!state) return Error{path + ": " + state.error().message};
  int schema_version = kSchemaVersion;
  if (options.read_only) {
    // Read as it is, never upgraded: the file may be evidence copied off a
    // dead machine, or on read-only media. Older versions lack only columns
    // the queries then read as empty (IncidentColumns).
    if (*state == DatabaseState::kEmpty) return Error{path + ": not a gpudoctor history database (empty)"};
    auto version = SchemaVersion(**db);
    if (!version) return Error{path + ": " + version.error().message};
    if (*version < 1 || *version > kSchemaVersion) {
      return Error{path + ": history schema version " + std::to_string(*version) + ", this gpudoctor reads 1 to " +
                   std::to_string(kSchemaVersion) + (*version > kSchemaVersion ? "; upgrade gpudoctor" : "")};
    }
    schema_version = *version;
  } else {
    // auto_vacuum takes effect only before the file is first written; it lets
    // Maintain hand freed pages back with PRAGMA incremental_vacuum.
    if (*state == DatabaseState::kEmpty) {
      if (Status status = (*db)->Execute("PRAGMA auto_vacuum = INCREMENTAL"); !status)
        return Error{path + ": " + status.error().message};
    }
    for (const char* pragma : {"PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL",
                               "PRAGMA journal_size_limit = 67108864"}) {
      if (Status status = (*db)->Execute(pragma); !status) return Error{path + ": " + status.error().message};
    }
    if (Status status = MigrateSchema(**db, ToUnixMillis(now)); !status)
      return Error{path + ": " + status.error().message};
  }
  return std::unique_ptr<SqliteHistoryStore>(new SqliteHistoryStore(std::move(*db), options, schema_version));
}

Result<int64_t> SqliteHistoryStore::GpuId(const GpuSample& sample, int64_t time_ms) {
  // An identity field read now replaces the one kept; one not read keeps it.
  auto upsert = db_->Prepared(
      "INSERT INTO gpus (gpu_index, uuid, last_seen, serial, pci_bus_id, name) VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
      "ON CONFLICT (gpu_index, uuid) DO UPDATE SET last_seen = max(last_seen, excluded.last_seen), "
      "serial = CASE WHEN excluded.serial != '' THEN excluded.serial ELSE serial END, "
      "pci_bus_id = CASE WHEN excluded.pci_bus_id != '' THEN excluded.pci_bus_id ELSE pci_bus_id END, "
      "name = CASE WHEN excluded.name != '' THEN excluded.name ELSE name END RETURNING id");
  if (!upsert) return upsert.error();
  (*upsert)->Bind(1, int64_t{sample.gpu_index});
  (*upsert)->Bind(2, sample.uuid);
  (*upsert)->Bind(3, time_ms);
  (*upsert)->Bind(4, sample.serial);
  (*upsert)->Bind(5, sample.pci_bus_id);
  (*upsert)->Bind(6, sample.name);
  auto row = (*upsert)->Step();
  if (!row) return row.error();
  return (*upsert)->Int(0);
}

Status SqliteHistoryStore::Append(std::span<const GpuSample> gpus, std::span<const ProcessMemorySample> processes) {
  std::lock_guard lock(mutex_);
  auto transaction = SqliteTransaction::Begin(*db_);
  if (!transaction) return transaction.error();
  static const std::string insert_raw = RawInsertSql();
  // Each GPU's row id is looked up (and its last_seen raised) once per call.
  std::map<std::pair<uint32_t, std::string>, int64_t> ids;
  auto id_of = [&](const GpuSample& identity, int64_t t) -> Result<int64_t> {
    auto it = ids.find({identity.gpu_index, identity.uuid});
    if (it != ids.end()) return it->second;
    auto id = GpuId(identity, t);
    if (id) ids.emplace(std::pair{identity.gpu_index, identity.uuid}, *id);
    return id;
  };
  for (const GpuSample& sample : gpus) {
    const int64_t t = ToUnixMillis(sample.time);
    auto gpu_id = id_of(sample, t);
    if (!gpu_id) return gpu_id.error();
    auto insert = db_->Prepared(insert_raw);
    if (!insert) return insert.error();
    (*insert)->Bind(1, t);
    (*insert)->Bind(2, *gpu_id);
    for (size_t slot = 0; slot < kMetricCount; ++slot) (*insert)->Bind(static_cast<int>(slot) + 3, sample.values[slot]);
    if (Status status = (*insert)->Run(); !status) return status;
  }
  for (const ProcessMemorySample& sample : processes) {
    const int64_t t = ToUnixMillis(sample.time);
    GpuSample identity;
    identity.gpu_index = sample.gpu_index;
    identity.uuid = sample.uuid;
    auto gpu_id = id_of(identity, t);
    if (!gpu_id) return gpu_id.error();
    auto insert = db_->Prepared(
        "INSERT OR REPLACE INTO process_memory (t, gpu_id, pid, name, used_bytes) VALUES (?, ?, ?, ?, ?)");
    if (!insert) return insert.error();
    (*insert)->Bind(1, t);
    (*insert)->Bind(2, *gpu_id);
    (*insert)->Bind(3, int64_t{sample.pid});
    (*insert)->Bind(4, sample.name);
    if (sample.used_bytes) (*insert)->Bind(5, static_cast<int64_t>(*sample.used_bytes));
    if (Status status = (*insert)->Run(); !status) return status;
  }
  return transaction->Commit();
}

Result<std::vector<StoredFinding>> SqliteHistoryStore::OpenIncidentsLocked() const {
  auto select = db_->Prepared("SELECT " + incident_columns_ + " FROM findings WHERE state = 'open' ORDER BY id");
  if (!select) return select.error();
  std::vector<StoredFinding> incidents;
  for (;;) {
    auto row = (*select)->Step();
    if (!row) return row.error();
    if (!*row) break;
    incidents.push_back(ReadIncident(**select));
  }
  return incidents;
}

Result<std::vector<StoredFinding>> SqliteHistoryStore::OpenIncidents() const {
  std::lock_guard lock(mutex_);
  return OpenIncidentsLocked();
}

Result<int64_t> SqliteHistoryStore::LastIncidentId() const {
  std::lock_guard lock(mutex_);
  // AUTOINCREMENT remembers ids of pruned incidents too, so none is reused.
  auto last = db_->QueryInt(
      "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'findings'), 0), "
      "coalesce((SELECT max(id) FROM findings), 0))");
  if (!last) return last.error();
  return last->value_or(0);
}

Status SqliteHistoryStore::RecordIncidents(std::span<const StoredFinding> incidents) {
  std::lock_guard lock(mutex_);
  FullSyncScope durable(*db_);
  if (!durable.status()) return durable.status();
  auto transaction = SqliteTransaction::Begin(*db_);
  if (!transaction) return transaction.error();
  for (const StoredFinding& incident : incidents) {
    auto upsert = db_->Prepared(
        "INSERT INTO findings (has_gpu, gpu_index, gpu_uuid, gpu_pci_bus_id, gpu_serial, severity, summary, "
        "evidence, cause, actions, subject, part_of, newest_event_at, id, incident_key, rule_id, opened_at, "
        "last_seen, resolved_at, state) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20) "
        "ON CONFLICT (id) DO UPDATE SET has_gpu = ?1, gpu_index = ?2, gpu_uuid = ?3, gpu_pci_bus_id = ?4, "
        "gpu_serial = ?5, severity = ?6, summary = ?7, evidence = ?8, cause = ?9, actions = ?10, subject = ?11, "
        "part_of = ?12, newest_event_at = ?13, incident_key = ?15, rule_id = ?16, opened_at = ?17, last_seen = ?18, "
        "resolved_at = ?19, state = ?20");
    if (!upsert) return upsert.error();
    BindFinding(**upsert, 1, incident.finding);
    (*upsert)->Bind(14, incident.incident_id);
    (*upsert)->Bind(15, incident.key);
    (*upsert)->Bind(16, incident.finding.id);
    (*upsert)->Bind(17, ToUnixMillis(incident.opened_at));
    (*upsert)->Bind(18, ToUnixMillis(incident.last_seen));
    BindTime(**upsert, 19, incident.resolved_at);
    (*upsert)->Bind(20, std::string_view(incident.open() ? "open" : "resolved"));
    if (Status status = (*upsert)->Run(); !status) return status;
  }
  return transaction->Commit();
}

Status SqliteHistoryStore::AppendEvents(const RecentEvents& events, WallTime received_at) {
  std::lock_guard lock(mutex_);
  auto transaction = SqliteTransaction::Begin(*db_);
  if (!transaction) return transaction.error();
  const int64_t t = ToUnixMillis(received_at);
  auto insert_one = [&](std::string_view source, const std::string& body) -> Status {
    auto insert = db_->Prepared("INSERT INTO events (t, source, body) VALUES (?, ?, ?)");
    if (!insert) return insert.error();
    (*insert)->Bind(1, t);
    (*insert)->Bind(2, source);
    (*insert)->Bind(3, body);
    return (*insert)->Run();
  };
  for (const XidEvent& xid : events.nvml_xids) {
    if (Status status = insert_one("nvml", NvmlXidToRecord(xid)); !status) return status;
  }
  for (const LogEvent& event : events.log) {
    if (Status status = insert_one("log", LogEventToRecord(event)); !status) return status;
  }
  return transaction->Commit();
}

Result<RecentEvents> SqliteHistoryStore::QueryEvents(WallTime from, WallTime until) const {
  std::lock_guard lock(mutex_);
  RecentEvents events;
  if (schema_version_ < 3) return events;
  auto select = db_->Prepared("SELECT source, body FROM events WHERE t >= ? AND t < ? ORDER BY t, rowid");
  if (!select) return select.error();
  (*select)->Bind(1, ToUnixMillis(from));
  (*select)->Bind(2, ToUnixMillis(until));
  for (;;) {
    auto row = (*select)->Step();
    if (!row) return row.error();
    if (!*row) break;
    const std::string source = (*select)->Text(0);
    // A record this gpudoctor cannot read is skipped: events are evidence, not state.
    if (source == "nvml") {
      if (auto xid = NvmlXidFromRecord((*select)->Text(1))) events.nvml_xids.push_back(*xid);
    } else if (source == "log") {
      if (auto event = LogEventFromRecord((*select)->Text(1))) events.log.push_back(std::move(*event));
    }
  }
  return events;
}

Result<bool> SqliteHistoryStore::RecordBoot(const BootRecord& boot, WallTime now) {
  std::lock_guard lock(mutex_);
  auto insert = db_->Prepared(
      "INSERT INTO boots (boot_id, booted_at, recorded_at) VALUES (?, ?, ?) ON CONFLICT (boot_id) DO NOTHING");
  if (!insert) return insert.error();
  (*insert)->Bind(1, boot.boot_id);
  (*insert)->Bind(2, ToUnixMillis(boot.booted_at));
  (*insert)->Bind(3, ToUnixMillis(now));
  if (Status status = (*insert)->Run(); !status) return status.error();
  return db_->Changes() > 0;
}

Result<std::vector<BootRecord>> SqliteHistoryStore::QueryBoots(WallTime from, WallTime until) const {
  std::lock_guard lock(mutex_);
  std::vector<BootRecord> boots;
  if (schema_version_ < 4) return boots;
  auto select = db_->Prepared("SELECT boot_id, booted_at FROM boots WHERE booted_at >= ? AND booted_at < ? "
                              "ORDER BY booted_at, boot_id");
  if (!select) return select.error();
  (*select)->Bind(1, ToUnixMillis(from));
  (*select)->Bind(2, ToUnixMillis(until));
  for (;;) {
    auto row = (*select)->Step();
    if (!row) return row.error();
    if (!*row) return boots;
    boots.push_back({(*select)->Text(0), FromUnixMillis((*select)->Int(1))});
  }
}

Result<int64_t> SqliteHistoryStore::RecordRemediation(const Remediation& remediation) {
  std::lock_guard lock(mutex_);
  FullSyncScope durable(*db_);
  if (!durable.status()) return durable.status().error();
  auto transaction = SqliteTransaction::Begin(*db_);
  if (!transaction) return transaction.error();
  int64_t id = 0;
  {
    auto insert = db_->Prepared(
        "INSERT INTO remediations (has_gpu, gpu_index, gpu_uuid, gpu_pci_bus_id, gpu_serial, kind, at, incident_id, "
        "incident_key, severity, gpu_reset, actor, note) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) RETURNING id");
    if (!insert) return insert.error();
    BindGpu(**insert, 1, remediation.gpu);
    (*insert)->Bind(6, std::string_view(RemediationKindName(remediation.kind)));
    (*insert)->Bind(7, ToUnixMillis(remediation.at));
    (*insert)->Bind(8, remediation.incident_id);
    (*insert)->Bind(9, remediation.incident_key);
    (*insert)->Bind(10, std::string_view(SeverityName(remediation.severity)));
    (*insert)->Bind(11, int64_t{remediation.gpu_reset});
    (*insert)->Bind(12, remediation.actor);
    (*insert)->Bind(13, remediation.note);
    auto row = (*insert)->Step();
    if (!row) return row.error();
    id = (*insert)->Int(0);
  }  // the statement is reset here, so the transaction can commit
  if (Status status = transaction->Commit(); !status) return status.error();
  return id;
}

Result<std::vector<Remediation>> SqliteHistoryStore::QueryRemediations(const RemediationQuery& query) const {
  std::lock_guard lock(mutex_);
  std::vector<Remediation> remediations;
  if (schema_version_ < 4) return remediations;
  auto select = db_->Prepared(std::string("SELECT ") + kRemediationColumns +
                              " FROM remediations WHERE at >= ? AND at < ? AND id > ? ORDER BY at, id");
  if (!select) return select.error();
  (*select)->Bind(1, ToUnixMillis(query.from));
  (*select)->Bind(2, ToUnixMillis(query.until));
  (*select)->Bind(3, query.after_id);
  for (;;) {
    auto row = (*select)->Step();
    if (!row) return row.error();
    if (!*row) return remediations;
    remediations.push_back(ReadRemediation(**select));
  }
}

Status SqliteHistoryStore::RecordMaintenance(const MaintenanceDone& done, WallTime recorded_at) {
  std::lock_guard lock(mutex_);
  auto insert =
      db_->Prepared("INSERT INTO maintenance_done (task, done_at, note, recorded_at) VALUES (?, ?, ?, ?)");
  if (!insert) return insert.error();
  (*insert)->Bind(1, done.task);
  (*insert)->Bind(2, ToUnixMillis(done.done_at));
  (*insert)->Bind(3, done.note);
  (*insert)->Bind(4, ToUnixMillis(recorded_at));
  return (*insert)->Run();
}

Result<std::vector<MaintenanceDone>> SqliteHistoryStore::QueryMaintenance() const {
  std::lock_guard lock(mutex_);
  std::vector<MaintenanceDone> records;
  if (schema_version_ < 5) return records;
  auto select = db_->Prepared("SELECT task, done_at, note FROM maintenance_done ORDER BY done_at, id");
  if (!select) return select.error();
  for (;;) {
    auto row = (*select)->Step();
    if (!row) return row.error();
    if (!*row) return records;
    records.push_back({(*select)->Text(0), FromUnixMillis((*select)->Int(1)), (*select)->Text(2)});
  }
}

Result<bool> SqliteHistoryStore::LearnGpuCount(uint32_t count, WallTime at) {
  std::lock_guard lock(mutex_);
  auto insert = db_->Prepared(
      "INSERT INTO host_facts (name, value, learned_at) VALUES ('gpu_count', ?, ?) ON CONFLICT (name) DO NOTHING");
  if (!insert) return insert.error();
  (*insert)->Bind(1, std::to_string(count));
  (*insert)->Bind(2, ToUnixMillis(at));
  if (Status status = (*insert)->Run(); !status) return status.error();
  return db_->Changes() > 0;
}

Result<std::optional<LearnedGpuCount>> SqliteHistoryStore::QueryLearnedGpuCount() const {
  std::lock_guard lock(mutex_);
  if (schema_version_ < 5) return std::optional<LearnedGpuCount>();
  auto select = db_->Prepared("SELECT value, learned_at FROM host_facts WHERE name = 'gpu_count'");
  if (!select) return select.error();
  auto row = (*select)->Step();
  if (!row) return row.error();
  std::optional<uint32_t> count = *row ? ParseInt<uint32_t>((*select)->Text(0)) : std::nullopt;
  if (!count) return std::optional<LearnedGpuCount>();
  return std::optional<LearnedGpuCount>(LearnedGpuCount{*count, FromUnixMillis((*select)->Int(1))});
}

Status SqliteHistoryStore::RecordDiagnostic(const DiagnosticRecord& record) {
  std::lock_guard lock(mutex_);
  // A diagnostic takes minutes of a GPU's time and its process exits right
  // after: the record must survive a crash that follows.
  FullSyncScope durable(*db_);
  if (!durable.status()) return durable.status();
  auto insert = db_->Prepared(
      "INSERT INTO diagnostics (finished_at, gpu_index, gpu_uuid, gpu_pci_bus_id, test, state, summary, command) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  if (!insert) return insert.error();
  (*insert)->Bind(1, ToUnixMillis(record.finished_at));
  (*insert)->Bind(2, int64_t{record.gpu_index});
  (*insert)->Bind(3, record.uuid);
  (*insert)->Bind(4, record.pci_bus_id);
  (*insert)->Bind(5, record.test);
  (*insert)->Bind(6, record.state);
  (*insert)->Bind(7, record.summary);
  (*insert)->Bind(8, record.command);
  return (*insert)->Run();
}

Result<std::vector<DiagnosticRecord>> SqliteHistoryStore::LatestDiagnostics() const {
  std::lock_guard lock(mutex_);
  std::vector<DiagnosticRecord> records;
  if (schema_version_ < 6) return records;
  auto select = db_->Prepared(
      "SELECT finished_at, gpu_index, gpu_uuid, gpu_pci_bus_id, test, state, summary, command FROM ("
      "  SELECT *, row_number() OVER (PARTITION BY CASE WHEN gpu_uuid <> '' THEN gpu_uuid ELSE gpu_index END, test "
      "                               ORDER BY finished_at DESC, id DESC) AS newness"
      "  FROM diagnostics) WHERE newness = 1 ORDER BY gpu_index, gpu_uuid, test");
  if (!select) return select.error();
  for (;;) {
    auto row = (*select)->Step();
    if (!row) return row.error();
    if (!*row) return records;
    records.push_back({.finished_at = FromUnixMillis((*select)->Int(0)),
                       .gpu_index = static_cast<uint32_t>((*select)->Int(1)),
                       .uuid = (*select)->Text(2),
                       .pci_bus_id = (*select)->Text(3),
                       .test = (*select)->Text(4),
                       .state = (*select)->Text(5),
                       .summary = (*select)->Text(6),
                       .command = (*select)->Text(7)});
  }
}

Result<std::optional<int64_t>> SqliteHistoryStore::DoneUntil(Resolution resolution) const {
  auto select = db_->Prepared("SELECT done_until FROM downsample_progress WHERE resolution = ?");
  if (!select) return select.error();
  (*select)->Bind(1, std::string_view(ResolutionName(resolution)));
  auto row = (*select)->Step();
  if (!row) return row.error();
  if (!*row) return std::optional<int64_t>();
  return std::optional<int64_t>((*select)->Int(0));
}

Result<int64_t> SqliteHistoryStore::Downsample(Resolution resolution, WallTime now, bool& more_work) {
  auto done = DoneUntil(resolution);
  if (!done) return done.error();
  std::optional<int64_t> next_raw;
  {
    auto select = db_->Prepared("SELECT min(t) FROM samples_raw WHERE t >= ?");
    if (!select) return select.error();
    (*select)->Bind(1, done->value_or(INT64_MIN));
    auto row = (*select)->Step();
    if (!row) return row.error();
    next_raw = (*select)->OptionalInt(0);
  }
  auto step = NextDownsampleStep(resolution, *done, next_raw, now);
  if (!step) return 0;

  auto insert = db_->Prepared(AggregateInsertSql(resolution));
  if (!insert) return insert.error();
  (*insert)->Bind(1, step->from_ms);
  (*insert)->Bind(2, step->until_ms);
  if (Status status = (*insert)->Run(); !status) return status.error();
  const int64_t written = db_->Changes();

  auto progress = db_->Prepared(
      "INSERT INTO downsample_progress (resolution, done_until) VALUES (?1, ?2) "
      "ON CONFLICT (resolution) DO UPDATE SET done_until = excluded.done_until");
  if (!progress) return progress.error();
  (*progress)->Bind(1, std::string_view(ResolutionName(resolution)));
  (*progress)->Bind(2, step->until_ms);
  if (Status status = (*progress)->Run(); !status) return status.error();
  more_work = more_work || step->more_after;
  return written;
}

Result<int64_t> SqliteHistoryStore::Prune(WallTime now) {
  auto minute_done = DoneUntil(Resolution::kMinute);
  if (!minute_done) return minute_done.error();
  auto hour_done = DoneUntil(Resolution::kHour);
  if (!hour_done) return hour_done.error();
  const RetentionPolicy& retention = options_.retention;
  const std::pair<const char*, int64_t> deletions[] = {
      {"DELETE FROM samples_raw WHERE t < ?", RawPruneCutoffMs(retention, now, *minute_done, *hour_done)},
      {"DELETE FROM process_memory WHERE t < ?", ToUnixMillis(now - retention.raw)},
      {"DELETE FROM samples_1m WHERE t < ?", ToUnixMillis(now - retention.minute)},
      {"DELETE FROM samples_1h WHERE t < ?", ToUnixMillis(now - retention.hour)},
      {"DELETE FROM findings WHERE state = 'resolved' AND resolved_at < ?",
       ToUnixMillis(now - retention.resolved_findings)},
      {"DELETE FROM events WHERE t < ?", ToUnixMillis(now - retention.raw)},
      {"DELETE FROM boots WHERE booted_at < ?", ToUnixMillis(now - retention.resolved_findings)},
      {"DELETE FROM remediations WHERE at < ?", ToUnixMillis(now - retention.resolved_findings)},
      {"DELETE FROM diagnostics WHERE finished_at < ?", ToUnixMillis(now - retention.resolved_findings)},
  };
  int64_t pruned = 0;
  for (const auto& [sql, cutoff] : deletions) {
    auto statement = db_->Prepared(sql);
    if (!statement) return statement.error();
    (*statement)->Bind(1, cutoff);
    if (Status status = (*statement)->Run(); !status) return status.error();
    pruned += db_->Changes();
  }
  return pruned;
}

Result<uint64_t> SqliteHistoryStore::UsedBytes() const {
  std::lock_guard lock(mutex_);
  return UsedBytesLocked();
}

Result<uint64_t> SqliteHistoryStore::UsedBytesLocked() const {
  auto pages = db_->QueryInt("PRAGMA page_count");
  auto free_pages = db_->QueryInt("PRAGMA freelist_count");
  auto page_size = db_->QueryInt("PRAGMA page_size");
  if (!pages) return pages.error();
  if (!free_pages) return free_pages.error();
  if (!page_size) return page_size.error();
  return static_cast<uint64_t>((pages->value_or(0) - free_pages->value_or(0)) * page_size->value_or(0));
}

// Over the size limit, the oldest data goes first, finest resolution first,
// down to a floor per table (1 day raw, 7 days 1-minute, 1 day 1-hour).
Result<int64_t> SqliteHistoryStore::EnforceSizeLimit() {
  struct Table {
    const char* name;
    int64_t keep_ms;
  };
  static constexpr Table kTables[] = {
      {"samples_raw", kMillisPerDay}, {"samples_1m", 7 * kMillisPerDay}, {"samples_1h", kMillisPerDay}};
  int64_t pruned = 0;
  for (const Table& table : kTables) {
    for (int round = 0; round < 64; ++round) {
      auto used = UsedBytesLocked();
      if (!used) return used.error();
      if (*used <= options_.retention.max_bytes) return pruned;
      auto oldest = db_->QueryInt(std::string("SELECT min(t) FROM ") + table.name);
      auto newest = db_->QueryInt(std::string("SELECT max(t) FROM ") + table.name);
      if (!oldest) return oldest.error();
      if (!newest) return newest.error();
      if (!oldest->has_value() || **newest - **oldest <= table.keep_ms) break;
      // An eighth of what is there at a time, at least an hour, never into the floor.
      const int64_t chunk = std::max<int64_t>((**newest - **oldest) / 8, kMillisPerHour);
      const int64_t cutoff = std::min(**oldest + chunk, **newest - table.keep_ms);
      auto erase_before = [&](const std::string& name) -> Status {
        auto erase = db_->Prepared("DELETE FROM " + name + " WHERE t < ?");
        if (!erase) return erase.error();
        (*erase)->Bind(1, cutoff);
        if (Status status = (*erase)->Run(); !status) return status;
        pruned += db_->Changes();
        return Status::Ok();
      };
      if (Status status = erase_before(table.name); !status) return status.error();
      // Process samples are as fine as raw ones and go with them.
      if (&table == &kTables[0]) {
        if (Status status = erase_before("process_memory"); !status) return status.error();
      }
    }
  }
  return pruned;
}

// Hands free pages back to the file system once they are a quarter of the
// file; smaller free lists are simply reused by the next inserts.
Status SqliteHistoryStore::ReleaseFreePages() {
  auto pages = db_->QueryInt("PRAGMA page_count");
  auto free_pages = db_->QueryInt("PRAGMA freelist_count");
  if (!pages) return pages.error();
  if (!free_pages) return free_pages.error();
  if (free_pages->value_or(0) * 4 <= pages->value_or(0)) return Status::Ok();
  return db_->Execute("PRAGMA incremental_vacuum");
}

Result<MaintenanceReport> SqliteHistoryStore::Maintain(WallTime now) {
  std::lock_guard lock(mutex_);
  MaintenanceReport report;
  {
    auto transaction = SqliteTransaction::Begin(*db_);
    if (!transaction) return transaction.error();
    for (Resolution resolution : {Resolution::kMinute, Resolution::kHour}) {
      auto written = Downsample(resolution, now, report.more_work);
      if (!written) return written.error();
      report.buckets_written += *written;
    }
    auto pruned = Prune(now);
    if (!pruned) return pruned.error();
    report.rows_pruned = *pruned;
    // Trimming waits until the buckets have caught up, so that it never drops
    // raw samples before they are folded into 1-minute and 1-hour buckets.
    if (!report.more_work) {
      auto trimmed = EnforceSizeLimit();
      if (!trimmed) return trimmed.error();
      report.rows_pruned += *trimmed;
    }
    if (Status status = transaction->Commit(); !status) return status.error();
  }
  if (Status status = ReleaseFreePages(); !status) return status.error();
  return report;
}

Result<std::optional<WallTime>> SqliteHistoryStore::NewestSampleTime() const {
  std::lock_guard lock(mutex_);
  // Each GPU's row keeps the time of its newest sample, pruning or not.
  auto newest = db_->QueryInt("SELECT max(last_seen) FROM gpus");
  if (!newest) return newest.error();
  if (!newest->has_value()) return std::optional<WallTime>();
  return std::optional<WallTime>(FromUnixMillis(**newest));
}

Result<std::vector<GpuIdentity>> SqliteHistoryStore::ListGpus() const {
  std::lock_guard lock(mutex_);
  // A history read as it is, from before version 7, names GPUs by index and uuid alone.
  auto select = db_->Prepared(schema_version_ >= 7
                                  ? "SELECT gpu_index, uuid, serial, pci_bus_id, name, last_seen FROM gpus "
                                    "ORDER BY gpu_index, uuid"
                                  : "SELECT gpu_index, uuid, '', '', '', last_seen FROM gpus ORDER BY gpu_index, uuid");
  if (!select) return select.error();
  std::vector<GpuIdentity> gpus;
  for (;;) {
    auto row = (*select)->Step();
    if (!row) return row.error();
    if (!*row) return gpus;
    gpus.push_back({.index = static_cast<uint32_t>((*select)->Int(0)),
                    .uuid = (*select)->Text(1),
                    .serial = (*select)->Text(2),
                    .pci_bus_id = (*select)->Text(3),
                    .name = (*select)->Text(4),
                    .last_seen = FromUnixMillis((*select)->Int(5))});
  }
}

// The most recently seen GPU that `selector` names (an index may have been
// reused by another board).
Result<std::optional<GpuIdentity>> SqliteHistoryStore::FindGpu(std::string_view selector, int64_t* id) const {
  auto select = db_->Prepared("SELECT id, gpu_index, uuid FROM gpus ORDER BY last_seen DESC, id DESC");
  if (!select) return select.error();
  for (;;) {
    auto row = (*select)->Step();
    if (!row) return row.error();
    if (!*row) return std::optional<GpuIdentity>();
    GpuIdentity gpu{static_cast<uint32_t>((*select)->Int(1)), (*select)->Text(2)};
    if (MatchesGpu(gpu, selector)) {
      *id = (*select)->Int(0);
      return std::optional<GpuIdentity>(gpu);
    }
  }
}

Result<Series> SqliteHistoryStore::QuerySeries(const SeriesQuery& query) const {
  std::lock_guard lock(mutex_);
  int64_t gpu_id = 0;
  auto gpu = FindGpu(query.gpu, &gpu_id);
  if (!gpu) return gpu.error();
  if (!*gpu) return Error{"no GPU '" + query.gpu + "' in the history"};
  Series series;
  series.gpu = **gpu;
  series.metric = query.metric;
  if (query.resolution) {
    series.resolution = *query.resolution;
  } else {
    auto newest = db_->QueryInt("SELECT max(t) FROM samples_raw");
    if (!newest) return newest.error();
    const WallTime newest_time = newest->has_value() ? FromUnixMillis(**newest) : query.until;
    series.resolution = ChooseResolution(query.from, query.until, newest_time, options_.retention);
  }

  const std::string name(MetricName(query.metric));
  const std::string sql =
      series.resolution == Resolution::kRaw
          ? "SELECT t, " + name + ", " + name + ", " + name + " FROM samples_raw"
          : "SELECT t, " + name + "_min, " + name + "_avg, " + name + "_max FROM " + AggregateTable(series.resolution);
  auto select = db_->Prepared(sql + " WHERE t >= ?1 AND t < ?2 AND gpu_id = ?3 AND " + name +
                              (series.resolution == Resolution::kRaw ? "" : "_avg") + " IS NOT NULL ORDER BY t");
  if (!select) return select.error();
  (*select)->Bind(1, ToUnixMillis(query.from));
  (*select)->Bind(2, ToUnixMillis(query.until));
  (*select)->Bind(3, gpu_id);
  for (;;) {
    auto row = (*select)->Step();
    if (!row) return row.error();
    if (!*row) return series;
    series.points.push_back({FromUnixMillis((*select)->Int(0)), (*select)->Double(1), (*select)->Double(2),
                             (*select)->Double(3)});
  }
}

Result<std::vector<ProcessMemorySample>> SqliteHistoryStore::QueryProcessMemory(std::string_view gpu, WallTime from,
                                                                                WallTime until) const {
  std::lock_guard lock(mutex_);
  int64_t gpu_id = 0;
  auto identity = FindGpu(gpu, &gpu_id);
  if (!identity) return identity.error();
  if (!*identity) return Error{"no GPU '" + std::string(gpu) + "' in the history"};
  auto select = db_->Prepared(
      "SELECT t, pid, name, used_bytes FROM process_memory WHERE t >= ?1 AND t < ?2 AND gpu_id = ?3 ORDER BY t, pid");
  if (!select) return select.error();
  (*select)->Bind(1, ToUnixMillis(from));
  (*select)->Bind(2, ToUnixMillis(until));
  (*select)->Bind(3, gpu_id);
  std::vector<ProcessMemorySample> rows;
  for (;;) {
    auto row = (*select)->Step();
    if (!row) return row.error();
    if (!*row) return rows;
    ProcessMemorySample& sample = rows.emplace_back();
    sample.time = FromUnixMillis((*select)->Int(0));
    sample.gpu_index = (*identity)->index;
    sample.uuid = (*identity)->uuid;
    sample.pid = static_cast<uint32_t>((*select)->Int(1));
    sample.name = (*select)->Text(2);
    if (auto used = (*select)->OptionalInt(3)) sample.used_bytes = static_cast<uint64_t>(*used);
  }
}

Result<std::vector<StoredFinding>> SqliteHistoryStore::QueryFindings(const FindingQuery& query) const {
  std::lock_guard lock(mutex_);
  auto select = db_->Prepared("SELECT " + incident_columns_ +
                              " FROM findings WHERE opened_at < ?1 AND (resolved_at IS NULL OR resolved_at >= ?2) "
                              "ORDER BY id DESC");
  if (!select) return select.error();
  (*select)->Bind(1, ToUnixMillis(query.until));
  (*select)->Bind(2, ToUnixMillis(query.from));
  std::vector<StoredFinding> rows;
  for (;;) {
    auto row = (*select)->Step();
    if (!row) return row.error();
    if (!*row) return rows;
    StoredFinding incident = ReadIncident(**select);
    if (query.open_only && !incident.open()) continue;
    if (!query.gpu.empty()) {
      const std::optional<GpuRef>& ref = incident.finding.gpu;
      if (!ref || !MatchesGpu({ref->index.value_or(UINT32_MAX), ref->uuid}, query.gpu)) continue;
    }
    rows.push_back(std::move(incident));
  }
}

Result<std::string> SqliteHistoryStore::IntegrityCheck() const {
  std::lock_guard lock(mutex_);
  auto select = db_->Prepared("PRAGMA integrity_check");
  if (!select) return select.error();
  std::string report;
  for (;;) {
    auto row = (*select)->Step();
    if (!row) return row.error();
    if (!*row) return report;
    if (!report.empty()) report += "\n";
    report += (*select)->Text(0);
  }
}

}  // namespace gpudoctor
