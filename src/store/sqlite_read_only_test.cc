// A history read where nothing can be written beside it: evidence copied to
// a read-only directory or mount. SQLite reads a WAL database through a -shm
// index it cannot create there.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "common/input_test_support.h"
#include "store/sqlite_connection.h"
#include "store/sqlite_store.h"
#include "store/test_support.h"

namespace gpudoctor {
namespace {

using namespace std::chrono_literals;
using testing::Sample;
using testing::T0;

// A history the agent wrote and closed (its WAL checkpointed and removed).
void WriteHistory(const std::string& path) {
  auto store = SqliteHistoryStore::Open(path, {}, T0());
  ASSERT_TRUE(store.ok()) << store.error().message;
  std::vector<GpuSample> samples{Sample(T0(), 0, 50, 90), Sample(T0(), 1, 60, 80)};
  ASSERT_TRUE((*store)->Append(samples, {}).ok());
}

Result<std::unique_ptr<SqliteHistoryStore>> OpenReadOnly(const std::string& path) {
  SqliteStoreOptions options;
  options.read_only = true;
  return SqliteHistoryStore::Open(path, options, T0());
}

// Both GPUs of WriteHistory are there.
void ExpectReadable(const std::string& path) {
  auto store = OpenReadOnly(path);
  ASSERT_TRUE(store.ok()) << store.error().message;
  auto gpus = (*store)->ListGpus();
  ASSERT_TRUE(gpus.ok()) << gpus.error().message;
  EXPECT_EQ(gpus->size(), 2u);
  EXPECT_FALSE(std::filesystem::exists(path + "-shm")) << "nothing is created beside the file";
}

TEST(SqliteReadOnly, ReadsAHistoryInADirectoryItCannotWrite) {
  testing::ScratchDir dir;
  WriteHistory(dir.File("history.db"));
  ASSERT_EQ(::chmod(dir.path().c_str(), 0555), 0);
  // Root writes anywhere: the read then runs as the user nobody.
  ::chmod(dir.File("history.db").c_str(), 0644);
  auto check = [&] {
    auto store = OpenReadOnly(dir.File("history.db"));
    if (!store) {
      std::fprintf(stderr, "%s\n", store.error().message.c_str());
      return 1;
    }
    auto gpus = (*store)->ListGpus();
    return gpus && gpus->size() == 2 && !std::filesystem::exists(dir.File("history.db-shm")) ? 0 : 2;
  };
  EXPECT_EQ(input_testing::PermissionsApply() ? check() : input_testing::ExitStatusAsNobody(check), 0);
  ::chmod(dir.path().c_str(), 0700);
}

TEST(SqliteReadOnly, ReadsAHistoryOnAReadOnlyMount) {
  testing::ScratchDir source;
  WriteHistory(source.File("history.db"));
  input_testing::ReadOnlyMedia media;
  if (!media.Mount()) GTEST_SKIP() << "mounting a tmpfs needs root";
  media.CopyIn(source.File("history.db"));
  ASSERT_TRUE(media.MakeReadOnly());
  ExpectReadable(media.File("history.db"));
}

// A copy taken while the agent ran: its -wal holds the newest changes.
class SqliteReadOnlyWithLog : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!media_.Mount()) GTEST_SKIP() << "mounting a tmpfs needs root";
    auto writer = SqliteHistoryStore::Open(source_.File("history.db"), {}, T0());
    ASSERT_TRUE(writer.ok()) << writer.error().message;
    writer_ = std::move(*writer);
    std::vector<GpuSample> samples{Sample(T0(), 0, 50, 90), Sample(T0(), 1, 60, 80)};
    ASSERT_TRUE(writer_->Append(samples, {}).ok());
    ASSERT_GT(std::filesystem::file_size(source_.File("history.db-wal")), 0u);
  }

  testing::ScratchDir source_;
  input_testing::ReadOnlyMedia media_;
  std::unique_ptr<SqliteHistoryStore> writer_;  // open, so its log is not checkpointed away
};

TEST_F(SqliteReadOnlyWithLog, ReadsItWhenTheIndexWasCopiedToo) {
  for (const char* name : {"history.db", "history.db-wal", "history.db-shm"}) media_.CopyIn(source_.File(name));
  ASSERT_TRUE(media_.MakeReadOnly());
  auto store = OpenReadOnly(media_.File("history.db"));
  ASSERT_TRUE(store.ok()) << store.error().message;
  auto gpus = (*store)->ListGpus();
  ASSERT_TRUE(gpus.ok()) << gpus.error().message;
  EXPECT_EQ(gpus->size(), 2u) << "the changes in the log are read";
}

TEST_F(SqliteReadOnlyWithLog, SaysWhyWhenTheLogCannotBeRead) {
  for (const char* name : {"history.db", "history.db-wal"}) media_.CopyIn(source_.File(name));
  ASSERT_TRUE(media_.MakeReadOnly());
  auto store = OpenReadOnly(media_.File("history.db"));
  ASSERT_FALSE(store.ok()) << "reading without the log would silently lose its changes";
  const std::string& message = store.error().message;
  EXPECT_NE(message.find(media_.File("history.db-wal") + " holds changes not yet in the database"), std::string::npos)
      << message;
  EXPECT_NE(message.find("is not writable (read-only file system)"), std::string::npos) << message;
}

TEST(SqliteReadOnly, AMissingFileSaysSo) {
  testing::ScratchDir dir;
  auto db = SqliteConnection::Open(dir.File("missing.db"), SQLITE_OPEN_READONLY);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.error().message, dir.File("missing.db") + ": no such file");
}

TEST(SqliteReadOnly, ImmutableUrisEscapeThePath) {
  testing::ScratchDir source;
  WriteHistory(source.File("history.db"));
  input_testing::ReadOnlyMedia media;
  if (!media.Mount()) GTEST_SKIP() << "mounting a tmpfs needs root";
  const std::string odd = media.File("odd?name#1%.db");
  std::filesystem::copy_file(source.File("history.db"), odd);
  ASSERT_TRUE(media.MakeReadOnly());
  ExpectReadable(odd);
}

}  // namespace
}  // namespace gpudoctor
