// The HTTP transport on Boost.Asio's event loops and Boost.Beast's request
// parser: built into libgpudoctor_http_server.so (http_transport_module.h),
// which the agent loads when it starts serving. Neither library brings TLS:
// the agent speaks plain HTTP, and its resident size is a goal.
//
// Each of `limits.threads` workers runs one io_context, so a connection lives
// on one thread and its socket, parser and timer need no lock. Worker 0 also
// accepts and hands each connection to the next worker in turn; it alone
// counts open connections, and stops accepting at the limit until one ends.
#include <fmt/format.h>
#include <netdb.h>
#include <nlohmann/json.hpp>
#include <pthread.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "common/json_text.h"
#include "common/loadable_module.h"
#include "net/http_transport_module.h"

namespace gpudoctor {

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;
using Socket = asio::generic::stream_protocol::socket;
using SteadyTime = std::chrono::steady_clock::time_point;

// Deadlines are about real sockets, so they run on the steady clock, not on an injected one.
SteadyTime SteadyNow() { return std::chrono::steady_clock::now(); }

HttpResponse TransportError(int status, std::string_view message) {
  HttpResponse response{.status = status};
  const nlohmann::json body{{"error", message}};
  response.SetBody(ToJsonText(body), "application/json; charset=utf-8");
  return response;
}

// RFC 9110's IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), whatever the locale.
std::string HttpDate(std::chrono::system_clock::time_point when) {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::time_t seconds = std::chrono::system_clock::to_time_t(when);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  return fmt::format("{}, {:02} {} {} {:02}:{:02}:{:02} GMT", kDays[utc.tm_wday], utc.tm_mday, kMonths[utc.tm_mon],
                     1900 + utc.tm_year, utc.tm_hour, utc.tm_min, utc.tm_sec);
}

bool MayHaveBody(int status) { return status >= 200 && status != 204 && status != 304; }

Result<std::vector<sockaddr_storage>> Resolve(const ListenAddress& listen) {
  addrinfo hints{};
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(listen.port);
  if (int rc = getaddrinfo(listen.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return Error{fmt::format("cannot resolve '{}': {}", listen.host, gai_strerror(rc))};
  }
  std::vector<sockaddr_storage> addresses;
  for (const addrinfo* at = found; at; at = at->ai_next) {
    if (at->ai_family != AF_INET && at->ai_family != AF_INET6) continue;
    sockaddr_storage address{};
    std::memcpy(&address, at->ai_addr, at->ai_addrlen);
    addresses.push_back(address);
  }
  freeaddrinfo(found);
  return addresses;
}

asio::ip::tcp::endpoint EndpointOf(const sockaddr_storage& address) {
  asio::ip::tcp::endpoint endpoint;
  const size_t size = address.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  std::memcpy(endpoint.data(), &address, size);
  endpoint.resize(size);
  return endpoint;
}

// What every connection shares: the limits, the handler, and a way to tell
// the acceptor that a connection it counted has ended.
struct Server {
  HttpLimits limits;
  HttpHandler handler;
  std::function<void()> on_counted_close;  // runs on the connection's thread
};

// One client connection, from its first byte to its close. Every operation
// and its completion run on the connection's worker thread; the pending
// operations' handlers hold the connection alive.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Socket socket, const Server& server, bool counted)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), server_(server), counted_(counted) {}

  ~Connection() {
    if (counted_) server_.on_counted_close();
  }

  void Start() { AwaitRequest(); }

 private:
  static constexpr size_t kReadSize = 4 * 1024;

  const HttpLimits& limits() const { return server_.limits; }

  // A request's line and headers must all arrive within request_timeout of
  // this moment: bytes trickling in do not extend it.
  void AwaitRequest() {
    parser_.emplace();
    head_bytes_ = 0;
    // An idle keep-alive connection holds no buffer: a client that once sent
    // a large head does not keep its memory.
    if (buffer_.size() == 0) buffer_.shrink_to_fit();
    parser_->header_limit(static_cast<uint32_t>(limits().max_request_head_bytes));
    parser_->body_limit(limits().max_request_body_bytes);
    reading_head_ = true;
    phase_deadline_ = SteadyNow() + limits().request_timeout;
    Parse();  // a client may have sent its next request already
  }

  // Parses what is buffered, then reads more, refuses, or answers.
  void Parse() {
    for (;;) {
      if (reading_head_ && parser_->is_header_done()) {
        // Once the head is in: reading the body, answering and sending.
        reading_head_ = false;
        phase_deadline_ = SteadyNow() + limits().response_timeout;
        if (std::optional<HttpResponse> refusal = RefuseHead()) return Refuse(std::move(*refusal));
      }
      if (parser_->is_done()) return Answer();
      if (buffer_.size() == 0) return ReadMore();
      error_code error;
      const size_t used = parser_->put(buffer_.data(), error);
      buffer_.consume(used);
      if (reading_head_) {
        // Beast's header_limit counts only what one call has not parsed yet,
        // so the head as a whole is counted here.
        head_bytes_ += used;
        if (head_bytes_ + buffer_.size() > limits().max_request_head_bytes) error = http::error::header_limit;
      }
      if (error == http::error::need_more || (!error && used == 0)) return ReadMore();
      if (error) return RefuseMalformed(error);
    }
  }

  // Piece by piece, so that each piece counts as activity and the phase's
  // deadline is kept whatever the pieces' pace.
  void ReadMore() {
    ArmTimer();
    socket_.async_read_some(buffer_.prepare(kReadSize), [self = shared_from_this()](error_code error, size_t n) {
      self->last_io_ = SteadyNow();
      if (self->closed_) return;
      // The peer went away (before finishing a request), reset the
      // connection, or a deadline closed it.
      if (error) return self->Close();
      self->buffer_.commit(n);
      self->Parse();
    });
  }

  void RefuseMalformed(error_code error) {
    if (error == http::error::header_limit) {
      // No request line parsed within the limit: the URI is too long.
      return parser_->get().target().empty() ? Refuse(TransportError(414, "request line too long"))
                                             : Refuse(TransportError(431, "request headers too large"));
    }
    if (error == http::error::bad_version) return Refuse(TransportError(505, "only HTTP/1.0 and HTTP/1.1 are served"));
    if (error == http::error::body_limit) return Refuse(TransportError(413, "request body too large"));
    Refuse(TransportError(400, fmt::format("malformed request: {}", error.message())));
  }

  // No route takes a body, so one with no declared length is refused
  // before it is read; one within the limit is read and dropped.
  std::optional<HttpResponse> RefuseHead() const {
    const auto& message = parser_->get();
    if (message.version() != 10 && message.version() != 11) {
      return TransportError(505, "only HTTP/1.0 and HTTP/1.1 are served");
    }
    if (parser_->chunked()) return TransportError(411, "a request body needs a Content-Length");
    return std::nullopt;
  }

  void Answer() {
    const auto& message = parser_->get();
    HttpRequest request{.method = std::string(message.method_string())};
    if (!DecodeTarget(message.target(), request)) {
      return Refuse(TransportError(400, "malformed percent-encoding in the request target"));
    }
    for (const auto& field : message) request.headers.emplace_back(field.name_string(), field.value());
    head_request_ = message.method() == http::verb::head;
    const bool keep_alive = message.keep_alive();
    HttpResponse response;
    try {
      response = server_.handler(request);
    } catch (...) {  // a handler's bug costs one answer, never the server
      response = TransportError(500, "internal error");
    }
    Send(std::move(response), !keep_alive);
  }

  void Refuse(HttpResponse refusal) {
    refused_ = true;
    Send(std::move(refusal), true);
  }

  void Send(HttpResponse response, bool close_after) {
    if (reading_head_) phase_deadline_ = SteadyNow() + limits().response_timeout;  // a refused head
    reading_head_ = false;
    close_after_ = close_after;
    const bool with_body = MayHaveBody(response.status);
    std::string head = fmt::format(
        "HTTP/1.1 {} {}\r\n", response.status,
        std::string_view(http::obsolete_reason(http::int_to_status(static_cast<unsigned>(response.status)))));
    for (const auto& [name, value] : response.headers) head += fmt::format("{}: {}\r\n", name, value);
    if (with_body) head += fmt::format("Content-Length: {}\r\n", response.body.size());
    head += fmt::format("Date: {}\r\n", HttpDate(std::chrono::system_clock::now()));
    if (close_after) head += "Connection: close\r\n";
    head += "\r\n";
    response_head_ = std::move(head);
    response_ = std::move(response);
    if (!with_body || head_request_) response_.body = {};
    sent_ = 0;
    Write();
  }

  // Written piece by piece, so a reader that keeps taking bytes is not idle.
  void Write() {
    const size_t total = response_head_.size() + response_.body.size();
    if (sent_ == total) return OnSent();
    std::array<asio::const_buffer, 2> pieces;
    if (sent_ < response_head_.size()) {
      pieces = {asio::buffer(response_head_.data() + sent_, response_head_.size() - sent_),
                asio::buffer(response_.body.data(), response_.body.size())};
    } else {
      const size_t offset = sent_ - response_head_.size();
      pieces = {asio::buffer(response_.body.data() + offset, response_.body.size() - offset), asio::const_buffer()};
    }
    ArmTimer();
    socket_.async_write_some(pieces, [self = shared_from_this()](error_code error, size_t written) {
      self->last_io_ = SteadyNow();
      if (self->closed_) return;
      if (error) return self->Close();
      self->sent_ += written;
      self->Write();
    });
  }

  void OnSent() {
    response_ = HttpResponse{};  // releases a shared body at once
    response_head_.clear();
    head_request_ = false;
    if (!close_after_) return AwaitRequest();
    if (refused_) return Linger();
    // The request was read whole: nothing unread can reset the connection.
    error_code ignored;
    socket_.shutdown(asio::socket_base::shutdown_send, ignored);
    Close();
  }

  // A refused client may still be sending what it meant to; closing with
  // unread bytes would reset the connection and could destroy the answer
  // before the client reads it. So: end our side, read and drop what comes
  // for a moment, then close.
  void Linger() {
    error_code ignored;
    socket_.shutdown(asio::socket_base::shutdown_send, ignored);
    phase_deadline_ = SteadyNow() + std::chrono::seconds(2);
    Drain();
  }

  void Drain() {
    ArmTimer();
    if (!drain_) drain_ = std::make_unique<std::array<char, 4096>>();
    socket_.async_read_some(asio::buffer(*drain_), [self = shared_from_this()](error_code error, size_t) {
      if (self->closed_) return;
      if (error) return self->Close();
      self->Drain();
    });
  }

  // One timer per connection: the phase's total deadline, or idle_timeout
  // after the last byte moved, whichever comes first.
  void ArmTimer() {
    const SteadyTime idle_end = (last_io_ == SteadyTime{} ? SteadyNow() : last_io_) + limits().idle_timeout;
    timer_.expires_at(std::min(phase_deadline_, idle_end));
    timer_.async_wait([self = shared_from_this()](error_code error) {
      if (!error && !self->closed_ && self->timer_.expiry() <= SteadyNow()) self->Close();
    });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    error_code ignored;
    timer_.cancel();
    socket_.close(ignored);  // the pending read or write completes with an error
                             // and lets go
  }

  Socket socket_;
  asio::steady_timer timer_;
  const Server& server_;
  const bool counted_;
  boost::beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool reading_head_ = true;  // waiting for the request line and headers
  size_t head_bytes_ = 0;  // of this request's head, parsed so far
  SteadyTime phase_deadline_;
  SteadyTime last_io_;
  bool head_request_ = false;
  bool close_after_ = false;
  bool closed_ = false;
  bool refused_ = false;  // answered without reading the whole request
  std::string response_head_;
  HttpResponse response_;
  size_t sent_ = 0;
  std::unique_ptr<std::array<char, 4096>> drain_;  // only while lingering
};

struct Worker {
  asio::io_context context{1};
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(context);
  std::thread thread;
};

class AsioTransport final : public HttpTransportBackend {
 public:
  AsioTransport(std::optional<ListenAddress> listen, HttpLimits limits, HttpHandler handler)
      : listen_(std::move(listen)) {
    limits.threads = std::max<size_t>(1, limits.threads);
    limits.max_connections = std::max<size_t>(1, limits.max_connections);
    server_.limits = limits;
    server_.handler = std::move(handler);
    server_.on_counted_close = [this] {
      if (stopping_) return;  // worker 0 may be gone
      asio::post(workers_.front()->context, [this] { OnConnectionClosed(); });
    };
  }
  ~AsioTransport() override { Stop(); }

