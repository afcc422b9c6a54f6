// PostHttp: one HTTP or HTTPS POST, for the webhook sink. It runs on
// cpp-httplib and OpenSSL in libgpudoctor_http_client.so, loaded on first use
// (common/loadable_module.h), so an agent without webhooks never loads them.
//
//   Result<int> status = PostHttp({.origin = "https://hooks.example", .path = "/gpu", .body = json});
//   if (!status) ...;   // no answer: connect, TLS or timeout, with the reason
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace gpudoctor {

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

}  // namespace gpudoctor
