// The HTTP transport on libmicrohttpd: built into libgpudoctor_http_server.so
// (http_transport_module.h), which the agent loads when it starts serving.
#include <fmt/format.h>
#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "net/http_transport_module.h"
#include "net/socket_deadlines.h"
#include "common/loadable_module.h"
#include "common/text.h"

namespace gpudoctor {

namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

// Deadlines are about real sockets and MHD's own timers, so they run on the
// steady clock, not on an injected one.
SteadyTime SteadyNow() { return std::chrono::steady_clock::now(); }

// MHD's per-request pointer holds this once the request's head has arrived.
char head_received_marker;

HttpResponse TransportError(int status, std::string_view json) {
  HttpResponse response{.status = status};
  response.SetStaticBody(json, "application/json; charset=utf-8");
  return response;
}

MHD_Result AppendField(void* fields, MHD_ValueKind, const char* name, size_t name_size, const char* value,
                       size_t value_size) {
  static_cast<HttpFields*>(fields)->emplace_back(std::string(name, name_size),
                                                 value ? std::string(value, value_size) : std::string());
  return MHD_YES;
}

HttpFields FieldsOf(MHD_Connection* connection, MHD_ValueKind kind) {
  HttpFields fields;
  MHD_get_connection_values_n(connection, kind, AppendField, &fields);
  return fields;
}

SocketDeadlines::Watch* WatchOf(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return info ? static_cast<SocketDeadlines::Watch*>(info->socket_context) : nullptr;
}

using BodyOwner = std::shared_ptr<const void>;

void ReleaseBodyOwner(void* owner) { delete static_cast<BodyOwner*>(owner); }

MHD_Result Queue(MHD_Connection* connection, const HttpResponse& response) {
  // MHD sends straight from the body's bytes; this copy of `body_owner` keeps
  // them alive until MHD is done with the response.
  auto* owner = new BodyOwner(response.body_owner);
  MHD_Response* reply = MHD_create_response_from_buffer_with_free_callback_cls(
      response.body.size(), const_cast<char*>(response.body.data()), ReleaseBodyOwner, owner);
  if (!reply) {
    delete owner;
    return MHD_NO;
  }
  for (const auto& [name, value] : response.headers) {
    [[maybe_unused]] const MHD_Result added = MHD_add_response_header(reply, name.c_str(), value.c_str());
    assert(added == MHD_YES);
  }
  const MHD_Result queued = MHD_queue_response(connection, static_cast<unsigned>(response.status), reply);
  MHD_destroy_response(reply);  // MHD keeps its own reference while sending
  return queued;
}

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

class MhdTransport final : public HttpTransportBackend {
 public:
  MhdTransport(std::optional<ListenAddress> listen, HttpLimits limits, HttpHandler handler)
      : listen_(std::move(listen)), limits_(limits), handler_(std::move(handler)) {}
  ~MhdTransport() override { Stop(); }

  Result<int> Start() override {
    if (daemon_) return Error{"HTTP server already started"};
    deadlines_ = std::make_unique<SocketDeadlines>();
    if (!listen_) {
      daemon_ = StartDaemon(nullptr);
      if (!daemon_) return Error{"cannot start the HTTP event loop"};
      return 0;
    }
    Result<std::vector<sockaddr_storage>> addresses = Resolve(*listen_);
    if (!addresses) return addresses.error();
    for (const sockaddr_storage& address : *addresses) {
      daemon_ = StartDaemon(&address);
      if (daemon_) return MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT)->port;
    }
    return Error{fmt::format("cannot bind {}:{} (in use, or not a local address?)", listen_->host, listen_->port)};
  }

