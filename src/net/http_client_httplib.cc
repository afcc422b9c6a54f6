// SendHttp's implementation on cpp-httplib (with OpenSSL for https), built
// into libgpudoctor_http_client.so (http_client.h).
#include <httplib.h>

#include <string_view>

#include "common/loadable_module.h"
#include "net/http_client_module.h"

namespace gpudoctor {
namespace {

Result<HttpAnswer> Send(const HttpRequestSpec& request) {
  try {
    httplib::Client client(request.origin);
    if (!client.is_valid()) return Error{request.origin + ": not a URL this client can reach"};
    const auto timeout = std::chrono::duration_cast<std::chrono::microseconds>(request.timeout);
    client.set_connection_timeout(timeout);
    client.set_read_timeout(timeout);
    client.set_write_timeout(timeout);
    httplib::Headers headers;
    for (const auto& [name, value] : request.headers) headers.emplace(name, value);
    HttpAnswer answer;
    bool too_long = false;
    auto receive = [&](const char* data, size_t length) {
      if (answer.body.size() + length > request.max_body_bytes) {
        too_long = true;
        return false;
      }
      answer.body.append(data, length);
      return true;
    };
    httplib::Result result = [&] {
      if (request.method == "POST") {
        httplib::Request post;
        post.method = "POST";
        post.path = request.path;
        post.headers = headers;
        post.body = request.body;
        post.set_header("Content-Type", request.content_type);
        post.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
          return receive(data, length);
        };
        return client.send(post);
      }
      return client.Get(request.path, headers, receive);
    }();
    if (too_long) return Error{request.origin + request.path + ": answer longer than the limit"};
    if (!result) return Error{httplib::to_string(result.error())};
    answer.status = result->status;
    answer.content_type = result->get_header_value("Content-Type");
    return answer;
  } catch (const std::exception& e) {  // httplib throws on some malformed input
    return Error{e.what()};
  }
}

constexpr HttpClientModule kModule{.send = &Send};

}  // namespace
}  // namespace gpudoctor

extern "C" __attribute__((visibility("default"))) const gpudoctor::HttpClientModule* gpudoctor_http_client_module(
    const char* abi) {
  return std::string_view(abi) == gpudoctor::kModuleAbi ? &gpudoctor::kModule : nullptr;
}
