#include "net/http_client.h"

#include "common/loadable_module.h"
#include "net/http_client_module.h"

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
  return (*module)->send(request);
}

Result<int> PostHttp(const HttpPost& post) {
  Result<HttpAnswer> answer = SendHttp({.method = "POST",
                                        .origin = post.origin,
                                        .path = post.path,
                                        .headers = post.headers,
                                        .body = post.body,
                                        .content_type = post.content_type,
                                        .timeout = post.timeout,
                                        .max_body_bytes = 1 << 20});
  if (!answer) return answer.error();
  return answer->status;
}

Status LoadHttpClient() {
  Result<const HttpClientModule*> module = Module();
  if (!module) return module.error();
  return {};
}

Result<std::pair<std::string, std::string>> SplitHttpUrl(const std::string& url) {
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return Error{url + ": not a URL (expected http://HOST:PORT)"};
  std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return Error{url + ": only http and https URLs are supported"};
  size_t path_start = url.find('/', scheme_end + 3);
  std::string origin = url.substr(0, path_start);
  if (origin.size() == scheme_end + 3) return Error{url + ": no host"};
  std::string path = path_start == std::string::npos ? std::string() : url.substr(path_start);
  while (!path.empty() && path.back() == '/') path.pop_back();
  return std::pair{origin, path};
}

}  // namespace gpudoctor
