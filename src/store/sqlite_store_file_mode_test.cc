// The history file and its -wal and -shm journals are private to their owner,
// whatever the umask; an existing file keeps the mode it has.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "store/sqlite_store.h"
#include "store/test_support.h"

namespace gpudoctor {
namespace {

using testing::Sample;
using testing::ScratchDir;
using testing::T0;

// Sets the process umask for one scope.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : previous_(umask(mask)) {}
  ~ScopedUmask() { umask(previous_); }

 private:
  mode_t previous_;
};

mode_t PermissionsOf(const std::string& path) {
  struct stat info {};
  EXPECT_EQ(stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
}

// Opens the history at `path` for writing and appends one sample, so the
// journals exist; `check` runs while the store is still open.
template <typename Check>
void WriteOneSample(const std::string& path, Check check) {
  auto store = SqliteHistoryStore::Open(path, {}, T0());
  ASSERT_TRUE(store.ok()) << store.error().message;
  ASSERT_TRUE((*store)->Append(std::vector{Sample(T0(), 0, 55, 99)}, {}).ok());
  check();
}

TEST(SqliteStoreFileModes, ANewHistoryAndItsJournalsAreOwnerOnlyUnderAnyUmask) {
  for (mode_t mask : {mode_t{022}, mode_t{077}, mode_t{0}}) {
    SCOPED_TRACE("umask " + std::to_string(mask));
    ScopedUmask scoped(mask);
    ScratchDir dir;
    const std::string path = dir.File("history.db");
    WriteOneSample(path, [&] {
      for (const char* suffix : {"", "-wal", "-shm"}) EXPECT_EQ(PermissionsOf(path + suffix), 0600u) << suffix;
    });
  }
}

TEST(SqliteStoreFileModes, AnExistingHistoryKeepsItsModeAndGivesItToItsJournals) {
  ScopedUmask scoped(077);
  ScratchDir dir;
  const std::string path = dir.File("history.db");
  WriteOneSample(path, [] {});
  for (const char* suffix : {"-wal", "-shm"}) std::filesystem::remove(path + suffix);
  ASSERT_EQ(chmod(path.c_str(), 0640), 0);
  WriteOneSample(path, [&] {
    for (const char* suffix : {"", "-wal", "-shm"}) EXPECT_EQ(PermissionsOf(path + suffix), 0640u) << suffix;
  });
}

}  // namespace
}  // namespace gpudoctor
