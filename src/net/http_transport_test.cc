#include "net/http_transport.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "common/text.h"

namespace gpudoctor {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

// Long enough for a loaded CI machine; the server's own limits in these tests
// are a second or two.
constexpr auto kPatience = seconds(10);

struct RawResponse {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;
};

struct ConnectedSocket {
  int fd;
};

// A client on a plain socket, so a test controls every byte and sees exactly
// what the server sends and when it closes.
class RawClient {
 public:
  explicit RawClient(int port) : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  }
  explicit RawClient(ConnectedSocket socket) : fd_(socket.fd), connected_(true) {}
  ~RawClient() { close(fd_); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }

  // False once the server has closed the connection.
  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // The next response; nullopt when the connection ends first or kPatience passes.
  std::optional<RawResponse> Read() {
    size_t head_end;
    while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(kPatience)) return std::nullopt;
    }
    RawResponse response;
    response.head = buffer_.substr(0, head_end + 2);
    response.status = ParseInt<int>(response.head.substr(9, 3)).value_or(0);
    size_t length = 0;
    for (std::string_view line : Split(response.head, '\n')) {
      if (EqualsIgnoreCase(line.substr(0, 15), "content-length:"))
        length = ParseInt<size_t>(line.substr(15)).value_or(0);
    }
    while (buffer_.size() < head_end + 4 + length) {
      if (!Fill(kPatience)) return std::nullopt;
    }
    response.body = buffer_.substr(head_end + 4, length);
    buffer_.erase(0, head_end + 4 + length);
    return response;
  }

  // Everything the server sends until it closes the connection.
  std::string ReadUntilClosed() {
    while (Fill(kPatience)) {
    }
    return std::exchange(buffer_, {});
  }

  // Sends `piece` every 100 ms, as a slow client does; true once the server
  // closes the connection, false if it still holds it after kPatience.
  bool TrickleUntilClosed(std::string_view piece) {
    const auto started = steady_clock::now();
    while (steady_clock::now() - started < kPatience) {
      if (!Send(piece) || ClosedWithin(milliseconds(100))) return true;
    }
    return false;
  }

  // Whether the server ends the connection within `wait` (anything it sends first is kept).
  bool ClosedWithin(steady_clock::duration wait) {
    const auto deadline = steady_clock::now() + wait;
    while (steady_clock::now() < deadline) {
      if (!Fill(std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now()))) return !timed_out_;
    }
    return false;
  }

 private:
  // Reads what is there; false at the end of the stream, on an error, or
  // after `wait` with nothing (timed_out_ then says which).
  bool Fill(milliseconds wait) {
    pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
    timed_out_ = poll(&p, 1, static_cast<int>(std::max<int64_t>(wait.count(), 1))) == 0;
    if (timed_out_) return false;
    char chunk[65536];
    const ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_;
  bool connected_ = false;
  bool timed_out_ = false;
  std::string buffer_;
};

std::string Get(std::string_view target, std::string_view extra_headers = "") {
  return fmt::format("GET {} HTTP/1.1\r\nHost: test\r\n{}\r\n", target, extra_headers);
}

class HttpTransportTest : public ::testing::Test {
 protected:
  void Start(HttpLimits limits = {}) {
    transport_ = std::make_unique<HttpTransport>(ListenAddress{"127.0.0.1", 0}, limits,
                                                 [this](const HttpRequest& request) { return Answer(request); });
    Result<int> port = transport_->Start();
    ASSERT_TRUE(port.ok()) << port.error().message;
    port_ = *port;
  }

  // Answers with the request's path; remembers the request.
  HttpResponse Answer(const HttpRequest& request) {
    if (request.path == "/throw") throw std::runtime_error("handler bug");
    {
      std::lock_guard lock(mutex_);
      last_request_ = request;
    }
    ++requests_;
    HttpResponse response;
    response.SetBody(request.path, "text/plain");
    return response;
  }

  HttpRequest LastRequest() {
    std::lock_guard lock(mutex_);
    return last_request_;
  }

  // Whether a well-behaved client gets its answer while the test misbehaves.
  bool AnsweredPromptly(std::string_view path) {
    RawClient client(port_);
    if (!client.Send(Get(path))) return false;
    std::optional<RawResponse> response = client.Read();
    return response && response->status == 200 && response->body == path;
  }

