// The last hour of history that `gpudoctor triage` shows and weighs.
#include "assess/recent_history.h"

#include <gtest/gtest.h>

#include <fstream>

#include "common/input_test_support.h"
#include "store/memory_store.h"
#include "store/sqlite_store.h"
#include "store/test_support.h"

namespace gpudoctor {
namespace {

using namespace std::chrono_literals;
using testing::MakeFinding;
using testing::Sample;
using testing::T0;

// The window under test: [T0, T0 + 1h).
WallTime From() { return T0(); }
WallTime Until() { return T0() + 1h; }

class TriageHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<GpuSample> samples{
        Sample(From() - 5min, 0, 30, 0),  // before the window: not counted
        Sample(From() + 10min, 0, 60, 90), Sample(From() + 20min, 0, 70, 95),
        Sample(From() + 30min, 0, 80, 100), Sample(From() + 40min, 0, 90, 95),
        Sample(From() + 10min, 1, 41, 20), Sample(From() + 40min, 1, 39, 30),
        Sample(From() - 10min, 2, 50, 50),  // a GPU seen only before the window
    };
    samples[5][Metric::kMemoryUsedBytes] = std::nullopt;  // GPU 1 did not report its memory once
    ASSERT_TRUE(store_.Append(samples, {}).ok());

    // Resolved before the window; opened before it and still open; opened and resolved inside it.
    Finding old_one = MakeFinding("pcie_replay", 2), long_one = MakeFinding("memory_leak", 1),
            thermal = MakeFinding("temperature_high", 0, Severity::kCritical);
    ASSERT_TRUE(store_.UpsertFindings(std::vector{old_one, long_one}, From() - 30min).ok());
    ASSERT_TRUE(store_.UpsertFindings(std::vector{long_one}, From() - 20min).ok());
    ASSERT_TRUE(store_.UpsertFindings(std::vector{long_one, thermal}, From() + 30min).ok());
    ASSERT_TRUE(store_.UpsertFindings(std::vector{long_one}, From() + 50min).ok());
  }

  RecentHistory Summary() {
    auto history = SummarizeHistory(store_, From(), Until());
    EXPECT_TRUE(history.ok()) << history.error().message;
    return history.ok() ? *history : RecentHistory{};
  }

  MemoryHistoryStore store_;
};

TEST_F(TriageHistoryTest, RangesPerGpuCoverOnlyTheWindow) {
  RecentHistory history = Summary();
  EXPECT_EQ(history.state, RecentHistory::State::kRead);
  ASSERT_EQ(history.gpus.size(), 2u);  // GPU 2 has no sample in the window

  const GpuHistory& hot = history.gpus[0];
  EXPECT_EQ(hot.gpu.index, 0u);
  ASSERT_TRUE(hot.temperature_c);
  EXPECT_EQ(hot.temperature_c->min, 60);
  EXPECT_EQ(hot.temperature_c->mean, 75);
  EXPECT_EQ(hot.temperature_c->max, 90);
  EXPECT_EQ(hot.temperature_c->first, 60);
  EXPECT_EQ(hot.temperature_c->last, 90);
  EXPECT_EQ(hot.temperature_c->points, 4u);
  ASSERT_TRUE(hot.utilization_gpu_percent);
  EXPECT_EQ(hot.utilization_gpu_percent->min, 90);
  EXPECT_EQ(hot.utilization_gpu_percent->max, 100);
  ASSERT_TRUE(hot.memory_used_bytes);
  EXPECT_EQ(hot.memory_used_bytes->mean, 40e9);

  const GpuHistory& cool = history.gpus[1];
  EXPECT_EQ(cool.gpu.index, 1u);
  ASSERT_TRUE(cool.temperature_c);
  EXPECT_EQ(cool.temperature_c->mean, 40);
  ASSERT_TRUE(cool.memory_used_bytes);
  EXPECT_EQ(cool.memory_used_bytes->points, 1u);  // the missing reading is left out, not read as 0
}

TEST_F(TriageHistoryTest, FindingsOpenAtAnyTimeInTheWindow) {
  std::vector<std::string> ids;
  for (const StoredFinding& incident : Summary().findings) ids.push_back(incident.finding.id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"memory_leak", "temperature_high"}));
}

TEST_F(TriageHistoryTest, ATemperatureClimbAndCategorisedFindingsAreEvidence) {
  std::vector<HistoryEvidence> evidence = EvidenceFromHistory(Summary(), DefaultHealthConfig(), {});
  std::vector<std::string> thermal, other;
  for (const HistoryEvidence& e : evidence) (e.cause == "thermal" ? thermal : other).push_back(e.line);
  ASSERT_EQ(thermal.size(), 2u) << ::testing::PrintToString(thermal);
  EXPECT_EQ(thermal[0], "history: GPU 0 temperature rose from 60 to 90 °C in the last hour (peak 90 °C)");
  EXPECT_EQ(thermal[1].rfind("history: temperature_high (critical) from ", 0), 0u) << thermal[1];
  // GPU 1 stayed level, and memory_leak is a trend detector with no category to support.
  EXPECT_TRUE(other.empty()) << ::testing::PrintToString(other);
}

