// The HTTP client against servers that misbehave on loopback: every request
// ends by its deadline, and nothing the server sends grows the client past
// its limits.
#include "net/http_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "net/testing/scripted_server.h"

namespace gpudoctor {
namespace {

using testing::ScriptedServer;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

std::string Ok(std::string_view body, std::string_view extra_headers = "") {
  return "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
         std::string(extra_headers) + "Connection: close\r\n\r\n" + std::string(body);
}

TEST(SendHttp, ReadsAnAnswer) {
  ScriptedServer server([](int fd) {
    ScriptedServer::ReadHead(fd);
    ScriptedServer::Send(fd, Ok("hello"));
  });
  Result<HttpAnswer> answer = SendHttp({.origin = server.origin(), .path = "/x"});
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(answer->body, "hello");
  EXPECT_EQ(answer->content_type, "text/plain");
}

// One byte a second would hold a client with per-read timeouts for ever.
TEST(SendHttp, ADrippingServerEndsAtTheDeadline) {
  ScriptedServer server([&](int fd) {
    ScriptedServer::ReadHead(fd);
    const std::string answer = Ok(std::string(1000, 'x'));
    for (char c : answer) {
      if (!ScriptedServer::Send(fd, std::string_view(&c, 1))) return;
      std::this_thread::sleep_for(milliseconds(100));
    }
  });
  const auto start = Clock::now();
  Result<HttpAnswer> answer = SendHttp({.origin = server.origin(), .timeout = milliseconds(700)});
  const auto took = Clock::now() - start;
  ASSERT_FALSE(answer.ok());
  EXPECT_NE(answer.error().message.find("no complete answer within"), std::string::npos) << answer.error().message;
  EXPECT_LT(took, seconds(3));
}

TEST(SendHttp, EndlessHeadersAreRefused) {
  ScriptedServer server([](int fd) {
    ScriptedServer::ReadHead(fd);
    if (!ScriptedServer::Send(fd, "HTTP/1.1 200 OK\r\n")) return;
    const std::string header = "X-Padding: " + std::string(1000, 'p') + "\r\n";
    for (int i = 0; i < 1'000'000; ++i) {
      if (!ScriptedServer::Send(fd, header)) return;
    }
  });
  Result<HttpAnswer> answer = SendHttp({.origin = server.origin(), .timeout = seconds(20)});
  ASSERT_FALSE(answer.ok());
  EXPECT_NE(answer.error().message.find("headers are longer than 65536 bytes"), std::string::npos)
      << answer.error().message;
}

TEST(SendHttp, TooManyHeaderLinesAreRefused) {
  ScriptedServer server([](int fd) {
    ScriptedServer::ReadHead(fd);
    std::string head = "HTTP/1.1 200 OK\r\n";
    for (int i = 0; i < 200; ++i) head += "X-" + std::to_string(i) + ": y\r\n";
    ScriptedServer::Send(fd, head + "Content-Length: 0\r\n\r\n");
  });
  Result<HttpAnswer> answer = SendHttp({.origin = server.origin()});
  ASSERT_FALSE(answer.ok());
  EXPECT_NE(answer.error().message.find("more than 128 header lines"), std::string::npos) << answer.error().message;
}

TEST(SendHttp, ABodyOverTheLimitIsAnErrorNotATruncatedBody) {
  for (bool announced : {true, false}) {
    SCOPED_TRACE(announced ? "with Content-Length" : "chunked");
    ScriptedServer server([announced](int fd) {
      ScriptedServer::ReadHead(fd);
      const std::string body(4096, 'b');
      if (announced) {
        ScriptedServer::Send(fd, Ok(body));
        return;
      }
      ScriptedServer::Send(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
      for (int i = 0; i < 64; ++i) {
        if (!ScriptedServer::Send(fd, "40\r\n" + std::string(64, 'c') + "\r\n")) return;
      }
      ScriptedServer::Send(fd, "0\r\n\r\n");
    });
    Result<HttpAnswer> answer = SendHttp({.origin = server.origin(), .max_body_bytes = 1000});
    ASSERT_FALSE(answer.ok());
    EXPECT_NE(answer.error().message.find("longer than the limit of 1000 bytes"), std::string::npos)
        << answer.error().message;
  }
}

TEST(SendHttp, StreamsTheBodyToItsReaderWhichMayRefuseIt) {
  ScriptedServer server([](int fd) {
    ScriptedServer::ReadHead(fd);
    ScriptedServer::Send(fd, Ok(std::string(100'000, 'z')));
  });
  size_t seen = 0;
  Result<HttpAnswer> streamed = SendHttp({.origin = server.origin(), .on_body = [&](std::string_view piece) {
                                            seen += piece.size();
                                            return true;
                                          }});
  ASSERT_TRUE(streamed.ok()) << streamed.error().message;
  EXPECT_EQ(seen, 100'000u);
  EXPECT_TRUE(streamed->body.empty()) << "nothing kept";
  Result<HttpAnswer> refused =
      SendHttp({.origin = server.origin(), .on_body = [](std::string_view) { return false; }});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("refused while it was read"), std::string::npos) << refused.error().message;
}

TEST(SendHttp, SendsBasicAuthenticationAndNeverShowsThePassword) {
  std::string seen_head;
  ScriptedServer server([&](int fd) {
    seen_head = ScriptedServer::ReadHead(fd);
    ScriptedServer::Send(fd, Ok("ok"));
  });
  Result<HttpUrl> url = ParseHttpUrl("http://ops:s%3Acret@127.0.0.1:" + std::to_string(server.port()) + "/prom/");
  ASSERT_TRUE(url.ok()) << url.error().message;
  EXPECT_EQ(url->user, "ops");
  EXPECT_EQ(url->password, "s:cret");
  EXPECT_EQ(url->path, "/prom");
  EXPECT_EQ(url->shown.find("cret"), std::string::npos) << url->shown;
  Result<HttpAnswer> answer =
      SendHttp({.origin = url->origin, .path = url->path, .user = url->user, .password = url->password});
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  EXPECT_NE(seen_head.find("Authorization: Basic b3BzOnM6Y3JldA=="), std::string::npos) << seen_head;
  EXPECT_NE(seen_head.find("GET /prom HTTP/1.1"), std::string::npos) << seen_head;
}

TEST(SendHttp, ACancelledRequestEndsAtOnce) {
  ScriptedServer server([&](int fd) {
    ScriptedServer::ReadHead(fd);
    char c;
    while (!server.stopping() && recv(fd, &c, 1, MSG_DONTWAIT) != 0) std::this_thread::sleep_for(milliseconds(10));
  });
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(300));
    cancel = true;
  });
  const auto start = Clock::now();
  Result<HttpAnswer> answer = SendHttp({.origin = server.origin(), .timeout = seconds(30), .cancel = &cancel});
  canceller.join();
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.error().message, "cancelled");
  EXPECT_LT(Clock::now() - start, seconds(5));
}

TEST(SendHttp, RedirectsAreNotFollowed) {
  ScriptedServer server([](int fd) {
    ScriptedServer::ReadHead(fd);
    ScriptedServer::Send(fd, "HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/\r\nContent-Length: 0\r\n\r\n");
  });
  Result<HttpAnswer> answer = SendHttp({.origin = server.origin()});
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  EXPECT_EQ(answer->status, 302);
}

TEST(SendHttp, AnErrorNeverCarriesTheUrlsSecrets) {
  // Nothing listens on port 1.
  Result<HttpAnswer> answer =
      SendHttp({.origin = "http://127.0.0.1:1", .path = "/x?token=hunter2", .user = "u", .password = "hunter2"});
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.error().message.find("hunter2"), std::string::npos) << answer.error().message;
}

TEST(ParseHttpUrl, TakesUrlsApart) {
  Result<HttpUrl> plain = ParseHttpUrl("https://prom.example:9090");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->origin, "https://prom.example:9090");
  EXPECT_EQ(plain->path, "");
  EXPECT_EQ(plain->user, "");
  Result<HttpUrl> hook = ParseHttpUrl("HTTP://alerts/hook?team=ml#frag");
  ASSERT_TRUE(hook.ok());
  EXPECT_EQ(hook->origin, "http://alerts");
  EXPECT_EQ(hook->path, "/hook?team=ml");
  EXPECT_EQ(hook->shown.find("team=ml"), std::string::npos) << "query strings are masked: " << hook->shown;
  for (const char* bad : {"", "prom:9090", "ftp://x", "http://", "http:///path", "http://@host", "http://u:%zz@host",
                          "http://ho st/", "http://host/a b"}) {
    EXPECT_FALSE(ParseHttpUrl(bad).ok()) << bad;
  }
  Result<HttpUrl> refused = ParseHttpUrl("gopher://ops:hunter2@host/");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message.find("hunter2"), std::string::npos) << refused.error().message;
}

}  // namespace
}  // namespace gpudoctor
