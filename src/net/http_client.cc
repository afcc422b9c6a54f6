#include "net/http_client.h"

#include <fmt/format.h>

#include "common/loadable_module.h"
#include "common/text.h"
#include "net/http_client_module.h"
#include "net/http_message.h"
#include "redact/secrets.h"

namespace gpudoctor {

namespace {

Result<const HttpClientModule*> Module() {
  // Loaded once, on first use.
  static const Result<const HttpClientModule*> module =
      LoadModule<HttpClientModule>(kHttpClientModuleFile, kHttpClientModuleEntry);
  return module;
}

}  // namespace

Result<HttpAnswer> SendHttp(const HttpRequestSpec& request) {
  Result<const HttpClientModule*> module = Module();
  if (!module) return module.error();
  Result<HttpAnswer> answer = (*module)->send(request);
  // Whatever the library or the server said, no credential goes on.
  if (!answer) return Error{RedactTextSecrets(answer.error().message)};
  return answer;
}

Result<int> PostHttp(const HttpPost& post) {
  Result<HttpAnswer> answer = SendHttp({.method = "POST",
                                        .origin = post.origin,
                                        .path = post.path,
                                        .headers = post.headers,
                                        .body = post.body,
                                        .content_type = post.content_type,
                                        .timeout = post.timeout,
                                        .max_body_bytes = 1 << 20,
                                        .cancel = post.cancel});
  if (!answer) return answer.error();
  return answer->status;
}

Status LoadHttpClient() {
  Result<const HttpClientModule*> module = Module();
  if (!module) return module.error();
  return {};
}

Result<HttpUrl> ParseHttpUrl(std::string_view url) {
  const std::string shown = RedactTextSecrets(url);
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return Error{shown + ": not a URL (expected http://HOST:PORT)"};
  const std::string scheme = ToLower(url.substr(0, scheme_end));
  if (scheme != "http" && scheme != "https") return Error{shown + ": only http and https URLs are supported"};
  std::string_view rest = url.substr(scheme_end + 3);
  const size_t authority_end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, authority_end);
  std::string_view path = authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);
  HttpUrl out;
  if (const size_t at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view user_info = authority.substr(0, at);
    authority.remove_prefix(at + 1);
    const size_t colon = user_info.find(':');
    std::optional<std::string> user = PercentDecode(user_info.substr(0, colon));
    std::optional<std::string> password =
        colon == std::string_view::npos ? std::string() : PercentDecode(user_info.substr(colon + 1));
    if (!user || !password) return Error{shown + ": the user-info is not percent-encoded properly"};
    if (user->empty()) return Error{shown + ": the user-info names no user"};
    out.user = std::move(*user);
    out.password = std::move(*password);
  }
  if (authority.empty()) return Error{shown + ": no host"};
  for (char c : authority) {
    if (static_cast<unsigned char>(c) <= ' ' || c == '\\' || c == '"' || c == '<' || c == '>' || c == '%')
      return Error{shown + ": the host holds a character a host cannot have"};
  }
  if (const size_t hash = path.find('#'); hash != std::string_view::npos) path = path.substr(0, hash);
  for (char c : path) {
    if (static_cast<unsigned char>(c) <= ' ' || static_cast<unsigned char>(c) == 0x7f)
      return Error{shown + ": the path holds a space or a control character (percent-encode it)"};
  }
  out.origin = scheme + "://" + std::string(authority);
  out.path = std::string(path);
  if (out.path.find('?') == std::string::npos) {
    while (!out.path.empty() && out.path.back() == '/') out.path.pop_back();
  }
  out.shown = shown;
  return out;
}

}  // namespace gpudoctor
