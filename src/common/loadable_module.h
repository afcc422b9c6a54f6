// Parts of gpudoctor that bring heavy libraries with them (the HTTP server
// and its GnuTLS, the webhook client and its OpenSSL) are shared objects of
// their own, loaded by the commands that use them. Every other command starts
// without those libraries: no loading, relocating or initialising them.
//
// A module is found beside the running executable, or in ../lib/gpudoctor/
// from it (an installed layout: /usr/bin/gpudoctor, /usr/lib/gpudoctor/).
// Its entry point is an extern "C" function taking the ABI string below and
// returning its table of functions, or null when it was built for another ABI.
//
//   Result<const HttpServerModule*> module =
//       LoadModule<HttpServerModule>("libgpudoctor_http_server.so", "gpudoctor_http_server_module");
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace gpudoctor {

// A module and the binary that loads it exchange C++ types, so both come from
// the same build of the same version; bump the number when a module's
// interface changes.
inline constexpr const char kModuleAbi[] = "gpudoctor-modules-1";

// Where a module is looked for, first match wins.
std::vector<std::string> ModuleSearchPaths(std::string_view file_name);

// Loads the module (once; later calls return the same entry) and returns its
// entry point. The error names every place looked in and what dlopen said.
Result<void*> LoadModuleEntry(std::string_view file_name, const char* entry_point);

// Loads the module and asks its entry point for its table of functions.
template <typename Table>
Result<const Table*> LoadModule(std::string_view file_name, const char* entry_point) {
  Result<void*> entry = LoadModuleEntry(file_name, entry_point);
  if (!entry) return entry.error();
  const Table* table = reinterpret_cast<const Table* (*)(const char*)>(*entry)(kModuleAbi);
  if (!table) return Error{std::string(file_name) + " belongs to another gpudoctor build: install it with this one"};
  return table;
}

}  // namespace gpudoctor
