#include "store/sqlite_connection.h"

#include <cassert>
#include <cmath>
#include <utility>

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

Result<std::unique_ptr<SqliteConnection>> SqliteConnection::Open(const std::string& path, int flags) {
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
