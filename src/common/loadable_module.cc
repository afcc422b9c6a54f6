#include "common/loadable_module.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <mutex>

namespace gpudoctor {

namespace {

std::string ExecutableDirectory() {
  char buffer[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return ".";
  std::string path(buffer, static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

}  // namespace

std::vector<std::string> ModuleSearchPaths(std::string_view file_name) {
  const std::string directory = ExecutableDirectory();
  const std::string name(file_name);
  return {directory + "/" + name, directory + "/../lib/gpudoctor/" + name};
}

Result<void*> LoadModuleEntry(std::string_view file_name, const char* entry_point) {
  // dlopen and dlerror are thread-safe, but dlerror's message is per thread
  // and the first error is the one worth keeping: one loader at a time.
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  std::string tried;
  for (const std::string& path : ModuleSearchPaths(file_name)) {
    if (access(path.c_str(), F_OK) != 0) {
      tried += "\n  " + path + ": not there";
      continue;
    }
    // Never closed: objects made by the module live as long as the process.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      tried += "\n  " + path + ": " + (why ? why : "cannot be loaded");
      continue;
    }
    void* entry = dlsym(handle, entry_point);
    if (!entry) return Error{path + " has no " + entry_point + ": it is not a gpudoctor module of this kind"};
    return entry;
  }
  return Error{"cannot load " + std::string(file_name) + ", which is installed with gpudoctor:" + tried};
}

}  // namespace gpudoctor
