// FaultyVfs: SQLite's own file system layer with writes that fail on demand,
// as on a full disk, a failing device or a file system remounted read-only.
// For tests of the store and of the code that keeps going when it fails: they
// see SQLite's real error codes and messages ("database or disk is full").
//
//   FaultyVfs vfs;                         // the default VFS while it lives
//   auto store = SqliteHistoryStore::Open(path, {});
//   vfs.FailWrites(SQLITE_FULL);           // every write, truncate and sync fails
//   ... store->Append(...) fails ...
//   vfs.Heal();                            // the disk has room again
//
// Connections opened while it lives must be closed before it is destroyed.
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <cstdint>

namespace gpudoctor::testing {

class FaultyVfs {
 public:
  FaultyVfs();
  ~FaultyVfs();
  FaultyVfs(const FaultyVfs&) = delete;
  FaultyVfs& operator=(const FaultyVfs&) = delete;

  // From now on every write, truncate and sync returns `sqlite_code`
  // (SQLITE_FULL, SQLITE_IOERR_WRITE, SQLITE_READONLY, ...).
  void FailWrites(int sqlite_code) { failure_ = sqlite_code; }
  void Heal() { failure_ = SQLITE_OK; }
  // Writes refused since construction.
  uint64_t refused_writes() const { return refused_; }

  int failure() const { return failure_; }
  void CountRefusal() { ++refused_; }
  sqlite3_vfs* real() const { return real_; }

 private:
  sqlite3_vfs vfs_{};
  sqlite3_vfs* real_ = nullptr;  // the default VFS it wraps, made default again at the end
  std::atomic<int> failure_{SQLITE_OK};
  std::atomic<uint64_t> refused_{0};
};

}  // namespace gpudoctor::testing
