// ScriptedServer: a server on 127.0.0.1 whose every connection is handed to
// a function that reads and writes the raw socket, for tests of clients
// against peers that misbehave (drip bytes, send endless headers, hang).
//
//   ScriptedServer server([](int fd) { ReadRequest(fd); Send(fd, "HTTP/1.1 200 OK\r\n..."); });
//   SendHttp({.origin = server.origin(), ...});
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace gpudoctor::testing {

class ScriptedServer {
 public:
  explicit ScriptedServer(std::function<void(int fd)> script) : script_(std::move(script)) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    listen(listener_, 64);
    socklen_t length = sizeof address;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~ScriptedServer() {
    stopping_ = true;
    shutdown(listener_, SHUT_RDWR);
    acceptor_.join();
    for (std::thread& connection : connections_) connection.join();
    close(listener_);
  }
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  int port() const { return port_; }
  std::string origin() const { return "http://127.0.0.1:" + std::to_string(port_); }
  bool stopping() const { return stopping_; }

  // Reads a request's head (to the blank line) and returns it; "" when the peer closed.
  static std::string ReadHead(int fd) {
    std::string head;
    char c;
    while (head.find("\r\n\r\n") == std::string::npos && recv(fd, &c, 1, 0) == 1) head += c;
    return head;
  }
  // Sends all of `bytes`; false when the peer is gone.
  static bool Send(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t sent = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (sent <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(sent));
    }
    return true;
  }

 private:
  void Accept() {
    for (;;) {
      const int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      if (stopping_) {
        close(fd);
        return;
      }
      connections_.emplace_back([this, fd] {
        script_(fd);
        close(fd);
      });
    }
  }

  std::function<void(int)> script_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::vector<std::thread> connections_;
};

}  // namespace gpudoctor::testing
