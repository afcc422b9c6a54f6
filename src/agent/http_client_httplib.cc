// PostHttp's implementation on cpp-httplib (with OpenSSL for https), built
// into libgpudoctor_http_client.so (http_client.h).
#include <httplib.h>

#include <string_view>

#include "agent/http_client_module.h"
#include "common/loadable_module.h"

namespace gpudoctor {
namespace {

Result<int> Post(const HttpPost& post) {
  try {
    httplib::Client client(post.origin);
    if (!client.is_valid()) return Error{post.origin + ": not a URL this client can reach"};
    const auto timeout = std::chrono::duration_cast<std::chrono::microseconds>(post.timeout);
    client.set_connection_timeout(timeout);
    client.set_read_timeout(timeout);
    client.set_write_timeout(timeout);
    httplib::Headers headers;
    for (const auto& [name, value] : post.headers) headers.emplace(name, value);
    httplib::Result result = client.Post(post.path, headers, post.body, post.content_type);
    if (!result) return Error{httplib::to_string(result.error())};
    return result->status;
  } catch (const std::exception& e) {  // httplib throws on some malformed input
    return Error{e.what()};
  }
}

constexpr HttpClientModule kModule{.post = &Post};

}  // namespace
}  // namespace gpudoctor

extern "C" __attribute__((visibility("default"))) const gpudoctor::HttpClientModule* gpudoctor_http_client_module(
    const char* abi) {
  return std::string_view(abi) == gpudoctor::kModuleAbi ? &gpudoctor::kModule : nullptr;
}