  Result<int> Start() override {
    if (!workers_.empty()) return Error{"HTTP server already started"};
    int port = 0;
    for (size_t i = 0; i < server_.limits.threads; ++i) workers_.push_back(std::make_unique<Worker>());
    if (listen_) {
      Result<int> bound = Listen();
      if (!bound) {
        workers_.clear();
        return bound.error();
      }
      port = *bound;
      asio::post(workers_.front()->context, [this] { Accept(); });
    }
    for (size_t i = 0; i < workers_.size(); ++i) {
      Worker& worker = *workers_[i];
      worker.thread = std::thread([&worker] {
        pthread_setname_np(pthread_self(), "gpudoctor-http");
        worker.context.run();
      });
    }
    return port;
  }

  Status AddConnection(int fd) override {
    if (workers_.empty()) {
      close(fd);  // owned from here on, taken or not
      return Error{"the HTTP server is not running"};
    }
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) local.ss_family = AF_UNIX;
    Worker& worker = NextWorker();
    Socket socket(worker.context);
    error_code error;
    socket.assign(asio::generic::stream_protocol(local.ss_family, 0), fd, error);
    if (error) {
      close(fd);  // owned from here on, taken or not
      return Error{fmt::format("the HTTP server cannot take the connection: {}", error.message())};
    }
    auto connection = std::make_shared<Connection>(std::move(socket), server_, false);
    asio::post(worker.context, [connection] { connection->Start(); });
    return {};
  }

