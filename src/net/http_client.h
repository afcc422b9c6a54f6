// An HTTP or HTTPS client for the webhook sink and for the fleet view's
// queries (Prometheus' HTTP API, agents' /metrics). It runs on cpp-httplib
// and OpenSSL in libgpudoctor_http_client.so, loaded on first use
// (common/loadable_module.h), so a command that never speaks HTTP never loads them.
//
//   Result<int> status = PostHttp({.origin = "https://hooks.example", .path = "/gpu", .body = json});
//   Result<HttpAnswer> page = SendHttp({.method = "GET", .origin = "http://prom:9090",
//                                       .path = "/api/v1/query?query=up"});
//   if (!page) ...;   // no answer: connect, TLS, timeout or an answer over max_body_bytes, with the reason
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace gpudoctor {

struct HttpRequestSpec {
  std::string method = "GET";  // GET or POST
  std::string origin;          // scheme://host[:port]
  std::string path = "/";      // with its query string
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // POST only
  std::string content_type = "application/json";
  Duration timeout = std::chrono::seconds(5);  // each of connect, send, answer
  size_t max_body_bytes = 64 << 20;            // a longer answer is an error, not a truncated body
};

struct HttpAnswer {
  int status = 0;
  std::string body;
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
  Duration timeout = std::chrono::seconds(5);  // each of connect, send, answer
};

// The status code of the answer, or why none came.
Result<int> PostHttp(const HttpPost& post);

// Loads the client now: an agent configured with webhooks checks at start.
Status LoadHttpClient();

// "http://host:9090/prefix" -> origin "http://host:9090" and path prefix "/prefix" ("" when none).
// An error when the text is not an http(s) URL.
Result<std::pair<std::string, std::string>> SplitHttpUrl(const std::string& url);

}  // namespace gpudoctor
