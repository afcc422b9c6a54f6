// Who may read what gpudoctor serves over HTTP: the agent's API and dashboard,
// and the fleet page. One rule for both:
// - with a bearer token, every path but the public ones (health, the page's
//   static files) needs "Authorization: Bearer TOKEN", else 401;
// - without one, a server bound to a loopback address is for this machine
//   alone: a request whose Host header does not name a loopback address
//   (localhost, 127.0.0.0/8, [::1]) is refused with 403, so a web page on
//   another site cannot read it through DNS rebinding (its requests carry
//   that site's name as Host). A server bound to another address without a
//   token was opened on purpose (an agent Prometheus scrapes) and checks no Host.
//
//   HttpAccess access(token, listen);
//   if (std::optional<HttpResponse> refused = access.Refusal(request, IsPublicPath(request.path))) return *refused;
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "net/http_message.h"
#include "net/http_transport.h"

namespace gpudoctor {

// Parses "HOST:PORT", "[IPv6]:PORT", ":PORT" (all IPv4 interfaces) or
// "HOST" (`default_port`). Port 0 picks a free port.
Result<ListenAddress> ParseListenAddress(std::string_view text, int default_port);

// Whether `host` (an address or name, no port) is this machine's loopback:
// "localhost", 127.0.0.0/8 or ::1.
bool IsLoopbackHost(std::string_view host);

// The largest token file read: a token is one line.
inline constexpr uint64_t kMaxBearerTokenFileBytes = 64 * 1024;

// Reads a bearer token from a file (first line, surrounding space trimmed),
// under the input rule (common/input_file.h). Refuses empty tokens.
Result<std::string> ReadBearerTokenFile(const std::string& path);
// The token in a token file's text, read from `path`: an error when empty.
Result<std::string> BearerTokenOf(std::string_view file_text, const std::string& path);

class HttpAccess {
 public:
  HttpAccess(std::optional<std::string> bearer_token, const ListenAddress& listen)
      : bearer_token_(std::move(bearer_token)), local_only_(!bearer_token_ && IsLoopbackHost(listen.host)) {}

  // nullopt when `request` may be answered; else the answer refusing it.
  std::optional<HttpResponse> Refusal(const HttpRequest& request, bool public_path) const;
  bool has_token() const { return bearer_token_.has_value(); }

 private:
  std::optional<std::string> bearer_token_;
  bool local_only_;
};

}  // namespace gpudoctor
