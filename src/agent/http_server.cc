#include "agent/http_server.h"

#include <fmt/format.h>

#include "agent/http_routes.h"

namespace gpudoctor {

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
