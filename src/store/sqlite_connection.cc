#include "store/sqlite_connection.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "common/input_file.h"

namespace gpudoctor {

void SqliteStatement::Bind(int index, int64_t value) {
  [[maybe_unused]] int rc = sqlite3_bind_int64(statement_, index, value);
  assert(rc == SQLITE_OK);
}

void SqliteStatement::Bind(int index, double value) {
  if (std::nearbyint(value) == value && std::fabs(value) < 9e15) {
    Bind(index, static_cast<int64_t>(value));
    return;
  }
  [[maybe_unused]] int rc = sqlite3_bind_double(statement_, index, value);
  assert(rc == SQLITE_OK);
}

void SqliteStatement::Bind(int index, std::string_view value) {
  [[maybe_unused]] int rc =
      sqlite3_bind_text64(statement_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  assert(rc == SQLITE_OK);
}

void SqliteStatement::Bind(int index, std::optional<double> value) {
  if (value) Bind(index, *value);
  else BindNull(index);
}

void SqliteStatement::Bind(int index, std::optional<int64_t> value) {
  if (value) Bind(index, *value);
  else BindNull(index);
}

void SqliteStatement::BindNull(int index) {
  [[maybe_unused]] int rc = sqlite3_bind_null(statement_, index);
  assert(rc == SQLITE_OK);
}

Result<bool> SqliteStatement::Step() {
  int rc = sqlite3_step(statement_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return Error{sqlite3_errmsg(db_)};
}

Status SqliteStatement::Run() {
  for (;;) {
    auto row = Step();
    if (!row) return row.error();
    if (!*row) return Status::Ok();
  }
}

void SqliteStatement::Reset() {
  sqlite3_reset(statement_);
  sqlite3_clear_bindings(statement_);
}

std::string SqliteStatement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(statement_, column);
  if (text == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(sqlite3_column_bytes(statement_, column)));
}

std::optional<double> SqliteStatement::OptionalDouble(int column) const {
  if (IsNull(column)) return std::nullopt;
  return Double(column);
}

std::optional<int64_t> SqliteStatement::OptionalInt(int column) const {
  if (IsNull(column)) return std::nullopt;
  return Int(column);
}

namespace {

// "file:/data/h%3F.db?immutable=1": `path` as an SQLite URI of an immutable file.
std::string ImmutableUri(const std::string& path) {
  std::string uri = "file:";
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char escaped[4];
      std::snprintf(escaped, sizeof escaped, "%%%02X", static_cast<unsigned char>(c));
      uri += escaped;
    } else {
      uri += c;
    }
  }
  return uri + "?immutable=1";
}

// Why nothing can be created in the directory of `path`: "read-only file system", ...
std::string WhyDirectoryIsReadOnly(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string directory = parent.empty() ? "." : parent.string();
  if (::access(directory.c_str(), W_OK) == 0) return "SQLite could not create it in " + directory;
  return "the directory " + directory + " is not writable (" + ErrnoMessage(errno) + ")";
}

// SQLite could not open the file, or create the -shm index beside it: on a
// read-only mount it says "unable to open", in a directory this user may
// not write, "attempt to write a readonly database".
bool CannotOpenOrIndex(int rc) { return (rc & 0xff) == SQLITE_CANTOPEN || (rc & 0xff) == SQLITE_READONLY; }

bool HoldsData(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && info.st_size > 0;
}

}  // namespace

Result<std::unique_ptr<SqliteConnection>> SqliteConnection::Open(const std::string& path, int flags) {
  auto db = OpenAsGiven(path, flags);
  if ((flags & SQLITE_OPEN_READONLY) == 0) return db;
  // Other failures of the first read ("file is not a database") are the caller's to word.
  if (db && !CannotOpenOrIndex((*db)->FirstRead())) return db;
  return OpenOnReadOnlyMedia(path, flags);
}

Result<std::unique_ptr<SqliteConnection>> SqliteConnection::OpenOnReadOnlyMedia(const std::string& path, int flags) {
  if (auto file = InputFile::Open(path); !file) return file.error();  // the file's own reason
  const std::string wal = path + "-wal";
  if (HoldsData(wal)) {
    return Error{path + ": " + wal + " holds changes not yet in the database, which SQLite reads only through a " +
                 path + "-shm index, and " + WhyDirectoryIsReadOnly(path) +
                 "; copy the database with its -wal file to a writable directory to read it"};
  }
  // Nothing can write the file here and no log holds changes: the file is the whole database.
  auto db = OpenAsGiven(ImmutableUri(path), flags | SQLITE_OPEN_URI);
  if (!db) return db.error();
  if (int rc = (*db)->FirstRead(); CannotOpenOrIndex(rc))
    return Error{path + ": " + sqlite3_errstr(rc) + " (" + WhyDirectoryIsReadOnly(path) + ")"};
  return db;
}

int SqliteConnection::FirstRead() {
  return sqlite3_exec(db_, "SELECT count(*) FROM sqlite_schema", nullptr, nullptr, nullptr);
}

Result<std::unique_ptr<SqliteConnection>> SqliteConnection::OpenAsGiven(const std::string& path, int flags) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return Error{path + ": " + message};
  }
  sqlite3_extended_result_codes(db, 1);
  return std::unique_ptr<SqliteConnection>(new SqliteConnection(db));
}

SqliteConnection::~SqliteConnection() {
  statements_.clear();  // statements must be finalized before the connection closes
  sqlite3_close(db_);
}

Status SqliteConnection::Execute(std::string_view sql) {
  char* message = nullptr;
  int rc = sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return Status::Ok();
  std::string text = message ? message : sqlite3_errstr(rc);
  sqlite3_free(message);
  return Error{text};
}

Result<StatementLease> SqliteConnection::Prepared(const std::string& sql) {
  auto it = statements_.find(sql);
  if (it == statements_.end()) {
    sqlite3_stmt* statement = nullptr;
    int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                                &statement, nullptr);
    if (rc != SQLITE_OK) return Error{sqlite3_errmsg(db_)};
    it = statements_.emplace(sql, std::make_unique<SqliteStatement>(db_, statement)).first;
  }
  return StatementLease(it->second.get());
}

Result<std::optional<int64_t>> SqliteConnection::QueryInt(const std::string& sql) {
  auto statement = Prepared(sql);
  if (!statement) return statement.error();
  auto row = (*statement)->Step();
  if (!row) return row.error();
  std::optional<int64_t> value;
  if (*row) value = (*statement)->OptionalInt(0);
  return value;
}

Result<SqliteTransaction> SqliteTransaction::Begin(SqliteConnection& db) {
  if (Status status = db.Execute("BEGIN IMMEDIATE"); !status) return status.error();
  return SqliteTransaction(&db);
}

SqliteTransaction::~SqliteTransaction() {
  if (db_) (void)db_->Execute("ROLLBACK");
}

Status SqliteTransaction::Commit() {
  assert(db_ != nullptr);
  Status status = db_->Execute("COMMIT");
  if (status) db_ = nullptr;
  return status;
}

}  // namespace gpudoctor
