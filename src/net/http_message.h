// HttpRequest and HttpResponse: what the HTTP transport hands the routes and
// takes back. Plain values with no sockets in them, so the routes are a
// function that tests and the fuzz target call directly.
//
//   HttpResponse Answer(const HttpRequest& request) {
//     if (request.Header("If-None-Match") == etag) return HttpResponse{.status = 304};
//     HttpResponse response;
//     response.SetBody(Render(request.Query("gpu")), "application/json");
//     return response;
//   }
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpudoctor {

using HttpFields = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // as sent: "GET", "HEAD", ...
  std::string path;    // percent-decoded, without the query
  HttpFields query;    // decoded name=value pairs, in order; a bare name has an empty value
  HttpFields headers;  // in order, names as sent

  // The first header of that name, compared case-insensitively.
  std::optional<std::string_view> Header(std::string_view name) const;
  // The first query parameter of that name.
  std::optional<std::string_view> Query(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  HttpFields headers;  // Content-Length and Date are the transport's

  // The body's bytes. They must stay valid while `body_owner` lives, or for
  // the program's lifetime when it is null (files compiled in).
  std::string_view body;
  std::shared_ptr<const void> body_owner;

  void SetHeader(std::string name, std::string value);
  void SetBody(std::string text, std::string content_type);
  // Shares bytes that several responses send at once (a cached /metrics).
  void SetSharedBody(std::shared_ptr<const std::string> text, std::string content_type);
  void SetStaticBody(std::string_view bytes, std::string content_type);
};

// Decodes %XX escapes (and '+' as a space when `plus_is_space`, as in a
// query); nullopt for a '%' not followed by two hex digits.
std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space = false);

// Sets `request`'s path and query from a request target ("/a%20b?gpu=3&flag"):
// the path decoded, the query split into decoded name=value pairs (a bare name
// has an empty value, empty pairs are skipped). False for a malformed escape.
bool DecodeTarget(std::string_view target, HttpRequest& request);

// Whether an Accept-Encoding value (RFC 9110 section 12.5.3) accepts gzip:
// "gzip" or "x-gzip", or "*" when gzip is not named, with a q-value above 0.
bool AcceptsGzip(std::string_view accept_encoding);

}  // namespace gpudoctor
