#include "logs/follow.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

std::string XidLine(int xid) {
  return "[ 10.0] NVRM: Xid (PCI:0000:01:00): " + std::to_string(xid) + ", pid=1, name=x, Ch 00000001\n";
}

void Append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::app | std::ios::binary) << text;
}

class FollowTest : public testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/gd_follow_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/kern.log";
  }
  void TearDown() override {
    Stop();
    std::remove(path_.c_str());
    std::remove((path_ + ".1").c_str());
    rmdir(dir_.c_str());
  }

  void Start(bool start_at_end = false) {
    FollowOptions follow;
    follow.poll_interval = std::chrono::milliseconds(10);
    follow.quiet_flush = std::chrono::milliseconds(20);
    follow.start_at_end = start_at_end;
    follow.on_open = [this] { opened_ = true; };
    thread_ = std::thread([this, follow] {
      status_ = FollowFile(
          path_, ReadOptions{}, follow,
          [this](LogEvent&& event) {
            std::lock_guard<std::mutex> lock(mutex_);
            xids_.push_back(event.xid.value_or(0));
          },
          [this] { return stop_.load(); });
    });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  // Waits (generously) until `count` Xid events have been reported.
  std::vector<uint32_t> WaitForXids(size_t count) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (xids_.size() >= count) return xids_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    return xids_;
  }

  std::string dir_, path_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> opened_{false};
  std::mutex mutex_;
  std::vector<uint32_t> xids_;
  Status status_;
};

TEST_F(FollowTest, PicksUpAppendedLines) {
  Append(path_, XidLine(13));
  Start();
  EXPECT_EQ(WaitForXids(1), (std::vector<uint32_t>{13}));
  Append(path_, "[ 11.0] ordinary line\n" + XidLine(31));
  EXPECT_EQ(WaitForXids(2), (std::vector<uint32_t>{13, 31}));
}

TEST_F(FollowTest, WaitsForTheFileAndSurvivesRotationAndTruncation) {
  Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  Append(path_, XidLine(43));
  EXPECT_EQ(WaitForXids(1), (std::vector<uint32_t>{43}));

  // logrotate: rename, then a new file under the old name. A line written to
  // the old file just before the rename is still read.
  Append(path_, XidLine(45));
  ASSERT_EQ(std::rename(path_.c_str(), (path_ + ".1").c_str()), 0);
  Append(path_, XidLine(48));
  EXPECT_EQ(WaitForXids(3), (std::vector<uint32_t>{43, 45, 48}));

  // copytruncate: the file shrinks and is written from the start again.
  { std::ofstream truncate(path_, std::ios::trunc); }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  Append(path_, XidLine(94));
  EXPECT_EQ(WaitForXids(4), (std::vector<uint32_t>{43, 45, 48, 94}));
  Stop();
  EXPECT_TRUE(status_.ok());
}

// A FIFO, device or directory under the name is refused at once, never read.
// The test holds the FIFO's write end, and lets go of it after a while, so a
// follower that wrongly read it would stop waiting and fail rather than hang.
TEST_F(FollowTest, ANameThatHoldsNoRegularFileIsRefused) {
  ASSERT_EQ(::mkfifo(path_.c_str(), 0600), 0);
  const int writer = ::open(path_.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  auto followed = std::async(std::launch::async, [this] {
    return FollowFile(path_, ReadOptions{}, FollowOptions{}, [](LogEvent&&) {}, [this] { return stop_.load(); });
  });
  const bool returned = followed.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  stop_ = true;
  ::close(writer);
  EXPECT_TRUE(returned) << "FollowFile waited on a FIFO";
  Status status = followed.get();
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().message, path_ + ": is a FIFO, not a regular file");
}

TEST_F(FollowTest, StartAtEndSkipsExistingLines) {
  Append(path_, XidLine(13));
  Start(/*start_at_end=*/true);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!opened_ && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(opened_);
  Append(path_, XidLine(79));
  auto xids = WaitForXids(1);
  ASSERT_FALSE(xids.empty());
  EXPECT_EQ(xids[0], 79u);
}

}  // namespace
}  // namespace gpudoctor