  void Stop() override {
    if (workers_.empty()) return;
    stopping_ = true;
    for (auto& worker : workers_) worker->context.stop();
    for (auto& worker : workers_) worker->thread.join();
    acceptor_.reset();
    // Destroying each context destroys the handlers it still holds, and with
    // them the connections and their sockets.
    workers_.clear();
    stopping_ = false;
  }

 private:
  Worker& NextWorker() { return *workers_[next_worker_++ % workers_.size()]; }

  Result<int> Listen() {
    Result<std::vector<sockaddr_storage>> addresses = Resolve(*listen_);
    if (!addresses) return addresses.error();
    for (const sockaddr_storage& address : *addresses) {
      const asio::ip::tcp::endpoint endpoint = EndpointOf(address);
      auto acceptor = std::make_unique<asio::ip::tcp::acceptor>(workers_.front()->context);
      error_code error;
      acceptor->open(endpoint.protocol(), error);
      // SO_REUSEADDR, never SO_REUSEPORT: a second server on the port fails.
      if (!error) acceptor->set_option(asio::socket_base::reuse_address(true), error);
      if (!error && endpoint.address().is_v6()) acceptor->set_option(asio::ip::v6_only(true), error);
      if (!error) acceptor->bind(endpoint, error);
      if (!error) acceptor->listen(server_.limits.listen_backlog, error);
      if (error) continue;
      acceptor_ = std::move(acceptor);
      return acceptor_->local_endpoint().port();
    }
    return Error{fmt::format("cannot bind {}:{} (in use, or not a local address?)", listen_->host, listen_->port)};
  }

