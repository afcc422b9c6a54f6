// SendHttp's implementation on libcurl, built into libgpudoctor_http_client.so
// (http_client.h). libcurl gives the whole-exchange deadline, the TLS and the
// protocol; the limits on what the peer sends are enforced here, in the
// callbacks that see every header line and every piece of the body.
#include <curl/curl.h>

#include <fmt/format.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "common/build_info.h"
#include "common/loadable_module.h"
#include "common/text.h"
#include "net/http_client_module.h"

namespace gpudoctor {
namespace {

// Why a transfer was stopped by one of our callbacks, said instead of curl's
// "Failed writing received data".
struct Transfer {
  const HttpRequestSpec& request;
  HttpAnswer answer;
  size_t header_bytes = 0;
  size_t headers = 0;
  size_t body_bytes = 0;
  std::string refusal;
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto& transfer = *static_cast<Transfer*>(user);
  const size_t length = size * count;
  transfer.header_bytes += length;
  ++transfer.headers;
  if (transfer.header_bytes > kMaxAnswerHeaderBytes) {
    transfer.refusal = fmt::format("the answer's headers are longer than {} bytes", kMaxAnswerHeaderBytes);
    return 0;
  }
  if (transfer.headers > kMaxAnswerHeaders) {
    transfer.refusal = fmt::format("the answer has more than {} header lines", kMaxAnswerHeaders);
    return 0;
  }
  (void)data;
  return length;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto& transfer = *static_cast<Transfer*>(user);
  const size_t length = size * count;
  transfer.body_bytes += length;
  if (transfer.body_bytes > transfer.request.max_body_bytes) {
    transfer.refusal = fmt::format("the answer is longer than the limit of {} bytes", transfer.request.max_body_bytes);
    return 0;
  }
  if (transfer.request.on_body) {
    if (!transfer.request.on_body(std::string_view(data, length))) {
      transfer.refusal = "the answer was refused while it was read";
      return 0;
    }
    return length;
  }
  transfer.answer.body.append(data, length);
  return length;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto& transfer = *static_cast<Transfer*>(user);
  if (transfer.request.cancel != nullptr && transfer.request.cancel->load()) {
    transfer.refusal = "cancelled";
    return 1;
  }
  return 0;
}

struct CurlDeleter {
  void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
};
struct ListDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

Result<HttpAnswer> Send(const HttpRequestSpec& request) {
  static std::once_flag initialised;
  static CURLcode init_result = CURLE_OK;
  std::call_once(initialised, [] { init_result = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (init_result != CURLE_OK) return Error{std::string("libcurl: ") + curl_easy_strerror(init_result)};
  std::unique_ptr<CURL, CurlDeleter> handle(curl_easy_init());
  if (!handle) return Error{"libcurl: cannot make a transfer"};
  CURL* curl = handle.get();

  Transfer transfer{request, {}};
  char error_text[CURL_ERROR_SIZE] = {};
  const std::string url = request.origin + request.path;
  const long timeout_ms = std::max<long>(
      1, static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(request.timeout).count()));
  std::unique_ptr<curl_slist, ListDeleter> headers;
  auto add_header = [&headers](const std::string& line) {
    curl_slist* longer = curl_slist_append(headers.get(), line.c_str());
    if (longer != nullptr) {
      (void)headers.release();
      headers.reset(longer);
    }
  };
  for (const auto& [name, value] : request.headers) add_header(name + ": " + value);
  add_header("Expect:");  // no 100-continue round trip for large POST bodies

  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_text);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // many threads; the resolver honours the deadline without signals
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
  static const std::string user_agent = fmt::format("gpudoctor/{}", GetBuildInfo().version);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, user_agent.c_str());
  curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "gzip");  // the body limit counts the bytes after decoding
  curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(request.max_body_bytes));
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, &OnProgress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, request.cancel != nullptr ? 0L : 1L);
  if (!request.user.empty()) {
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
    curl_easy_setopt(curl, CURLOPT_USERNAME, request.user.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, request.password.c_str());
  }
  if (request.method == "POST") {
    add_header("Content-Type: " + request.content_type);
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  } else if (request.method != "GET") {
    return Error{"only GET and POST are sent, not " + request.method};
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers.get());

  const CURLcode result = curl_easy_perform(curl);
  if (!transfer.refusal.empty()) return Error{transfer.refusal};
  if (result == CURLE_OPERATION_TIMEDOUT) {
    return Error{fmt::format("no complete answer within {} (timed out)", FormatDuration(request.timeout))};
  }
  if (result == CURLE_FILESIZE_EXCEEDED) {
    return Error{fmt::format("the answer is longer than the limit of {} bytes", request.max_body_bytes)};
  }
  if (result != CURLE_OK) return Error{error_text[0] != '\0' ? std::string(error_text) : curl_easy_strerror(result)};
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  transfer.answer.status = static_cast<int>(status);
  char* content_type = nullptr;
  if (curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &content_type) == CURLE_OK && content_type != nullptr)
    transfer.answer.content_type = content_type;
  return std::move(transfer.answer);
}

constexpr HttpClientModule kModule{.send = &Send};

}  // namespace
}  // namespace gpudoctor

extern "C" __attribute__((visibility("default"))) const gpudoctor::HttpClientModule* gpudoctor_http_client_module(
    const char* abi) {
  return std::string_view(abi) == gpudoctor::kModuleAbi ? &gpudoctor::kModule : nullptr;
}
