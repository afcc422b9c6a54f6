// An HTTP or HTTPS client for the webhook sink and for the fleet view's
// queries (Prometheus' HTTP API, agents' /metrics). It runs on libcurl in
// libgpudoctor_http_client.so, loaded on first use (common/loadable_module.h),
// so a command that never speaks HTTP never loads libcurl and its TLS library.
//
// The peer is not trusted: every request ends by its deadline (connect, send,
// the answer's headers and body all together), however slowly the answer
// drips; the answer's headers and body are bounded; redirects are not
// followed; and no message carries the URL's credentials or query string.
//
//   Result<int> status = PostHttp({.origin = "https://hooks.example", .path = "/gpu", .body = json});
//   Result<HttpAnswer> page = SendHttp({.method = "GET", .origin = "http://prom:9090",
//                                       .path = "/api/v1/query?query=up"});
//   if (!page) ...;   // no answer: connect, TLS, deadline, limits, with the reason
//   SendHttp({..., .on_body = [&](std::string_view piece) { return parser.Feed(piece); }});  // streamed
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace gpudoctor {

// What an answer may hold, whatever the server sends.
inline constexpr size_t kDefaultMaxAnswerBodyBytes = 64 << 20;
inline constexpr size_t kMaxAnswerHeaderBytes = 64 << 10;  // all header lines together
inline constexpr size_t kMaxAnswerHeaders = 128;

struct HttpRequestSpec {
  std::string method = "GET";  // GET or POST
  std::string origin;          // scheme://host[:port], no user-info
  std::string path = "/";      // with its query string
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // POST only
  std::string content_type = "application/json";
  // Basic authentication (a URL's user-info, see ParseHttpUrl); none when the user is empty.
  std::string user;
  std::string password;
  Duration timeout = std::chrono::seconds(5);  // the whole exchange, from connecting to the body's last byte
  size_t max_body_bytes = kDefaultMaxAnswerBodyBytes;  // a longer answer is an error, not a truncated body
  // When set, the body is handed over in pieces as they arrive and not kept
  // in HttpAnswer::body; returning false refuses the rest (an error).
  std::function<bool(std::string_view piece)> on_body;
  // When set, another thread may end the request at once by storing true.
  const std::atomic<bool>* cancel = nullptr;
};

struct HttpAnswer {
  int status = 0;
  std::string body;  // empty when on_body took it
  std::string content_type;
};

// The answer, whatever its status, or why none came.
Result<HttpAnswer> SendHttp(const HttpRequestSpec& request);

struct HttpPost {
  std::string origin;  // scheme://host[:port]
  std::string path = "/";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string content_type = "application/json";
  Duration timeout = std::chrono::seconds(5);  // the whole exchange
  const std::atomic<bool>* cancel = nullptr;
};

// The status code of the answer, or why none came.
Result<int> PostHttp(const HttpPost& post);

// Loads the client now: an agent configured with webhooks checks at start.
Status LoadHttpClient();

// An http(s) URL taken apart: where to send, the credentials of its
// user-info, and how messages may show it.
struct HttpUrl {
  std::string origin;  // scheme://host[:port], without user-info
  std::string path;    // "/prefix" with any query, no trailing '/'; "" when none
  std::string user;    // user-info, percent-decoded; empty when none
  std::string password;
  std::string shown;  // the URL with user-info and query string masked, for messages
};

// "http://user:pass@host:9090/prefix" -> origin "http://host:9090", path "/prefix",
// user "user", password "pass". An error (without the credentials) when the
// text is not an http(s) URL with a host.
Result<HttpUrl> ParseHttpUrl(std::string_view url);

}  // namespace gpudoctor