  std::unique_ptr<HttpTransport> transport_;
  int port_ = 0;
  std::mutex mutex_;
  HttpRequest last_request_;
  std::atomic<int> requests_{0};
};

TEST_F(HttpTransportTest, HandsTheHandlerTheDecodedRequest) {
  Start();
  RawClient client(port_);
  ASSERT_TRUE(client.Send(Get("/api/v1/history?gpu=3&metric=power_w%2Ctemperature_c&flag", "X-Custom: Value 1\r\n")));
  std::optional<RawResponse> response = client.Read();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "/api/v1/history");
  const HttpRequest request = LastRequest();
  EXPECT_EQ(request.method, "GET");
  EXPECT_EQ(request.Query("gpu"), "3");
  EXPECT_EQ(request.Query("metric"), "power_w,temperature_c");
  EXPECT_EQ(request.Query("flag"), "");
  EXPECT_EQ(request.Header("x-custom"), "Value 1");
  EXPECT_EQ(request.Header("Host"), "test");
}

TEST_F(HttpTransportTest, KeepsTheConnectionAliveAndAnswersHead) {
  Start();
  RawClient client(port_);
  for (const char* path : {"/one", "/two"}) {
    ASSERT_TRUE(client.Send(Get(path)));
    std::optional<RawResponse> response = client.Read();
    ASSERT_TRUE(response) << path;
    EXPECT_EQ(response->body, path);
  }
  // HEAD keeps the Content-Length of the body it leaves out.
  ASSERT_TRUE(client.Send("HEAD /three HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"));
  const std::string head = client.ReadUntilClosed();
  EXPECT_TRUE(StartsWith(head, "HTTP/1.1 200")) << head;
  EXPECT_NE(head.find("Content-Length: 6\r\n"), std::string::npos) << head;
  EXPECT_TRUE(EndsWith(head, "\r\n\r\n")) << head;
}

// The fix for slow-loris clients: bytes trickling in do not extend the deadline.
TEST_F(HttpTransportTest, ARequestHeadMustArriveWithinTheDeadline) {
  Start({.request_timeout = seconds(1), .idle_timeout = seconds(30)});
  RawClient slow(port_);
  ASSERT_TRUE(slow.Send("GET /slow HTTP/1.1\r\nHost: test\r\nX-Trickle: "));
  EXPECT_TRUE(slow.TrickleUntilClosed("a")) << "a client sending a byte every 100 ms kept its connection";
  EXPECT_EQ(requests_, 0);
  EXPECT_TRUE(AnsweredPromptly("/others-still-served"));
}

TEST_F(HttpTransportTest, TheNextRequestOnAKeepAliveConnectionHasTheSameDeadline) {
  Start({.request_timeout = seconds(1), .idle_timeout = seconds(30)});
  RawClient client(port_);
  ASSERT_TRUE(client.Send(Get("/first")));
  ASSERT_TRUE(client.Read());
  ASSERT_TRUE(client.Send("GET /second HTTP/1.1\r\n"));
  EXPECT_TRUE(client.TrickleUntilClosed("X: y\r\n"));
  EXPECT_EQ(requests_, 1);
}

TEST_F(HttpTransportTest, AnIdleKeepAliveConnectionIsClosed) {
  Start({.idle_timeout = seconds(1)});
  RawClient client(port_);
  ASSERT_TRUE(client.Send(Get("/once")));
  ASSERT_TRUE(client.Read());
  EXPECT_TRUE(client.ClosedWithin(kPatience));
}

// Slow connections hold no thread: with more of them than threads, everyone
// else is still answered at once.
TEST_F(HttpTransportTest, SlowClientsDoNotStarveOthers) {
  Start({.threads = 2, .request_timeout = seconds(120), .idle_timeout = seconds(120)});
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 20; ++i) {
    slow.push_back(std::make_unique<RawClient>(port_));
    ASSERT_TRUE(slow.back()->Send("GET /never-finished HTTP/1.1\r\nHost: test\r\nX-Trickle: a"));
  }
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(AnsweredPromptly("/scrape")) << i;
}

