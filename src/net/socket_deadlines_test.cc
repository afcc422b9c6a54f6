#include "net/socket_deadlines.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace gpudoctor {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

// A connected pair: the deadline watches `watched`; the test reads `peer`.
class SocketPair {
 public:
  SocketPair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0); }
  ~SocketPair() {
    close(fds_[0]);
    close(fds_[1]);
  }
  int watched() const { return fds_[0]; }
  // Whether the peer sees the end of the stream within `wait`.
  bool PeerSeesEnd(milliseconds wait) const {
    pollfd p{.fd = fds_[1], .events = POLLIN, .revents = 0};
    if (poll(&p, 1, static_cast<int>(wait.count())) != 1) return false;
    char byte;
    return read(fds_[1], &byte, 1) == 0;
  }

 private:
  int fds_[2] = {-1, -1};
};

class SocketDeadlinesTest : public ::testing::Test {
 protected:
  // Watches the pair's socket with a deadline `after` from now.
  SocketDeadlines::Watch* Watch(steady_clock::duration after) {
    return deadlines_.Add(pair_.watched(), steady_clock::now() + after);
  }

  SocketDeadlines deadlines_;
  SocketPair pair_;
};

TEST_F(SocketDeadlinesTest, ShutsDownASocketPastItsDeadline) {
  SocketDeadlines::Watch* watch = Watch(milliseconds(50));
  EXPECT_TRUE(pair_.PeerSeesEnd(seconds(10)));
  EXPECT_EQ(deadlines_.expired_total(), 1u);
  deadlines_.Forget(watch);
}

TEST_F(SocketDeadlinesTest, MovingTheDeadlineLaterSparesTheSocket) {
  SocketDeadlines::Watch* watch = Watch(seconds(1));
  deadlines_.Move(watch, steady_clock::now() + seconds(3600));
  EXPECT_FALSE(pair_.PeerSeesEnd(milliseconds(1500)));
  EXPECT_EQ(deadlines_.expired_total(), 0u);
  deadlines_.Forget(watch);
}

TEST_F(SocketDeadlinesTest, MovingTheDeadlineEarlierWakesTheThread) {
  SocketDeadlines::Watch* watch = Watch(seconds(3600));
  deadlines_.Move(watch, steady_clock::now());
  EXPECT_TRUE(pair_.PeerSeesEnd(seconds(10)));
  deadlines_.Forget(watch);
}

TEST_F(SocketDeadlinesTest, AForgottenSocketIsNeverTouched) {
  deadlines_.Forget(Watch(milliseconds(50)));
  EXPECT_FALSE(pair_.PeerSeesEnd(milliseconds(500)));
  EXPECT_EQ(deadlines_.expired_total(), 0u);
}

}  // namespace
}  // namespace gpudoctor