  Status AddConnection(int fd) override {
    assert(daemon_ && "AddConnection before Start");
    sockaddr_storage peer{};
    socklen_t length = sizeof peer;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) length = sizeof(sa_family_t);
    // MHD closes the socket whether or not it takes the connection.
    if (MHD_add_connection(daemon_, fd, reinterpret_cast<sockaddr*>(&peer), length) != MHD_YES) {
      return Error{"the HTTP server cannot take another connection"};
    }
    return {};
  }

  void Stop() override {
    if (!daemon_) return;
    MHD_stop_daemon(daemon_);  // every connection's CLOSED notification has run when this returns
    daemon_ = nullptr;
    deadlines_.reset();
  }

 private:
  MHD_Daemon* StartDaemon(const sockaddr_storage* address) {
    const auto seconds = [](Duration d) {
      return static_cast<intptr_t>(std::max<int64_t>(1, std::chrono::ceil<std::chrono::seconds>(d).count()));
    };
    std::vector<MHD_OptionItem> options = {
        {MHD_OPTION_THREAD_POOL_SIZE, static_cast<intptr_t>(limits_.threads), nullptr},
        {MHD_OPTION_CONNECTION_LIMIT, static_cast<intptr_t>(limits_.max_connections), nullptr},
        {MHD_OPTION_LISTEN_BACKLOG_SIZE, limits_.listen_backlog, nullptr},
        // The pool that holds the request line and headers: past it, 414 or 431.
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<intptr_t>(limits_.max_request_head_bytes), nullptr},
        {MHD_OPTION_CONNECTION_TIMEOUT, seconds(limits_.idle_timeout), nullptr},
        {MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&OnConnection), this},
        {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&OnRequestDone), this},
    };
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC;
    if (address) {
      // MHD binds with SO_REUSEADDR and, without MHD_OPTION_LISTENING_ADDRESS_REUSE, never SO_REUSEPORT.
      options.push_back({MHD_OPTION_SOCK_ADDR, 0, const_cast<sockaddr_storage*>(address)});
      if (address->ss_family == AF_INET6) flags |= MHD_USE_IPv6;  // IPv6 only, not dual-stack
    } else {
      flags |= MHD_USE_NO_LISTEN_SOCKET;
    }
    options.push_back({MHD_OPTION_END, 0, nullptr});
    return MHD_start_daemon(flags, 0, nullptr, nullptr, &OnRequest, this, MHD_OPTION_ARRAY, options.data(),
                            MHD_OPTION_END);
  }

  // A new connection waits for its first request's head; CLOSED comes before
  // MHD closes the socket (MHD_cleanup_connections in daemon.c, 0.9.75), so
  // once Forget returns no shutdown() can reach a reused descriptor number.
  static void OnConnection(void* cls, MHD_Connection* connection, void** socket_context,
                           MHD_ConnectionNotificationCode code) {
    MhdTransport& self = *static_cast<MhdTransport*>(cls);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      const int fd = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD)->connect_fd;
      *socket_context = self.deadlines_->Add(fd, SteadyNow() + self.limits_.request_timeout);
    } else if (*socket_context) {
      self.deadlines_->Forget(static_cast<SocketDeadlines::Watch*>(*socket_context));
      *socket_context = nullptr;
    }
  }

  // After a response (or an aborted one) the connection waits for the next head.
  static void OnRequestDone(void* cls, MHD_Connection* connection, void** request_context, MHD_RequestTerminationCode) {
    MhdTransport& self = *static_cast<MhdTransport*>(cls);
    *request_context = nullptr;
    if (SocketDeadlines::Watch* watch = WatchOf(connection)) {
      self.deadlines_->Move(watch, SteadyNow() + self.limits_.request_timeout);
    }
  }

  // MHD calls this once the head is in, then once per piece of body, then once
  // more with nothing left to read; a response queued on that last call keeps
  // the connection alive, one queued on the first closes it after sending.
  static MHD_Result OnRequest(void* cls, MHD_Connection* connection, const char* url, const char* method,
                              const char* /*version*/, const char* /*upload_data*/, size_t* upload_data_size,
                              void** request_context) {
    MhdTransport& self = *static_cast<MhdTransport*>(cls);
    if (*request_context == nullptr) {
      *request_context = &head_received_marker;
      if (SocketDeadlines::Watch* watch = WatchOf(connection)) {
        self.deadlines_->Move(watch, SteadyNow() + self.limits_.response_timeout);
      }
      if (std::optional<HttpResponse> refusal = self.RefuseBody(connection)) return Queue(connection, *refusal);
      return MHD_YES;
    }
    if (*upload_data_size > 0) {  // a body within the limit: read and dropped, as no route takes one
      *upload_data_size = 0;
      return MHD_YES;
    }
    return Queue(connection, self.Answer(connection, url, method));
  }

  // No route takes a body, so any body beyond a small one is refused before
  // it is read; what MHD lets through of a malformed length counts as too large.
  std::optional<HttpResponse> RefuseBody(MHD_Connection* connection) const {
    std::optional<std::string> length;
    bool has_transfer_encoding = false;
    for (const auto& [name, value] : FieldsOf(connection, MHD_HEADER_KIND)) {
      if (EqualsIgnoreCase(name, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        if (length && *length != value) return TransportError(400, R"({"error":"conflicting Content-Length"})");
        length = value;
      } else if (EqualsIgnoreCase(name, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
        has_transfer_encoding = true;
      }
    }
    if (length) {
      std::optional<uint64_t> bytes = ParseInt<uint64_t>(*length);
      if (!bytes || *bytes > limits_.max_request_body_bytes) {
        return TransportError(413, R"({"error":"request body too large"})");
      }
    } else if (has_transfer_encoding) {
      return TransportError(411, R"({"error":"a request body needs a Content-Length"})");
    }
    return std::nullopt;
  }

  HttpResponse Answer(MHD_Connection* connection, const char* url, const char* method) const {
    const HttpRequest request{.method = method,
                              .path = url,
                              .query = FieldsOf(connection, MHD_GET_ARGUMENT_KIND),
                              .headers = FieldsOf(connection, MHD_HEADER_KIND)};
    try {
      return handler_(request);
    } catch (...) {  // an exception must not unwind through MHD's C frames
      return TransportError(500, R"({"error":"internal error"})");
    }
  }

  const std::optional<ListenAddress> listen_;
  const HttpLimits limits_;
  const HttpHandler handler_;
  std::unique_ptr<SocketDeadlines> deadlines_;
  MHD_Daemon* daemon_ = nullptr;
};

}  // namespace

}  // namespace gpudoctor

extern "C" __attribute__((visibility("default"))) const gpudoctor::HttpServerModule* gpudoctor_http_server_module(
    const char* abi) {
  static constexpr gpudoctor::HttpServerModule kModule{
      .create = [](std::optional<gpudoctor::ListenAddress> listen, gpudoctor::HttpLimits limits,
                   gpudoctor::HttpHandler handler) -> std::unique_ptr<gpudoctor::HttpTransportBackend> {
        return std::make_unique<gpudoctor::MhdTransport>(std::move(listen), limits, std::move(handler));
      }};
  return std::string_view(abi) == gpudoctor::kModuleAbi ? &kModule : nullptr;
}
