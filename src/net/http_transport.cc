#include "net/http_transport.h"

#include <unistd.h>

#include "net/http_transport_module.h"
#include "common/loadable_module.h"

namespace gpudoctor {

namespace {

Result<const HttpServerModule*> LoadHttpServerModule() {
  // Loaded once, on first use.
  static const Result<const HttpServerModule*> module =
      LoadModule<HttpServerModule>(kHttpServerModuleFile, kHttpServerModuleEntry);
  return module;
}

}  // namespace

class HttpTransport::Impl {
 public:
  Impl(std::optional<ListenAddress> listen, HttpLimits limits, HttpHandler handler) {
    Result<const HttpServerModule*> module = LoadHttpServerModule();
    if (!module) {
      load_error_ = module.error();
      return;
    }
    backend_ = (*module)->create(std::move(listen), limits, std::move(handler));
  }

  std::unique_ptr<HttpTransportBackend> backend_;
  Error load_error_;
};

HttpTransport::HttpTransport(std::optional<ListenAddress> listen, HttpLimits limits, HttpHandler handler)
    : impl_(std::make_unique<Impl>(std::move(listen), limits, std::move(handler))) {}

HttpTransport::~HttpTransport() = default;

Result<int> HttpTransport::Start() {
  if (!impl_->backend_) return impl_->load_error_;
  return impl_->backend_->Start();
}

Status HttpTransport::AddConnection(int fd) {
  if (!impl_->backend_) {
    close(fd);  // owned from here on, taken or not
    return impl_->load_error_;
  }
  return impl_->backend_->AddConnection(fd);
}

void HttpTransport::Stop() {
  if (impl_->backend_) impl_->backend_->Stop();
}

}  // namespace gpudoctor
