// `gpudoctor history` against history files written by the store.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "cli/commands.h"
#include "store/sqlite_store.h"
#include "store/test_support.h"

namespace gpudoctor {
namespace {

using namespace std::chrono_literals;
using testing::T0;

struct Outcome {
  int exit_code = -1;
  std::string out, err;
};

// Parses argv like main() does: global --json before or after the subcommand.
Outcome RunHistory(std::vector<std::string> args) {
  CommandContext context;
  CLI::App app{"test", "gpudoctor"};
  app.require_subcommand(1);
  app.fallthrough();
  app.add_flag("--json", context.options.json);
  app.add_option("--color", context.options.color);
  RegisterHistoryCommand(app, context);
  args.insert(args.begin(), "history");
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  Outcome outcome;
  try {
    app.parse(reversed);
    outcome.exit_code = context.exit_code;
  } catch (const CLI::ParseError& e) {
    outcome.exit_code = exit_code::kUsage;
  }
  outcome.out = ::testing::internal::GetCapturedStdout();
  outcome.err = ::testing::internal::GetCapturedStderr();
  return outcome;
}

class HistoryCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("history.db");
    auto store = SqliteHistoryStore::Open(path_, {}, T0());
    ASSERT_TRUE(store.ok());
    std::vector<GpuSample> samples;
    for (int i = 0; i < 4; ++i) {
      samples.push_back(testing::Sample(T0() + i * 5s, 0, 60 + i, 90));
      samples.push_back(testing::Sample(T0() + i * 5s, 1, 40, 10));
    }
    ASSERT_TRUE((*store)->Append(samples, {}).ok());
    ASSERT_TRUE((*store)->UpsertFindings(std::vector{testing::MakeFinding("temperature_high", 0)}, T0()).ok());
    ASSERT_TRUE((*store)->UpsertFindings(std::vector{testing::MakeFinding("memory_leak", 1)}, T0() + 10s).ok());
  }
  std::string Iso(WallTime t) { return FormatIsoUtc(t); }

  testing::ScratchDir dir_;
  std::string path_;
};

TEST_F(HistoryCommandTest, SeriesAsJson) {
  Outcome run = RunHistory({"--db", path_, "--gpu", "0", "--metric", "temperature_c", "--since", Iso(T0()), "--until",
                            Iso(T0() + 1min), "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json["metric"], "temperature_c");
  EXPECT_EQ(json["unit"], "°C");
  ASSERT_EQ(json["series"].size(), 1u);
  const auto& series = json["series"][0];
  EXPECT_EQ(series["gpu"]["index"], 0);
  EXPECT_EQ(series["resolution"], "raw");
  ASSERT_EQ(series["points"].size(), 4u);
  EXPECT_EQ(series["points"][3]["avg"], 63);
  EXPECT_EQ(series["points"][3]["t"], Iso(T0() + 15s));
}

TEST_F(HistoryCommandTest, SeriesAsTextForEveryGpu) {
  Outcome run = RunHistory({"--db", path_, "--metric", "utilization_gpu_percent", "--since", Iso(T0() - 1min),
                            "--until", Iso(T0() + 1min), "--color", "never"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("GPU 0 GPU-00000000-0000-0000-0000-000000000000 utilization_gpu_percent (raw, 4 points)"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find(Iso(T0() + 5s) + "  90 %"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("GPU 1 "), std::string::npos);
}

// Values read in their units: bytes in GiB, watts, degrees; never 4e+10.
TEST_F(HistoryCommandTest, TextShowsValuesInTheUnitsPeopleRead) {
  auto text = [&](const char* metric) {
    return RunHistory({"--db", path_, "--gpu", "0", "--metric", metric, "--since", Iso(T0() - 1min), "--until",
                       Iso(T0() + 1min), "--color", "never"})
        .out;
  };
  EXPECT_NE(text("memory_used_bytes").find(Iso(T0()) + "  37.25 GiB"), std::string::npos) << text("memory_used_bytes");
  EXPECT_NE(text("power_w").find(Iso(T0()) + "  250.5 W"), std::string::npos) << text("power_w");
  EXPECT_NE(text("temperature_c").find(Iso(T0()) + "  60 °C"), std::string::npos) << text("temperature_c");
  EXPECT_EQ(text("memory_used_bytes").find("e+"), std::string::npos);
}

TEST_F(HistoryCommandTest, FindingsAsJsonAndText) {
  Outcome run = RunHistory({"--json", "--db", path_, "--findings", "--since", Iso(T0() - 1h), "--until", Iso(T0() + 1h)});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto json = nlohmann::json::parse(run.out);
  ASSERT_EQ(json["findings"].size(), 2u);
  const auto& latest = json["findings"][0];
  EXPECT_EQ(latest["id"], "memory_leak");
  EXPECT_EQ(latest["state"], "open");
  EXPECT_EQ(latest["opened_at"], Iso(T0() + 10s));
  EXPECT_EQ(latest["resolved_at"], nullptr);
  EXPECT_EQ(latest["gpu"]["index"], 1);
  EXPECT_EQ(latest["evidence"][1], "quote \" and newline\n and ünïcode");
  EXPECT_EQ(json["findings"][1]["id"], "temperature_high");
  EXPECT_EQ(json["findings"][1]["state"], "resolved");
  EXPECT_EQ(json["findings"][1]["resolved_at"], Iso(T0() + 10s));

  Outcome text = RunHistory({"--db", path_, "--findings", "--open", "--since", Iso(T0() - 1h), "--until",
                             Iso(T0() + 1h), "--color", "never"});
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("memory_leak"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("temperature_high"), std::string::npos) << text.out;
}

TEST_F(HistoryCommandTest, OverviewListsGpusAndOpenFindings) {
  Outcome run = RunHistory({"--db", path_, "--color", "never"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("2 GPU(s)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("memory_leak on GPU 1"), std::string::npos) << run.out;
}

TEST_F(HistoryCommandTest, ClearErrorsWithTheirExitCodes) {
  Outcome missing = RunHistory({"--db", dir_.File("nope.db")});
  EXPECT_EQ(missing.exit_code, exit_code::kNoInput);
  EXPECT_NE(missing.err.find("--db: " + dir_.File("nope.db") + ": no such file"), std::string::npos) << missing.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.File("nope.db")));

  const std::string text = dir_.File("notes.txt");
  std::ofstream(text) << "hello, this is not a database at all, not even close to one\n";
  Outcome not_db = RunHistory({"--db", text});
  EXPECT_EQ(not_db.exit_code, exit_code::kDataError);
  EXPECT_NE(not_db.err.find("not a gpudoctor history"), std::string::npos) << not_db.err;

  EXPECT_EQ(RunHistory({"--db", path_, "--metric", "warp_speed"}).exit_code, exit_code::kUsage);
  EXPECT_EQ(RunHistory({"--db", path_, "--metric", "power_w", "--gpu", "9"}).exit_code, exit_code::kUsage);
  EXPECT_EQ(RunHistory({"--db", path_, "--since", "yesterday-ish"}).exit_code, exit_code::kUsage);
  EXPECT_EQ(RunHistory({"--db", path_, "--since", "2023-13-01T00:00:00Z"}).exit_code, exit_code::kUsage);
  EXPECT_EQ(RunHistory({"--db", path_, "--since", "1h", "--until", "2h"}).exit_code, exit_code::kUsage);
}

}  // namespace
}  // namespace gpudoctor