  // On worker 0.
  void Accept() {
    Worker& worker = NextWorker();
    acceptor_->async_accept(worker.context, [this, &worker](error_code error, asio::ip::tcp::socket accepted) {
      if (error == asio::error::operation_aborted) return;
      if (error) {
        // Out of descriptors or memory: try again shortly rather than spin.
        RetryAcceptSoon();
        return;
      }
      ++open_;
      // Headers and body leave in one write, but a large body's last segment
      // must not wait for the client's delayed acknowledgement (Nagle).
      error_code ignored;
      accepted.set_option(asio::ip::tcp::no_delay(true), ignored);
      auto connection = std::make_shared<Connection>(Socket(std::move(accepted)), server_, true);
      asio::post(worker.context, [connection] { connection->Start(); });
      if (open_ < server_.limits.max_connections) {
        Accept();
      } else {
        accepting_paused_ = true;  // the rest wait in the listen backlog
      }
    });
  }

  void RetryAcceptSoon() {
    auto timer = std::make_shared<asio::steady_timer>(workers_.front()->context, std::chrono::milliseconds(100));
    timer->async_wait([this, timer](error_code error) {
      if (!error) Accept();
    });
  }

  // On worker 0.
  void OnConnectionClosed() {
    --open_;
    if (accepting_paused_ && acceptor_) {
      accepting_paused_ = false;
      Accept();
    }
  }

  const std::optional<ListenAddress> listen_;
  Server server_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<asio::ip::tcp::acceptor> acceptor_;
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> next_worker_{0};
  size_t open_ = 0;  // worker 0's alone
  bool accepting_paused_ = false;
};

}  // namespace

}  // namespace gpudoctor

extern "C" __attribute__((visibility("default"))) const gpudoctor::HttpServerModule* gpudoctor_http_server_module(
    const char* abi) {
  static constexpr gpudoctor::HttpServerModule kModule{
      .create = [](std::optional<gpudoctor::ListenAddress> listen, gpudoctor::HttpLimits limits,
                   gpudoctor::HttpHandler handler) -> std::unique_ptr<gpudoctor::HttpTransportBackend> {
        return std::make_unique<gpudoctor::AsioTransport>(std::move(listen), limits, std::move(handler));
      }};
  return std::string_view(abi) == gpudoctor::kModuleAbi ? &kModule : nullptr;
}