// More clients than connection slots wait in the listen backlog and are
// served in turn: none is refused.
TEST_F(HttpTransportTest, ABurstBeyondTheConnectionLimitIsServed) {
  Start({.threads = 2, .max_connections = 8});
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 200; ++i) {
    clients.push_back(std::make_unique<RawClient>(port_));
    ASSERT_TRUE(clients.back()->connected()) << i;
  }
  for (auto& client : clients) ASSERT_TRUE(client->Send(Get("/burst", "Connection: close\r\n")));
  int answered = 0;
  for (auto& client : clients) {
    std::optional<RawResponse> response = client->Read();
    answered += response && response->status == 200;
  }
  EXPECT_EQ(answered, 200);
}

struct RefusedRequest {
  const char* what;
  std::string bytes;
  int status;
};

// Each is answered with a status, then the connection closes: never a silent drop.
TEST_F(HttpTransportTest, OversizedAndMalformedRequestsAreAnswered) {
  Start({.max_request_head_bytes = 16 * 1024, .max_request_body_bytes = 1024});
  const RefusedRequest cases[] = {
      {"long URI", Get("/" + std::string(20000, 'u')), 414},
      {"large header", Get("/", "X-Padding: " + std::string(64 * 1024, 'h') + "\r\n"), 431},
      {"many headers",
       Get("/",
           [] {
             std::string many;
             for (int i = 0; i < 2000; ++i) many += fmt::format("X-{}: {}\r\n", i, i);
             return many;
           }()),
       431},
      {"declared body", "GET / HTTP/1.1\r\nHost: test\r\nContent-Length: 1000000\r\n\r\n", 413},
      {"posted body", "POST /metrics HTTP/1.1\r\nHost: test\r\nContent-Length: 5000\r\n\r\n" + std::string(5000, 'b'),
       413},
      {"chunked body", "POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
       411},
      {"header without a colon", "GET / HTTP/1.1\r\nHost: test\r\nno colon here\r\n\r\n", 400},
      {"conflicting lengths", "GET / HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400},
      {"bad Content-Length", "GET / HTTP/1.1\r\nHost: test\r\nContent-Length: ten\r\n\r\n", 400},
      {"unknown version", "GET / HTTP/9.1\r\nHost: test\r\n\r\n", 505},
      {"not HTTP at all", "GARBAGE\r\n\r\n", 400},
      {"bad escape in the path", Get("/api%zz"), 400},
  };
  for (const RefusedRequest& refused : cases) {
    RawClient client(port_);
    client.Send(refused.bytes);  // the server may answer and close before reading it all
    std::optional<RawResponse> response = client.Read();
    ASSERT_TRUE(response) << refused.what << ": the connection ended without an answer";
    EXPECT_EQ(response->status, refused.status) << refused.what << "\n" << response->head;
    EXPECT_TRUE(client.ClosedWithin(kPatience)) << refused.what;
  }
  EXPECT_EQ(requests_, 0);
}

TEST_F(HttpTransportTest, ASmallBodyIsReadAndIgnored) {
  Start({.max_request_body_bytes = 1024});
  RawClient client(port_);
  ASSERT_TRUE(client.Send("GET /with-body HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello" + Get("/next")));
  std::optional<RawResponse> first = client.Read();
  std::optional<RawResponse> second = client.Read();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->body, "/with-body");
  EXPECT_EQ(second->body, "/next");
}

TEST_F(HttpTransportTest, AThrowingHandlerAnswers500) {
  Start();
  RawClient client(port_);
  ASSERT_TRUE(client.Send(Get("/throw")));
  std::optional<RawResponse> response = client.Read();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 500);
  EXPECT_TRUE(AnsweredPromptly("/after"));
}

// A client connected with a small receive buffer, so that the server's writes
// wait on how fast it reads.
int ConnectWithSmallReceiveBuffer(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int bytes = 64 * 1024;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads everything until the server closes, `chunk` bytes every `pause`; the byte count.
size_t ReadSlowly(int fd, size_t chunk, milliseconds pause) {
  std::vector<char> buffer(chunk);
  size_t total = 0;
  for (;;) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kPatience).count())) <= 0) return total;
    const ssize_t n = recv(fd, buffer.data(), buffer.size(), 0);
    if (n <= 0) return total;
    total += static_cast<size_t>(n);
    std::this_thread::sleep_for(pause);
  }
}

