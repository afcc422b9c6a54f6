#include "common/input_file.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "common/input_test_support.h"

namespace gpudoctor {
namespace {


TEST(InputFile, ReadsARegularFileWhole) {
  testing::ScratchDir dir;
  const std::string path = dir.Write("config.toml", "[host]\nipmi = false\n");
  auto text = ReadInputFile(path, 1024);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text, "[host]\nipmi = false\n");
}

TEST(InputFile, ReadsAnEmptyFile) {
  testing::ScratchDir dir;
  auto text = ReadInputFile(dir.Write("empty", ""), 1024);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text, "");
}

TEST(InputFile, FollowsSymbolicLinksToRegularFiles) {
  testing::ScratchDir dir;
  const std::string target = dir.Write("target", "data");
  std::filesystem::create_symlink(target, dir.File("link"));
  auto text = ReadInputFile(dir.File("link"), 1024);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text, "data");
}

// The null device is the one device read, as an empty file (grep reads it too).
TEST(InputFile, TheNullDeviceReadsAsAnEmptyFile) {
  auto text = ReadInputFile("/dev/null", 1024);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text, "");
}

// Each refused kind names the path, says why, and reports which rule it broke.
TEST(InputFile, RefusesEveryPathThatIsNotARegularFile) {
  input_testing::RefusedInputs refused;
  for (const input_testing::RefusedInput& input : refused.All()) {
    InputFailure failure{};
    auto file = InputFile::Open(input.path, &failure);
    ASSERT_FALSE(file.ok()) << input.kind;
    EXPECT_EQ(file.error().message, input.path + ": " + input.message) << input.kind;
    const InputFailure expected = input.kind == "missing"      ? InputFailure::kMissing
                                  : input.kind == "unreadable" ? InputFailure::kUnreadable
                                                               : InputFailure::kNotRegularFile;
    EXPECT_EQ(failure, expected) << input.kind;
  }
}

TEST(InputFile, ABlockDeviceIsNotARegularFile) {
  std::string device;
  for (const char* candidate : {"/dev/loop0", "/dev/sda", "/dev/vda", "/dev/nvme0n1"}) {
    struct stat info {};
    if (::stat(candidate, &info) == 0 && S_ISBLK(info.st_mode)) device = candidate;
  }
  if (device.empty()) GTEST_SKIP() << "no block device node on this machine";
  auto file = InputFile::Open(device);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.error().message, device + ": is a block device, not a regular file");
}

TEST(InputFile, AMissingDirectoryInThePathIsAMissingFile) {
  testing::ScratchDir dir;
  const std::string file_as_directory = dir.Write("plain", "x") + "/config.toml";
  InputFailure failure{};
  auto file = InputFile::Open(file_as_directory, &failure);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.error().message, file_as_directory + ": no such file");
  EXPECT_EQ(failure, InputFailure::kMissing);
}

TEST(InputFile, AFileOverTheCapIsRefusedBeforeItIsRead) {
  testing::ScratchDir dir;
  const std::string path = dir.Write("big.toml", std::string(2048 + 1, 'x'));
  auto text = ReadInputFile(path, 2048);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.error().message, path + ": 2049 bytes, over the 2 KiB limit");
  EXPECT_TRUE(ReadInputFile(dir.Write("exact.toml", std::string(2048, 'x')), 2048).ok());
}

TEST(InputFile, AReadErrorIsReportedWithItsReason) {
  // Offset 0 of a process's own memory is never mapped: reading it fails with EIO.
  auto text = ReadInputFile("/proc/self/mem", 1024);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.error().message, "/proc/self/mem: read failed: input/output error");
}

TEST(InputFile, UnreadableFileSaysPermissionDenied) {
  input_testing::RefusedInputs refused;
  const std::string path = refused.Unreadable().path;
  auto check = [&] {
    InputFailure failure{};
    auto file = InputFile::Open(path, &failure);
    return !file.ok() && file.error().message == path + ": permission denied" && failure == InputFailure::kUnreadable
               ? 0
               : 1;
  };
  // Root reads any file: the check then runs as the user nobody.
  EXPECT_EQ(input_testing::PermissionsApply() ? check() : input_testing::ExitStatusAsNobody(check), 0);
}

TEST(InputFile, TheOpenDescriptorBlocksAgainSoFollowersCanWait) {
  testing::ScratchDir dir;
  auto file = InputFile::Open(dir.Write("kern.log", "line\n"));
  ASSERT_TRUE(file.ok()) << file.error().message;
  const int flags = ::fcntl(file->fd(), F_GETFL);
  EXPECT_EQ(flags & O_NONBLOCK, 0);
  EXPECT_NE(::fcntl(file->fd(), F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_EQ(file->status().st_size, 5);
}

TEST(InputFile, ReleaseHandsTheDescriptorOver) {
  testing::ScratchDir dir;
  int fd = -1;
  {
    auto file = InputFile::Open(dir.Write("kern.log", "line\n"));
    ASSERT_TRUE(file.ok()) << file.error().message;
    fd = file->Release();
    EXPECT_EQ(file->fd(), -1);
  }
  char buffer[8];
  EXPECT_EQ(::read(fd, buffer, sizeof buffer), 5) << "the descriptor must outlive the InputFile";
  ::close(fd);
}

TEST(InputFile, ReadAllStartsAtTheCurrentOffset) {
  testing::ScratchDir dir;
  auto file = InputFile::Open(dir.Write("log", "0123456789"));
  ASSERT_TRUE(file.ok());
  ASSERT_EQ(::lseek(file->fd(), 4, SEEK_SET), 4);
  auto rest = file->ReadAll(100);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(*rest, "456789");
}

TEST(FormatSizeLimit, WritesWholeUnits) {
  EXPECT_EQ(FormatSizeLimit(1 << 20), "1 MiB");
  EXPECT_EQ(FormatSizeLimit(16u << 20), "16 MiB");
  EXPECT_EQ(FormatSizeLimit(64 * 1024), "64 KiB");
  EXPECT_EQ(FormatSizeLimit(1ull << 30), "1 GiB");
  EXPECT_EQ(FormatSizeLimit(1500), "1500 bytes");
  EXPECT_EQ(FormatSizeLimit(1), "1 byte");
}

}  // namespace
}  // namespace gpudoctor
