// Reading an nvidia-bug-report.sh log: its kernel-log sections only, with the
// file's own line numbers; its nvidia-smi -q output; its debugdump named.
#include "logs/bug_report.h"

#include <gtest/gtest.h>

#include "common/gzip.h"
#include "common/input_file.h"
#include "common/scratch_dir.h"
#include "common/text.h"

namespace gpudoctor {
namespace {

const std::string kReport = std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/bug_report/nvidia-bug-report.log";

std::vector<LogEvent> Scan(const std::string& path, BugReportSummary* summary = nullptr) {
  std::vector<LogEvent> events;
  auto scan = ScanBugReportFile(path, {}, [&](LogEvent&& event) { events.push_back(std::move(event)); });
  EXPECT_TRUE(scan) << scan.error().message;
  EXPECT_TRUE(scan && *scan) << path << " not recognised as a bug report";
  if (scan && *scan && summary) *summary = (*scan)->summary;
  return events;
}

TEST(BugReport, OnlyTheKernelLogSectionsAreReadWithTheirLineNumbers) {
  BugReportSummary summary;
  std::vector<LogEvent> events = Scan(kReport, &summary);
  std::vector<std::pair<std::string, uint64_t>> found;
  for (const LogEvent& event : events) found.emplace_back(event.kind, event.line_number);
  // The Xid 79 of the old installer log (line 25) is not the node's kernel log.
  EXPECT_EQ(found, (std::vector<std::pair<std::string, uint64_t>>{
                       {"xid", 32}, {"hung_task", 38}, {"nvswitch_sxid", 276}}));
  EXPECT_EQ(events[0].xid, 48u);
  EXPECT_EQ(events[1].Field("driver_frames"), "nvidia_uvm");
  EXPECT_EQ(summary.script_version, "35205957");
  EXPECT_EQ(summary.date, "Wed Mar  1 14:05:10 UTC 2023");
  EXPECT_TRUE(summary.has_debugdump);
  EXPECT_GT(summary.smi_query_lines, 150u);
}

TEST(BugReport, GzippedAsTheScriptWritesIt) {
  auto text = ReadInputFile(kReport, 1 << 20);
  ASSERT_TRUE(text);
  auto packed = Gzip(*text);
  ASSERT_TRUE(packed);
  testing::ScratchDir dir;
  EXPECT_EQ(Scan(dir.Write("nvidia-bug-report.log.gz", *packed)).size(), 3u);
}

TEST(BugReport, TheNvidiaSmiQuerySectionIsExtractedWithoutTheOtherCommands) {
  auto text = ReadInputFile(kReport, 1 << 20);
  ASSERT_TRUE(text);
  std::string smi = ExtractSmiQueryOutput(*text);
  EXPECT_TRUE(StartsWith(Trim(smi), "==============NVSMI LOG=============="));
  EXPECT_NE(smi.find("NVIDIA A100-SXM4-80GB"), std::string::npos);
  EXPECT_EQ(smi.find("Attached Units"), std::string::npos);  // the --query --unit output that follows
  EXPECT_EQ(smi.find("Replay Errors"), std::string::npos);
}

TEST(BugReport, AnOrdinaryLogIsNotOne) {
  auto scan = ScanBugReportFile(std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/kernel_logs/015.log", {},
                                [](LogEvent&&) {});
  ASSERT_TRUE(scan);
  EXPECT_FALSE(*scan);
  EXPECT_FALSE(IsBugReport("[  721.028170] INFO: task nvc:[driver]:5403 blocked for more than 120 seconds.\n"));
}

}  // namespace
}  // namespace gpudoctor
