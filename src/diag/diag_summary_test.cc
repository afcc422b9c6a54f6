// The summary every diag run ends with: its line, and its JSON read back the
// way gpudoctor slurm and the agent read a child's output.
#include "diag/diag_summary.h"

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

DiagSummary BadCards() {
  DiagSummary summary{.exit_code = 2, .level = 1};
  summary.rows = {
      {.gpu = 0, .test = DiagTest::kBurn, .state = DiagState::kPassed, .value = 51.5, .unit = "TFLOP/s",
       .figure = "fp64 51.5 TFLOP/s"},
      {.gpu = 1, .test = DiagTest::kMemtest, .state = DiagState::kFaulty, .value = 3, .unit = "errors",
       .figure = "3 errors", .reason = "3 memory errors"},
      {.gpu = 2, .test = DiagTest::kBurn, .state = DiagState::kHung, .reason = "no progress from the GPU for 1m 0s"},
      {.gpu = 3, .test = DiagTest::kMemtest, .state = DiagState::kCouldNotRun, .reason = "1 process is running on it"},
  };
  CountDiagSummary(summary);
  return summary;
}

TEST(DiagSummary, TheLineCountsEveryStateAndNamesWhatIsNotPassed) {
  const DiagSummary summary = BadCards();
  EXPECT_EQ(summary.gpus, 4);
  EXPECT_EQ(summary.line,
            "4 GPUs, 4 results: 1 passed, 1 FAULTY (GPU 1 memtest), 1 HUNG (GPU 2 burn), 1 could not run (GPU 3 "
            "memtest)");
}

TEST(DiagSummary, ItsJsonLineIsFoundAmongTheOthersAndReadBack) {
  const std::string output = "{\"event\":\"progress\",\"gpu\":0}\nnot json\n{\"event\":\"summary\",\"garbled\n" +
                             DiagSummaryJsonText(BadCards()) + "\n{\"event\":\"note\",\"message\":\"x\"}\n";
  auto read = FindDiagSummary(output);
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(read->exit_code, 2);
  EXPECT_EQ(read->level, 1);
  EXPECT_EQ(read->line, BadCards().line);
  ASSERT_EQ(read->rows.size(), 4u);
  EXPECT_EQ(read->rows[1].state, DiagState::kFaulty);
  EXPECT_EQ(read->rows[1].value, 3);
  EXPECT_EQ(read->rows[1].unit, "errors");
  EXPECT_EQ(read->rows[2].state, DiagState::kHung);
  EXPECT_FALSE(read->rows[2].value);
  EXPECT_EQ(read->rows[3].reason, "1 process is running on it");
  EXPECT_EQ(read->hung, 1);
}

TEST(DiagSummary, OutputWithoutASummaryOrWithAWrongOneIsAnError) {
  EXPECT_FALSE(FindDiagSummary(""));
  EXPECT_FALSE(FindDiagSummary("{\"event\":\"result\"}\n"));
  auto wrong = FindDiagSummary(
      "{\"event\":\"summary\",\"exit_code\":0,\"line\":\"\","
      "\"results\":[{\"gpu\":0,\"test\":\"fry\",\"state\":\"passed\"}]}");
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message.find("unknown test"), std::string::npos) << wrong.error().message;
  EXPECT_FALSE(FindDiagSummary("{\"event\":\"summary\",\"exit_code\":\"two\"}"));
}

}  // namespace
}  // namespace gpudoctor
