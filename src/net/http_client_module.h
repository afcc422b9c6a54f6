// Between SendHttp and its implementation on cpp-httplib, which lives in
// libgpudoctor_http_client.so (http_client_httplib.cc) so that only a command
// that speaks HTTP loads cpp-httplib and the OpenSSL it brings. Not for other callers.
#pragma once

#include "net/http_client.h"

namespace gpudoctor {

inline constexpr const char kHttpClientModuleFile[] = "libgpudoctor_http_client.so";
// The entry point, extern "C" const HttpClientModule* (const char* abi): the
// table for that ABI (kModuleAbi), or null.
inline constexpr const char kHttpClientModuleEntry[] = "gpudoctor_http_client_module";

struct HttpClientModule {
  Result<HttpAnswer> (*send)(const HttpRequestSpec& request);
};

}  // namespace gpudoctor
