#include "net/prometheus_text_stream.h"

#include <gtest/gtest.h>

#include <vector>

namespace gpudoctor {
namespace {

std::vector<PromSample> ReadInPieces(std::string_view text, size_t piece_size, PromTextLimits limits = {},
                                     std::string* error = nullptr) {
  std::vector<PromSample> samples;
  PromTextStream stream([](std::string_view name) { return name.starts_with("gpudoctor_"); },
                        [&](PromSample sample) { samples.push_back(std::move(sample)); }, limits);
  bool fed = true;
  for (size_t at = 0; fed && at < text.size(); at += piece_size) fed = stream.Feed(text.substr(at, piece_size));
  Status finished = stream.Finish();
  if (error != nullptr) *error = finished ? "" : finished.error().message;
  return samples;
}

constexpr std::string_view kText =
    "# HELP gpudoctor_up 1 when sampling is fresh.\n"
    "# TYPE gpudoctor_up gauge\n"
    "gpudoctor_up 1\n"
    "other_metric{a=\"b\"} 5\n"
    "\n"
    "gpudoctor_gpu_info{gpu=\"0\",uuid=\"GPU-1\",name=\"H100 \\\"SXM\\\"\"} 1\r\n"
    "gpudoctor_finding{id=\"xid\",severity=\"critical\"} 1";  // no newline at the end

TEST(PromTextStream, ReadsWantedSamplesWhateverThePieces) {
  for (size_t piece : {1, 2, 7, 64, 4096}) {
    SCOPED_TRACE(piece);
    std::string error;
    std::vector<PromSample> samples = ReadInPieces(kText, piece, {}, &error);
    EXPECT_EQ(error, "");
    ASSERT_EQ(samples.size(), 3u);
    EXPECT_EQ(samples[0].name, "gpudoctor_up");
    EXPECT_EQ(samples[1].labels.at("name"), "H100 \"SXM\"");
    EXPECT_EQ(samples[2].labels.at("severity"), "critical");
  }
}

TEST(PromTextStream, ALineTooLongIsRefusedWithoutKeepingIt) {
  std::string error;
  const std::string text = "gpudoctor_up{x=\"" + std::string(1 << 20, 'a') + "\"} 1\n";
  EXPECT_TRUE(ReadInPieces(text, 1000, {.max_line_bytes = 4096}, &error).empty());
  EXPECT_EQ(error, "line 1: longer than 4096 bytes");
  // Unwanted lines are bounded too: a line is kept whole before its name is read.
  const std::string unwanted = "other{x=\"" + std::string(1 << 20, 'a') + "\"} 1\n";
  ReadInPieces(unwanted, 1000, {.max_line_bytes = 4096}, &error);
  EXPECT_EQ(error, "line 1: longer than 4096 bytes");
}

TEST(PromTextStream, TheSamplesKeptAreBounded) {
  std::string text;
  for (int i = 0; i < 10000; ++i) text += "gpudoctor_finding{id=\"f" + std::to_string(i) + "\"} 1\n";
  std::string error;
  std::vector<PromSample> samples = ReadInPieces(text, 65536, {.max_kept_bytes = 100'000}, &error);
  EXPECT_NE(error.find("more samples than the 100000 bytes kept"), std::string::npos) << error;
  EXPECT_LT(samples.size(), 1000u);
}

TEST(PromTextStream, GarbageIsRefusedWithItsLine) {
  std::string error;
  ReadInPieces("gpudoctor_up 1\n{not a sample}\n", 3, {}, &error);
  EXPECT_EQ(error, "line 2: not a sample, a comment or a blank line");
  ReadInPieces("gpudoctor_up{a=\"b} 1\n", 3, {}, &error);
  EXPECT_EQ(error.rfind("line 1: ", 0), 0u) << error;
  ReadInPieces("gpudoctor_up one\n", 3, {}, &error);
  EXPECT_EQ(error, "line 1: bad value 'one'");
}

}  // namespace
}  // namespace gpudoctor
