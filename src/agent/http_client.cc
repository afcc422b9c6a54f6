#include "agent/http_client.h"

#include "agent/http_client_module.h"
#include "common/loadable_module.h"

namespace gpudoctor {

namespace {

Result<const HttpClientModule*> Module() {
  // Loaded once, on first use.
  static const Result<const HttpClientModule*> module =
      LoadModule<HttpClientModule>(kHttpClientModuleFile, kHttpClientModuleEntry);
  return module;
}

}  // namespace

Result<int> PostHttp(const HttpPost& post) {
  Result<const HttpClientModule*> module = Module();
  if (!module) return module.error();
  return (*module)->post(post);
}

Status LoadHttpClient() {
  Result<const HttpClientModule*> module = Module();
  if (!module) return module.error();
  return {};
}

}  // namespace gpudoctor