class LargeResponseTest : public HttpTransportTest {
 protected:
  static constexpr size_t kBodyBytes = 8 * 1024 * 1024;
  void StartLarge(HttpLimits limits) {
    transport_ = std::make_unique<HttpTransport>(ListenAddress{"127.0.0.1", 0}, limits, [](const HttpRequest&) {
      HttpResponse response;
      response.SetBody(std::string(kBodyBytes, 'x'), "text/plain");
      return response;
    });
    Result<int> port = transport_->Start();
    ASSERT_TRUE(port.ok()) << port.error().message;
    port_ = *port;
  }
};

// The idle limit counts from the last write that moved bytes, not from the
// start of the response: a reader that keeps taking it gets all of it. (The
// server sees progress when the kernel takes more of the response, about each
// third of the socket's send buffer: here every second or so.)
TEST_F(LargeResponseTest, AReaderThatKeepsReadingGetsTheWholeResponse) {
  StartLarge({.response_timeout = seconds(60), .idle_timeout = seconds(3)});
  const int fd = ConnectWithSmallReceiveBuffer(port_);
  ASSERT_GE(fd, 0);
  const std::string request = Get("/large", "Connection: close\r\n");
  ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  // About 2 MB a second: longer than the idle limit in all, never idle for it.
  const size_t received = ReadSlowly(fd, 256 * 1024, milliseconds(50));
  close(fd);
  EXPECT_GT(received, kBodyBytes);  // the head and the whole body
}

// A reader that stops is closed once nothing has moved for the idle limit,
// with the rest of the response unsent.
TEST_F(LargeResponseTest, AReaderThatStopsIsClosed) {
  StartLarge({.response_timeout = seconds(60), .idle_timeout = seconds(1)});
  const int fd = ConnectWithSmallReceiveBuffer(port_);
  ASSERT_GE(fd, 0);
  const std::string request = Get("/large");
  ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  std::this_thread::sleep_for(seconds(3));  // reads nothing for three idle limits
  const size_t received = ReadSlowly(fd, 1024 * 1024, milliseconds(0));
  close(fd);
  EXPECT_LT(received, kBodyBytes);
}

TEST_F(HttpTransportTest, StopsPromptlyWithConnectionsOpen) {
  Start({.request_timeout = seconds(120), .idle_timeout = seconds(120)});
  RawClient idle(port_);
  ASSERT_TRUE(idle.Send(Get("/kept-alive")));
  ASSERT_TRUE(idle.Read());
  RawClient slow(port_);
  ASSERT_TRUE(slow.Send("GET /slow HTTP/1.1\r\n"));
  transport_->Stop();
  EXPECT_TRUE(idle.ClosedWithin(kPatience));
  EXPECT_TRUE(slow.ClosedWithin(kPatience));
  transport_->Stop();  // idempotent
}

TEST_F(HttpTransportTest, RefusesAPortInUse) {
  Start();
  HttpTransport second(ListenAddress{"127.0.0.1", port_}, {}, [](const HttpRequest&) { return HttpResponse{}; });
  Result<int> port = second.Start();
  ASSERT_FALSE(port.ok());
  EXPECT_NE(port.error().message.find(std::to_string(port_)), std::string::npos) << port.error().message;
}

TEST(HttpTransport, ServesConnectionsHandedToItWithoutListening) {
  HttpTransport transport(std::nullopt, {.threads = 1}, [](const HttpRequest& request) {
    HttpResponse response;
    response.SetBody(request.method + " " + request.path, "text/plain");
    return response;
  });
  ASSERT_EQ(transport.Start().value(), 0);
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  ASSERT_TRUE(transport.AddConnection(fds[0]).ok());
  RawClient client(ConnectedSocket{fds[1]});
  ASSERT_TRUE(client.Send(Get("/over-a-socketpair")));
  std::optional<RawResponse> response = client.Read();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->body, "GET /over-a-socketpair");
}

}  // namespace
}  // namespace gpudoctor
