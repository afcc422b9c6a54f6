// HttpTransport: the agent's HTTP listener, on Boost.Asio and Boost.Beast. It
// owns the sockets, the event loops and every limit that keeps slow or hostile
// clients from holding the server; what to answer is the handler's business.
//
// A few threads each run an epoll loop over many connections, so a client
// that sends slowly holds a connection slot, never a thread. Each request's
// head must arrive within a total deadline, and each response must be sent
// within another; oversized or malformed requests are answered (400, 411,
// 413, 414, 431, 505), never silently dropped.
//
//   HttpTransport transport(ListenAddress{"127.0.0.1", 0}, HttpLimits{},
//                           [](const HttpRequest& request) { return Answer(request); });
//   Result<int> port = transport.Start();
//   ...
//   transport.Stop();
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "net/http_message.h"
#include "common/clock.h"
#include "common/result.h"

namespace gpudoctor {

struct ListenAddress {
  std::string host;  // "127.0.0.1", "0.0.0.0", "::1", "localhost"
  int port = 0;      // 0: any free port
  bool operator==(const ListenAddress&) const = default;
};

struct HttpLimits {
  // Event-loop threads; a handler that takes long delays only the
  // connections of its own thread.
  size_t threads = 4;
  // Open connections at most; beyond them clients wait in the listen backlog.
  size_t max_connections = 256;
  int listen_backlog = 1024;
  // The request line and headers together (414 or 431 beyond).
  size_t max_request_head_bytes = 16 * 1024;
  // A declared body (413 beyond; a chunked body of unknown length gets 411).
  size_t max_request_body_bytes = 16 * 1024;
  // A request's line and headers must all arrive within this, counted from
  // when the connection begins waiting for it: accepted, or its previous
  // response sent. Bytes trickling in do not extend it.
  Duration request_timeout = std::chrono::seconds(10);
  // Once the head is in: reading the body, answering and sending the response.
  Duration response_timeout = std::chrono::seconds(30);
  // A connection with nothing received or sent for this long is closed
  // (whole seconds): an idle keep-alive connection, a reader that stopped.
  Duration idle_timeout = std::chrono::seconds(5);
};

// Called on an event-loop thread for every complete request.
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

class HttpTransport {
 public:
  // Without `listen`, the transport serves only sockets given to AddConnection.
  HttpTransport(std::optional<ListenAddress> listen, HttpLimits limits, HttpHandler handler);
  ~HttpTransport();  // stops
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Binds (SO_REUSEADDR, not SO_REUSEPORT: a second server on the port fails)
  // and starts the event loops. Returns the bound port, 0 when not listening.
  Result<int> Start();
  // Serves a connected stream socket, which the transport then owns and closes.
  Status AddConnection(int fd);
  // Closes every connection and joins the threads; a handler already running
  // finishes first. Idempotent.
  void Stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpudoctor
