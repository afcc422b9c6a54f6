#include "diag/cublas.h"

#include <dlfcn.h>
#include <glob.h>

#include <fmt/format.h>

#include <cstdlib>

namespace gpudoctor {

namespace {

void AddGlob(const std::string& pattern, std::vector<std::string>& out) {
  glob_t found{};
  if (glob(pattern.c_str(), 0, nullptr, &found) == 0) {
    // Newest version first: glob sorts, so .so.12 comes after .so.11.
    for (size_t i = found.gl_pathc; i > 0; --i) out.emplace_back(found.gl_pathv[i - 1]);
  }
  globfree(&found);
}

}  // namespace

std::vector<std::string> CublasCandidates() {
  std::vector<std::string> candidates = {"libcublas.so.12", "libcublas.so.11", "libcublas.so"};
  AddGlob("/usr/local/cuda/lib64/libcublas.so.*", candidates);
  std::vector<std::string> prefixes;
  for (const char* variable : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char* value = std::getenv(variable); value != nullptr && *value != '\0') prefixes.emplace_back(value);
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') prefixes.push_back(std::string(home) + "/.local");
  for (const char* prefix : {"/usr/local", "/usr", "/opt/conda"}) prefixes.emplace_back(prefix);
  for (const std::string& prefix : prefixes) {
    for (const char* packages : {"site-packages", "dist-packages"})
      AddGlob(fmt::format("{}/lib/python3*/{}/nvidia/cublas/lib/libcublas.so.*", prefix, packages), candidates);
  }
  return candidates;
}

Result<std::unique_ptr<Cublas>> Cublas::Find(const std::string& path) {
  const std::vector<std::string> candidates = path.empty() ? CublasCandidates() : std::vector<std::string>{path};
  std::string tried;
  for (const std::string& candidate : candidates) {
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      if (!path.empty()) {
        const char* error = dlerror();
        return Error{fmt::format("cannot load cuBLAS {}: {}", candidate, error ? error : "unknown reason")};
      }
      tried += (tried.empty() ? "" : ", ") + candidate;
      continue;
    }
    std::unique_ptr<Cublas> library(new Cublas());
    library->handle_ = handle;
    library->path_ = candidate;
    bool complete = true;
#define GPUDOCTOR_RESOLVE(name, ret, params)                                     \
  library->name = reinterpret_cast<ret(*) params>(dlsym(handle, #name));        \
  complete = complete && library->name != nullptr;
    GPUDOCTOR_CUBLAS_FUNCTIONS(GPUDOCTOR_RESOLVE)
#undef GPUDOCTOR_RESOLVE
    if (complete) return library;
    if (!path.empty()) return Error{fmt::format("{} is not a cuBLAS 11 or later (an entry point is missing)", candidate)};
    tried += (tried.empty() ? "" : ", ") + candidate + " (incomplete)";
  }
  return Error{fmt::format("cuBLAS not found (tried {})", tried)};
}

Cublas::~Cublas() {
  if (handle_ != nullptr) dlclose(handle_);
}

}  // namespace gpudoctor