TEST_F(TriageHistoryTest, AFindingThatStillHoldsIsNotRepeated) {
  const std::vector<Finding> current{MakeFinding("temperature_high", 0, Severity::kCritical)};
  std::vector<HistoryEvidence> evidence = EvidenceFromHistory(Summary(), DefaultHealthConfig(), current);
  ASSERT_EQ(evidence.size(), 1u);
  EXPECT_EQ(evidence[0].line, "history: GPU 0 temperature rose from 60 to 90 °C in the last hour (peak 90 °C)");
}

TEST_F(TriageHistoryTest, JsonCarriesTheRangesAndTheIncidents) {
  RecentHistory history = Summary();
  history.database = "/tmp/history.db";
  nlohmann::json json = RecentHistoryToJson(history);
  EXPECT_EQ(json["status"], "read");
  EXPECT_EQ(json["database"], "/tmp/history.db");
  EXPECT_FALSE(json.contains("note"));
  ASSERT_EQ(json["gpus"].size(), 2u);
  EXPECT_EQ(json["gpus"][0]["index"], 0);
  EXPECT_EQ(json["gpus"][0]["temperature_c"]["max"], 90.0);
  EXPECT_EQ(json["gpus"][0]["temperature_c"]["first"], 60.0);
  ASSERT_EQ(json["findings"].size(), 2u);
  for (const auto& incident : json["findings"]) {
    EXPECT_TRUE(incident.contains("opened_at"));
    EXPECT_TRUE(incident.contains("resolved_at"));
  }
}

TEST(ReadRecentHistory, AMissingFileIsNoHistory) {
  RecentHistory history = ReadRecentHistory("/nonexistent/gpudoctor/history.db", T0());
  EXPECT_EQ(history.state, RecentHistory::State::kMissing);
  EXPECT_NE(history.note.find("/nonexistent/gpudoctor/history.db does not exist"), std::string::npos) << history.note;
  EXPECT_EQ(history.until - history.from, kTriageHistoryWindow);
  nlohmann::json json = RecentHistoryToJson(history);
  EXPECT_EQ(json["status"], "missing");
  EXPECT_TRUE(json["gpus"].empty());
}

TEST(ReadRecentHistory, AFileThatIsNoHistoryIsANote) {
  testing::ScratchDir dir;
  const std::string garbage = dir.File("garbage.db");
  std::ofstream(garbage) << "this is not an SQLite database, just text that is long enough to look like a header\n";
  RecentHistory history = ReadRecentHistory(garbage, T0());
  EXPECT_EQ(history.state, RecentHistory::State::kUnreadable);
  EXPECT_NE(history.note.find(garbage), std::string::npos) << history.note;

  RecentHistory directory = ReadRecentHistory(dir.File(""), T0());
  EXPECT_EQ(directory.state, RecentHistory::State::kUnreadable);
  EXPECT_NE(directory.note.find("is a directory"), std::string::npos) << directory.note;
}

// A FIFO, socket or device at the path is a note with the reason: triage
// goes on without history rather than waiting on it.
TEST(ReadRecentHistory, APathThatIsNoRegularFileIsANoteNotAWait) {
  input_testing::RefusedInputs refused;
  for (const input_testing::RefusedInput& input : refused.All()) {
    if (input.kind == "missing") continue;
    RecentHistory history = ReadRecentHistory(input.path, T0());
    EXPECT_EQ(history.state, RecentHistory::State::kUnreadable) << input.kind;
    EXPECT_EQ(history.note, input.path + ": " + input.message) << input.kind;
  }
}

TEST(ReadRecentHistory, ReadsTheAgentsFile) {
  testing::ScratchDir dir;
  const std::string path = dir.File("history.db");
  {
    auto store = SqliteHistoryStore::Open(path, {}, T0());
    ASSERT_TRUE(store.ok()) << store.error().message;
    std::vector<GpuSample> samples{Sample(T0() + 10min, 3, 50, 99), Sample(T0() + 20min, 3, 52, 97)};
    ASSERT_TRUE((*store)->Append(samples, {}).ok());
  }
  RecentHistory history = ReadRecentHistory(path, T0() + 30min);
  ASSERT_EQ(history.state, RecentHistory::State::kRead) << history.note;
  EXPECT_EQ(history.database, path);
  ASSERT_EQ(history.gpus.size(), 1u);
  EXPECT_EQ(history.gpus[0].gpu.index, 3u);
  ASSERT_TRUE(history.gpus[0].temperature_c);
  EXPECT_EQ(history.gpus[0].temperature_c->mean, 51);
  EXPECT_TRUE(EvidenceFromHistory(history, DefaultHealthConfig(), {}).empty());  // a 2 °C rise is no climb
}

}  // namespace
}  // namespace gpudoctor
