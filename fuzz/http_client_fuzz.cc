// libFuzzer target for the HTTP client's reading of answers: each input is
// the whole byte stream a server sends back (status line, headers, body, in
// any shape: chunked, gzip, truncated, endless), served on loopback to the
// real SendHttp (libcurl and gpudoctor's limits) twice: once streaming into
// the /metrics reader, once kept whole. Whatever arrives, the client must
// return within its deadline, keep no more than its limits, and not crash.
//
//   fuzz_http_client -max_total_time=300 corpus/ testdata/fuzz_seeds/fuzz_http_client/
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "net/http_client.h"
#include "net/prometheus_text_stream.h"

namespace {

// Answers every connection with the current input, then closes it.
class Server {
 public:
  Server() {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || listen(listener_, 16) != 0)
      std::abort();
    socklen_t length = sizeof address;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    origin_ = "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
    std::thread([this] { Serve(); }).detach();
  }
  void SetAnswer(std::string answer) {
    std::lock_guard lock(mutex_);
    answer_ = std::move(answer);
  }
  const std::string& origin() const { return origin_; }

 private:
  void Serve() {
    for (;;) {
      const int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::string head;
      char c;
      while (head.find("\r\n\r\n") == std::string::npos && head.size() < 65536 && recv(fd, &c, 1, 0) == 1) head += c;
      std::string answer;
      {
        std::lock_guard lock(mutex_);
        answer = answer_;
      }
      std::string_view rest(answer);
      while (!rest.empty()) {
        const ssize_t sent = send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
        if (sent <= 0) break;
        rest.remove_prefix(static_cast<size_t>(sent));
      }
      close(fd);
    }
  }
  int listener_ = -1;
  std::string origin_;
  std::mutex mutex_;
  std::string answer_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpudoctor;
  static Server* server = new Server;  // never destroyed: its thread runs until exit
  server->SetAnswer(std::string(reinterpret_cast<const char*>(data), size));
  constexpr size_t kMaxBody = 1 << 16;

  size_t streamed = 0;
  PromTextStream stream([](std::string_view) { return true; }, [](PromSample) {},
                        {.max_line_bytes = 4096, .max_kept_bytes = 1 << 16});
  Result<HttpAnswer> piecewise = SendHttp({.origin = server->origin(),
                                           .path = "/metrics",
                                           .timeout = std::chrono::seconds(2),
                                           .max_body_bytes = kMaxBody,
                                           .on_body = [&](std::string_view piece) {
                                             streamed += piece.size();
                                             return stream.Feed(piece);
                                           }});
  if (streamed > kMaxBody + (1 << 16)) __builtin_trap();  // no more than one piece past the limit
  if (piecewise && !piecewise->body.empty()) __builtin_trap();
  (void)stream.Finish();

  Result<HttpAnswer> whole = SendHttp({.method = "POST",
                                       .origin = server->origin(),
                                       .path = "/api/v1/query",
                                       .body = "query=up",
                                       .timeout = std::chrono::seconds(2),
                                       .max_body_bytes = kMaxBody});
  if (whole && whole->body.size() > kMaxBody) __builtin_trap();
  return 0;
}
