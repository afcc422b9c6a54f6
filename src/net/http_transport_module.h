// Between HttpTransport and its implementation on Boost.Asio and Boost.Beast,
// which lives in libgpudoctor_http_server.so (http_transport_asio.cc) so that
// only the commands that serve load its code and start its threads. Not for
// other callers.
#pragma once

#include <memory>
#include <optional>

#include "net/http_transport.h"

namespace gpudoctor {

inline constexpr const char kHttpServerModuleFile[] = "libgpudoctor_http_server.so";
// The entry point, extern "C" const HttpServerModule* (const char* abi): the
// table for that ABI (kModuleAbi), or null.
inline constexpr const char kHttpServerModuleEntry[] = "gpudoctor_http_server_module";

class HttpTransportBackend {
 public:
  virtual ~HttpTransportBackend() = default;
  virtual Result<int> Start() = 0;
  virtual Status AddConnection(int fd) = 0;
  virtual void Stop() = 0;
};

struct HttpServerModule {
  std::unique_ptr<HttpTransportBackend> (*create)(std::optional<ListenAddress> listen, HttpLimits limits,
                                                  HttpHandler handler);
};

}  // namespace gpudoctor
