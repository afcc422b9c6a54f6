// A thin RAII layer over the SQLite C API for the store: one connection, its
// prepared statements cached by SQL text, and transactions that roll back
// unless committed. Internal to src/store.
//
//   auto db = SqliteConnection::Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
//   auto insert = db->Prepared("INSERT INTO t(a) VALUES(?)");
//   (*insert)->Bind(1, int64_t{42});
//   Status done = (*insert)->Run();
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/result.h"

namespace gpudoctor {

class SqliteStatement {
 public:
  SqliteStatement(sqlite3* db, sqlite3_stmt* statement) : db_(db), statement_(statement) {}
  ~SqliteStatement() { sqlite3_finalize(statement_); }
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  // Parameters are 1-based, as in SQL. A nullopt binds NULL.
  void Bind(int index, int64_t value);
  void Bind(int index, double value);  // integral values are bound as integers (smaller on disk)
  void Bind(int index, std::string_view value);
  void Bind(int index, std::optional<double> value);
  void Bind(int index, std::optional<int64_t> value);
  void BindNull(int index);

  // true while a row is available; an Error for anything but SQLITE_ROW/DONE.
  Result<bool> Step();
  // Runs to completion, ignoring rows.
  Status Run();
  // Clears bindings and rewinds, ready to run again.
  void Reset();

  bool IsNull(int column) const { return sqlite3_column_type(statement_, column) == SQLITE_NULL; }
  int64_t Int(int column) const { return sqlite3_column_int64(statement_, column); }
  double Double(int column) const { return sqlite3_column_double(statement_, column); }
  std::string Text(int column) const;
  std::optional<double> OptionalDouble(int column) const;
  std::optional<int64_t> OptionalInt(int column) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* statement_;
};

// A cached statement on loan: reset when the loan ends, so no half-read
// SELECT keeps a read transaction (and the WAL) pinned.
class StatementLease {
 public:
  explicit StatementLease(SqliteStatement* statement) : statement_(statement) {}
  StatementLease(StatementLease&& other) noexcept : statement_(std::exchange(other.statement_, nullptr)) {}
  StatementLease& operator=(StatementLease&&) = delete;
  ~StatementLease() {
    if (statement_) statement_->Reset();
  }
  SqliteStatement* operator->() const { return statement_; }
  SqliteStatement& operator*() const { return *statement_; }

 private:
  SqliteStatement* statement_;
};

class SqliteConnection {
 public:
  // `flags` are sqlite3_open_v2 flags. With SQLITE_OPEN_READONLY an existing
  // database is read on read-only media too: SQLite reads a WAL database
  // through a -shm index it must create when absent, and where it cannot (a
  // read-only directory or mount) while no write-ahead log holds changes,
  // the file alone is the whole database and is opened immutable. When it
  // cannot be read, the error says why: the file's own error, or the log
  // that would need the index.
  static Result<std::unique_ptr<SqliteConnection>> Open(const std::string& path, int flags);
  ~SqliteConnection();
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  // Runs one or more statements that return no rows we need.
  Status Execute(std::string_view sql);
  // A statement prepared once per connection and reset before each use.
  Result<StatementLease> Prepared(const std::string& sql);
  // The first column of the first row, for PRAGMAs and counts; nullopt when NULL or no row.
  Result<std::optional<int64_t>> QueryInt(const std::string& sql);

  // Rows changed by the last INSERT, UPDATE or DELETE.
  int64_t Changes() { return sqlite3_changes64(db_); }
  std::string LastError() const { return sqlite3_errmsg(db_); }
  sqlite3* handle() { return db_; }

 private:
  explicit SqliteConnection(sqlite3* db) : db_(db) {}
  // sqlite3_open_v2 and nothing more.
  static Result<std::unique_ptr<SqliteConnection>> OpenAsGiven(const std::string& path, int flags);
  // SQLite could not open `path` read-only, or the -shm index of its WAL: the
  // file's own error, or an immutable read where nothing can change it.
  static Result<std::unique_ptr<SqliteConnection>> OpenOnReadOnlyMedia(const std::string& path, int flags);
  // The result code of the first read, which opens the file (and the -shm index).
  int FirstRead();

  sqlite3* db_;
  std::map<std::string, std::unique_ptr<SqliteStatement>, std::less<>> statements_;
};

// BEGIN IMMEDIATE now; ROLLBACK on destruction unless Commit() succeeded.
class SqliteTransaction {
 public:
  static Result<SqliteTransaction> Begin(SqliteConnection& db);
  SqliteTransaction(SqliteTransaction&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}
  SqliteTransaction& operator=(SqliteTransaction&&) = delete;
  ~SqliteTransaction();
  Status Commit();

 private:
  explicit SqliteTransaction(SqliteConnection* db) : db_(db) {}
  SqliteConnection* db_;  // null once committed or moved from
};

}  // namespace gpudoctor
