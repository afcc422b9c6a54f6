#include "net/http_access.h"

#include <arpa/inet.h>

#include <fmt/format.h>

#include "common/input_file.h"
#include "common/text.h"

namespace gpudoctor {
namespace {

// Compares in time independent of where the strings differ. A token's length
// is not worth hiding.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// The credentials of an "Authorization: Bearer TOKEN" header. The scheme is
// case-insensitive and followed by one or more spaces (RFC 9110 section 11.4).
std::optional<std::string_view> BearerCredentials(std::string_view header) {
  constexpr std::string_view kScheme = "bearer";
  if (header.size() <= kScheme.size() || !EqualsIgnoreCase(header.substr(0, kScheme.size()), kScheme) ||
      header[kScheme.size()] != ' ') {
    return std::nullopt;
  }
  std::string_view credentials = header.substr(kScheme.size());
  credentials.remove_prefix(std::min(credentials.find_first_not_of(' '), credentials.size()));
  return credentials;
}

// The host of a Host header: "[::1]:9847" -> "::1", "localhost:80" -> "localhost".
std::string_view HostOfHeader(std::string_view header) {
  header = Trim(header);
  if (StartsWith(header, "[")) {
    const size_t close = header.find(']');
    return close == std::string_view::npos ? std::string_view() : header.substr(1, close - 1);
  }
  return header.substr(0, header.find(':'));
}

HttpResponse Refuse(int status, std::string_view message) {
  HttpResponse response;
  response.status = status;
  response.SetBody(fmt::format("{{\"error\":\"{}\"}}", message), "application/json");
  return response;
}

}  // namespace

Result<ListenAddress> ParseListenAddress(std::string_view text, int default_port) {
  text = Trim(text);
  ListenAddress address{.port = default_port};
  std::string_view host = text;
  std::optional<std::string_view> port;
  if (StartsWith(text, "[")) {  // [v6]:port or [v6]
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return Error{fmt::format("bad listen address '{}'", text)};
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return Error{fmt::format("bad listen address '{}'", text)};
      port = rest.substr(1);
    }
  } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    if (text.find(':') != colon) {
      return Error{fmt::format("listen address '{}': write IPv6 addresses as [ADDR]:PORT", text)};
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  address.host = host.empty() ? "0.0.0.0" : std::string(host);
  if (port) {
    std::optional<int> number = ParseInt<int>(*port);
    if (!number || *number < 0 || *number > 65535) {
      return Error{fmt::format("listen address '{}': bad port '{}'", text, *port)};
    }
    address.port = *number;
  }
  if (text.empty()) return Error{"empty listen address"};
  return address;
}

bool IsLoopbackHost(std::string_view host) {
  if (EqualsIgnoreCase(host, "localhost") || EqualsIgnoreCase(host, "localhost.")) return true;
  const std::string text(host);
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

Result<std::string> ReadBearerTokenFile(const std::string& path) {
  auto text = ReadInputFile(path, kMaxBearerTokenFileBytes);
  if (!text) return Error{"cannot read token file " + text.error().message};
  return BearerTokenOf(*text, path);
}

Result<std::string> BearerTokenOf(std::string_view file_text, const std::string& path) {
  std::string token(Trim(file_text.substr(0, file_text.find('\n'))));
  if (token.empty()) return Error{fmt::format("token file {} is empty", path)};
  return token;
}

std::optional<HttpResponse> HttpAccess::Refusal(const HttpRequest& request, bool public_path) const {
  if (local_only_) {
    // Only this machine may ask, and a browser says which site it thinks it asks.
    if (IsLoopbackHost(HostOfHeader(request.Header("Host").value_or("")))) return std::nullopt;
    return Refuse(403,
                  "this server answers only requests to localhost without a bearer token (the Host header names "
                  "another host)");
  }
  if (!bearer_token_ || public_path) return std::nullopt;
  std::optional<std::string_view> credentials = BearerCredentials(request.Header("Authorization").value_or(""));
  if (credentials && ConstantTimeEquals(*credentials, *bearer_token_)) return std::nullopt;
  HttpResponse refused = Refuse(401, "a bearer token is required");
  refused.SetHeader("WWW-Authenticate", "Bearer realm=\"gpudoctor\"");
  return refused;
}

}  // namespace gpudoctor
