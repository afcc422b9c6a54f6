#include "store/testing/faulty_vfs.h"

#include <cassert>

namespace gpudoctor::testing {
namespace {

// An open file: our header, then the wrapped VFS's own file object.
struct FaultyFile {
  sqlite3_file base;
  sqlite3_file* real;
  FaultyVfs* owner;
};

FaultyFile* Cast(sqlite3_file* file) { return reinterpret_cast<FaultyFile*>(file); }
sqlite3_file* Real(sqlite3_file* file) { return Cast(file)->real; }

// The injected failure, counted, or SQLITE_OK.
int Refusal(sqlite3_file* file) {
  FaultyVfs* owner = Cast(file)->owner;
  const int failure = owner->failure();
  if (failure != SQLITE_OK) owner->CountRefusal();
  return failure;
}

int Close(sqlite3_file* file) {
  int rc = Real(file)->pMethods->xClose(Real(file));
  file->pMethods = nullptr;
  return rc;
}
int Read(sqlite3_file* file, void* buffer, int amount, sqlite3_int64 offset) {
  return Real(file)->pMethods->xRead(Real(file), buffer, amount, offset);
}
int Write(sqlite3_file* file, const void* buffer, int amount, sqlite3_int64 offset) {
  if (int rc = Refusal(file); rc != SQLITE_OK) return rc;
  return Real(file)->pMethods->xWrite(Real(file), buffer, amount, offset);
}
int Truncate(sqlite3_file* file, sqlite3_int64 size) {
  if (int rc = Refusal(file); rc != SQLITE_OK) return rc;
  return Real(file)->pMethods->xTruncate(Real(file), size);
}
int Sync(sqlite3_file* file, int flags) {
  if (int rc = Refusal(file); rc != SQLITE_OK) return rc;
  return Real(file)->pMethods->xSync(Real(file), flags);
}
int FileSize(sqlite3_file* file, sqlite3_int64* size) { return Real(file)->pMethods->xFileSize(Real(file), size); }
int Lock(sqlite3_file* file, int level) { return Real(file)->pMethods->xLock(Real(file), level); }
int Unlock(sqlite3_file* file, int level) { return Real(file)->pMethods->xUnlock(Real(file), level); }
int CheckReservedLock(sqlite3_file* file, int* out) {
  return Real(file)->pMethods->xCheckReservedLock(Real(file), out);
}
int FileControl(sqlite3_file* file, int op, void* arg) {
  return Real(file)->pMethods->xFileControl(Real(file), op, arg);
}
int SectorSize(sqlite3_file* file) { return Real(file)->pMethods->xSectorSize(Real(file)); }
int DeviceCharacteristics(sqlite3_file* file) {
  return Real(file)->pMethods->xDeviceCharacteristics(Real(file));
}
int ShmMap(sqlite3_file* file, int page, int page_size, int extend, void volatile** out) {
  return Real(file)->pMethods->xShmMap(Real(file), page, page_size, extend, out);
}
int ShmLock(sqlite3_file* file, int offset, int n, int flags) {
  return Real(file)->pMethods->xShmLock(Real(file), offset, n, flags);
}
void ShmBarrier(sqlite3_file* file) { Real(file)->pMethods->xShmBarrier(Real(file)); }
int ShmUnmap(sqlite3_file* file, int delete_flag) { return Real(file)->pMethods->xShmUnmap(Real(file), delete_flag); }
int Fetch(sqlite3_file* file, sqlite3_int64 offset, int amount, void** out) {
  return Real(file)->pMethods->xFetch(Real(file), offset, amount, out);
}
int Unfetch(sqlite3_file* file, sqlite3_int64 offset, void* page) {
  return Real(file)->pMethods->xUnfetch(Real(file), offset, page);
}

const sqlite3_io_methods kMethods = {
    3,        Close,   Read,   Write,  Truncate, Sync,  FileSize,   Lock,  Unlock, CheckReservedLock,
    FileControl, SectorSize, DeviceCharacteristics, ShmMap, ShmLock, ShmBarrier, ShmUnmap, Fetch, Unfetch,
};

int Open(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  auto* owner = static_cast<FaultyVfs*>(vfs->pAppData);
  FaultyFile* faulty = Cast(file);
  faulty->owner = owner;
  faulty->real = reinterpret_cast<sqlite3_file*>(faulty + 1);
  faulty->real->pMethods = nullptr;
  const int rc = owner->real()->xOpen(owner->real(), name, faulty->real, flags, out_flags);
  // SQLite closes a file whose pMethods is set, even when the open failed.
  file->pMethods = faulty->real->pMethods != nullptr ? &kMethods : nullptr;
  return rc;
}

}  // namespace

FaultyVfs::FaultyVfs() {
  real_ = sqlite3_vfs_find(nullptr);
  assert(real_ != nullptr && real_->iVersion >= 2);
  vfs_ = *real_;  // path, access, time and randomness calls go straight to it
  vfs_.zName = "gpudoctor-faulty";
  vfs_.szOsFile = static_cast<int>(sizeof(FaultyFile)) + real_->szOsFile;
  vfs_.pAppData = this;
  vfs_.xOpen = Open;
  vfs_.pNext = nullptr;
  sqlite3_vfs_register(&vfs_, /*makeDflt=*/1);
}

FaultyVfs::~FaultyVfs() {
  sqlite3_vfs_unregister(&vfs_);
  sqlite3_vfs_register(real_, /*makeDflt=*/1);
}

}  // namespace gpudoctor::testing
