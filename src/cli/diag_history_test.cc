// The diagnostics of `gpudoctor diag` in the agent's history: written only
// into a history that exists, read without touching it.
#include "cli/diag_history.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "store/sqlite_store.h"
#include "store/test_support.h"

namespace gpudoctor {
namespace {

using namespace std::chrono_literals;
using testing::ScratchDir;
using testing::T0;

DiagnosticRecord Record(uint32_t gpu, std::string uuid, std::string test, std::string state, WallTime finished_at) {
  return {.finished_at = finished_at,
          .gpu_index = gpu,
          .uuid = std::move(uuid),
          .pci_bus_id = "00000000:1B:00.0",
          .test = test,
          .state = state,
          .summary = test + " " + state,
          .command = "gpudoctor diag " + test + " --gpu " + std::to_string(gpu)};
}

// What an agent leaves: a history with its schema, nothing diagnosed yet.
void CreateHistory(const std::string& path) {
  auto store = SqliteHistoryStore::Open(path, SqliteStoreOptions{}, T0());
  ASSERT_TRUE(store.ok()) << store.error().message;
}

TEST(RecordDiagnostics, WritesIntoTheAgentsHistory) {
  ScratchDir dir;
  const std::string path = dir.File("history.db");
  CreateHistory(path);
  const std::vector<DiagnosticRecord> records{Record(0, "GPU-a", "memtest", "passed", T0()),
                                              Record(1, "GPU-b", "memtest", "faulty", T0())};
  auto written = RecordDiagnostics(path, records);
  ASSERT_TRUE(written.ok()) << written.error().message;
  EXPECT_TRUE(*written);

  auto latest = LoadLatestDiagnostics(path, SystemClock::Instance().Now());
  ASSERT_TRUE(latest.ok()) << latest.error().message;
  EXPECT_EQ(*latest, records);
}

TEST(RecordDiagnostics, NeverCreatesAHistory) {
  ScratchDir dir;
  const std::string path = dir.File("history.db");
  auto written = RecordDiagnostics(path, std::vector{Record(0, "GPU-a", "memtest", "passed", T0())});
  ASSERT_TRUE(written.ok()) << written.error().message;
  EXPECT_FALSE(*written);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(RecordDiagnostics, AFileThatIsNoHistoryIsAnErrorAndStaysAsItWas) {
  ScratchDir dir;
  const std::string path = dir.File("notes.txt");
  { std::ofstream(path) << "not a database, just notes\n"; }
  auto written = RecordDiagnostics(path, std::vector{Record(0, "GPU-a", "memtest", "passed", T0())});
  ASSERT_FALSE(written.ok());
  EXPECT_NE(written.error().message.find(path), std::string::npos) << written.error().message;
  EXPECT_EQ(std::filesystem::file_size(path), std::string("not a database, just notes\n").size());
}

TEST(LoadLatestDiagnostics, NoHistoryIsNoDiagnostics) {
  ScratchDir dir;
  auto latest = LoadLatestDiagnostics(dir.File("missing.db"), SystemClock::Instance().Now());
  ASSERT_TRUE(latest.ok()) << latest.error().message;
  EXPECT_TRUE(latest->empty());
  EXPECT_FALSE(std::filesystem::exists(dir.File("missing.db")));
  auto none = LoadLatestDiagnostics("", SystemClock::Instance().Now());
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(LoadLatestDiagnostics, ReadsAHistoryItCannotWrite) {
  ScratchDir dir;
  const std::string path = dir.File("history.db");
  CreateHistory(path);
  const DiagnosticRecord record = Record(2, "GPU-c", "burn", "hung", T0());
  ASSERT_TRUE(RecordDiagnostics(path, std::vector{record}).ok());
  ASSERT_EQ(chmod(path.c_str(), 0400), 0);
  auto latest = LoadLatestDiagnostics(path, SystemClock::Instance().Now());
  ASSERT_TRUE(latest.ok()) << latest.error().message;
  EXPECT_EQ(*latest, std::vector{record});
}

TEST(DescribeGpuDiagnostics, OneEntryPerTestFaultsInCapitals) {
  const WallTime now = T0();
  const std::vector<DiagnosticRecord> latest{Record(3, "GPU-d", "burn", "faulty", now - 3h - 20min),
                                             Record(3, "GPU-d", "memtest", "passed", now - 50h),
                                             Record(3, "GPU-e", "memtest", "hung", now),  // another board at index 3
                                             Record(4, "", "pcie", "could_not_run", now - 5min)};
  EXPECT_EQ(DescribeGpuDiagnostics(latest, 3, "GPU-d", now), "burn FAULTY 3 h ago, memtest passed 2 d ago");
  EXPECT_EQ(DescribeGpuDiagnostics(latest, 4, "GPU-f", now), "pcie could not run 5 min ago");
  EXPECT_EQ(DescribeGpuDiagnostics(latest, 5, "GPU-g", now), "");

  GpuSnapshot gpu;
  gpu.index = 3;
  gpu.uuid = Field<std::string>::Value("GPU-e");
  const nlohmann::json json = GpuDiagnosticsToJson(latest, gpu);
  ASSERT_EQ(json.size(), 1u);
  EXPECT_EQ(json[0], (nlohmann::json{{"test", "memtest"},
                                     {"state", "hung"},
                                     {"finished_at", "2023-11-14T22:13:20.000Z"},
                                     {"summary", "memtest hung"},
                                     {"command", "gpudoctor diag memtest --gpu 3"}}));
}

TEST(DescribeAge, InTheLargestWholeUnit) {
  EXPECT_EQ(DescribeAge(T0(), T0() + 30s), "just now");
  EXPECT_EQ(DescribeAge(T0(), T0() + 59min), "59 min ago");
  EXPECT_EQ(DescribeAge(T0(), T0() + 23h + 59min), "23 h ago");
  EXPECT_EQ(DescribeAge(T0(), T0() + 24h * 9 + 5h), "9 d ago");
  EXPECT_EQ(DescribeAge(T0() + 1h, T0()), "just now");  // a clock that stepped back
}

}  // namespace
}  // namespace gpudoctor
