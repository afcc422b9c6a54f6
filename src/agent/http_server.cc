#include "agent/http_server.h"

#include <fmt/format.h>

#include "agent/http_routes.h"
#include "common/input_file.h"
#include "common/text.h"

namespace gpudoctor {

Result<ListenAddress> ParseListenAddress(std::string_view text) {
  text = Trim(text);
  ListenAddress address{.port = kDefaultHttpPort};
  std::string_view host = text;
  std::optional<std::string_view> port;
  if (StartsWith(text, "[")) {  // [v6]:port or [v6]
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return Error{fmt::format("bad listen address '{}'", text)};
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return Error{fmt::format("bad listen address '{}'", text)};
      port = rest.substr(1);
    }
  } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    if (text.find(':') != colon) {
      return Error{fmt::format("listen address '{}': write IPv6 addresses as [ADDR]:PORT", text)};
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  address.host = host.empty() ? "0.0.0.0" : std::string(host);
  if (port) {
    std::optional<int> number = ParseInt<int>(*port);
    if (!number || *number < 0 || *number > 65535) {
      return Error{fmt::format("listen address '{}': bad port '{}'", text, *port)};
    }
    address.port = *number;
  }
  if (text.empty()) return Error{"empty listen address"};
  return address;
}

Result<std::string> ReadBearerTokenFile(const std::string& path) {
  auto text = ReadInputFile(path, kMaxBearerTokenFileBytes);
  if (!text) return Error{"cannot read token file " + text.error().message};
  std::string token(Trim(std::string_view(*text).substr(0, text->find('\n'))));
  if (token.empty()) return Error{fmt::format("token file {} is empty", path)};
  return token;
}

class HttpServer::Impl {
 public:
  Impl(HttpServerSources sources, const HttpServerOptions& options, const Clock& clock)
      : routes_(std::move(sources), options, clock),
        transport_(options.listen, options.limits,
                   [this](const HttpRequest& request) { return routes_.Handle(request); }) {}

  AgentRoutes routes_;
  HttpTransport transport_;  // after the routes it calls, so it stops first
};

HttpServer::HttpServer(HttpServerSources sources, HttpServerOptions options, const Clock& clock)
    : impl_(std::make_unique<Impl>(std::move(sources), options, clock)) {}

HttpServer::~HttpServer() = default;

Result<int> HttpServer::Start() { return impl_->transport_.Start(); }

void HttpServer::Stop() { impl_->transport_.Stop(); }

}  // namespace gpudoctor
