// The SQLite store when the disk under it fails: every call reports SQLite's
// error, nothing half-written is visible, and it works again once the fault
// is gone, without being reopened.
#include <gtest/gtest.h>

#include "store/sqlite_store.h"
#include "store/test_support.h"
#include "store/testing/faulty_vfs.h"

namespace gpudoctor {
namespace {

using namespace std::chrono_literals;
using testing::MakeFinding;
using testing::Sample;
using testing::T0;

struct Fault {
  int code;
  const char* message;  // what SQLite says
};

class SqliteStoreFault : public ::testing::TestWithParam<Fault> {
 protected:
  testing::ScratchDir dir_;
  testing::FaultyVfs vfs_;
};

TEST_P(SqliteStoreFault, EveryWriteFailsWithSqlitesReasonAndWorksAgainOnceHealed) {
  auto opened = SqliteHistoryStore::Open(dir_.File("history.db"), {}, T0());
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  SqliteHistoryStore& store = **opened;
  ASSERT_TRUE(store.Append(std::vector{Sample(T0(), 0, 50, 1)}, {}).ok());

  vfs_.FailWrites(GetParam().code);
  for (int attempt = 0; attempt < 3; ++attempt) {
    const WallTime t = T0() + (attempt + 1) * 5s;
    Status appended = store.Append(std::vector{Sample(t, 0, 60, 1)}, {});
    ASSERT_FALSE(appended.ok());
    EXPECT_NE(appended.error().message.find(GetParam().message), std::string::npos) << appended.error().message;
    auto upserted = store.UpsertFindings(std::vector{MakeFinding("temperature_high", 0)}, t);
    ASSERT_FALSE(upserted.ok());
    EXPECT_NE(upserted.error().message.find(GetParam().message), std::string::npos) << upserted.error().message;
    EXPECT_FALSE(store.AppendEvents({.nvml_xids = {{0, 48, t}}}, t).ok());
  }
  EXPECT_GT(vfs_.refused_writes(), 0u);
  // Reads still answer, and show nothing of the failed writes.
  auto series = store.QuerySeries({.gpu = "0", .metric = Metric::kTemperatureC, .from = T0(), .until = T0() + 1h});
  ASSERT_TRUE(series.ok()) << series.error().message;
  EXPECT_EQ(series->points.size(), 1u);
  auto open = store.OpenIncidents();
  ASSERT_TRUE(open.ok()) << open.error().message;
  EXPECT_TRUE(open->empty());

  vfs_.Heal();
  ASSERT_TRUE(store.Append(std::vector{Sample(T0() + 20s, 0, 70, 1)}, {}).ok());
  auto upserted = store.UpsertFindings(std::vector{MakeFinding("temperature_high", 0)}, T0() + 20s);
  ASSERT_TRUE(upserted.ok()) << upserted.error().message;
  EXPECT_EQ(upserted->size(), 1u);
  ASSERT_TRUE(store.Maintain(T0() + 2h).ok());
  auto integrity = store.IntegrityCheck();
  ASSERT_TRUE(integrity.ok());
  EXPECT_EQ(*integrity, "ok");
}

INSTANTIATE_TEST_SUITE_P(Faults, SqliteStoreFault,
                         ::testing::Values(Fault{SQLITE_FULL, "database or disk is full"},
                                           Fault{SQLITE_IOERR_WRITE, "disk I/O error"},
                                           Fault{SQLITE_READONLY, "readonly"}),
                         [](const ::testing::TestParamInfo<Fault>& info) {
                           return info.param.code == SQLITE_FULL         ? std::string("Full")
                                  : info.param.code == SQLITE_IOERR_WRITE ? std::string("IoError")
                                                                          : std::string("ReadOnly");
                         });

}  // namespace
}  // namespace gpudoctor
