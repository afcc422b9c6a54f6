#include "health/detectors/file_tail.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "health/detectors/detector_test_support.h"

namespace gpudoctor {
namespace {

using Lines = std::vector<std::string>;
using testing::Append;

TEST(FileTail, StartsAtTheEndAndReturnsOnlyCompleteNewLines) {
  testing::TempDir dir;
  const std::string path = dir.File("train.log");
  Append(path, "old 1\nold 2\n");
  FileTail tail(path);
  EXPECT_EQ(tail.ReadNewLines(), Lines{});
  Append(path, "step 1\nstep 2\r\nstep ");
  EXPECT_EQ(tail.ReadNewLines(), (Lines{"step 1", "step 2"}));
  EXPECT_EQ(tail.ReadNewLines(), Lines{});
  Append(path, "3 done\n");
  EXPECT_EQ(tail.ReadNewLines(), Lines{"step 3 done"});
}

TEST(FileTail, FromStartReadsWhatIsThere) {
  testing::TempDir dir;
  const std::string path = dir.File("train.log");
  Append(path, "a\nb\n");
  FileTail tail(path, /*from_start=*/true);
  EXPECT_EQ(tail.ReadNewLines(), (Lines{"a", "b"}));
}

TEST(FileTail, AFileThatAppearsLaterIsReadFromItsStart) {
  testing::TempDir dir;
  const std::string path = dir.File("train.log");
  FileTail tail(path);
  EXPECT_EQ(tail.ReadNewLines(), Lines{});
  EXPECT_FALSE(tail.exists());
  Append(path, "first\n");
  EXPECT_EQ(tail.ReadNewLines(), Lines{"first"});
  EXPECT_TRUE(tail.exists());
}

TEST(FileTail, FollowsRotation) {
  testing::TempDir dir;
  const std::string path = dir.File("train.log");
  Append(path, "");
  FileTail tail(path);
  EXPECT_EQ(tail.ReadNewLines(), Lines{});
  Append(path, "one\n");
  EXPECT_EQ(tail.ReadNewLines(), Lines{"one"});
  Append(path, "two\n");  // written just before rotation, not yet read
  std::filesystem::rename(path, path + ".1");
  Append(path, "three\n");
  EXPECT_EQ(tail.ReadNewLines(), (Lines{"two", "three"}));
  Append(path, "four\n");
  EXPECT_EQ(tail.ReadNewLines(), Lines{"four"});
}

TEST(FileTail, FollowsTruncation) {
  testing::TempDir dir;
  const std::string path = dir.File("train.log");
  Append(path, "");
  FileTail tail(path);
  EXPECT_EQ(tail.ReadNewLines(), Lines{});
  Append(path, "a long line before truncation\n");
  EXPECT_EQ(tail.ReadNewLines(), Lines{"a long line before truncation"});
  ASSERT_EQ(truncate(path.c_str(), 0), 0);
  Append(path, "new\n");
  EXPECT_EQ(tail.ReadNewLines(), Lines{"new"});
}

TEST(FileTail, CutsOverlongLinesAndBoundsEachRead) {
  testing::TempDir dir;
  const std::string path = dir.File("train.log");
  FileTail tail(path);
  (void)tail.ReadNewLines();
  Append(path, std::string(FileTail::kMaxLineBytes * 3, 'x') + "\nshort\n");
  Lines lines = tail.ReadNewLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].size(), FileTail::kMaxLineBytes);
  EXPECT_EQ(lines[1], "short");

  std::string big;
  for (int i = 0; i < 200'000; ++i) big += "line " + std::to_string(i) + "\n";  // ~2.2 MB per batch
  Append(path, big + big);
  size_t total = tail.ReadNewLines().size();
  EXPECT_LT(total, 400'000u);  // not all in one call
  total += tail.ReadNewLines().size();
  EXPECT_EQ(total, 400'000u);
}

TEST(FileTail, HeartbeatChanges) {
  testing::TempDir dir;
  const std::string path = dir.File("heartbeat");
  FileTail tail(path);
  EXPECT_FALSE(tail.Changed());  // absent
  Append(path, "1");
  EXPECT_TRUE(tail.Changed());  // appeared
  EXPECT_FALSE(tail.Changed());
  Append(path, "2");
  EXPECT_TRUE(tail.Changed());
  struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);  // touch only
  EXPECT_TRUE(tail.Changed());
  EXPECT_FALSE(tail.Changed());
}

}  // namespace
}  // namespace gpudoctor
