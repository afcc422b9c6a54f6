// Runs the built gpudoctor binary and captures what it printed, for
// end-to-end tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <string>

namespace gpudoctor::testing {

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout, and stderr after it when asked for
  std::chrono::milliseconds took{};
};

inline std::string Binary() { return std::string(GPUDOCTOR_BINARY_DIR) + "/bin/gpudoctor"; }
inline std::string Example(const std::string& name) {
  return std::string(GPUDOCTOR_SOURCE_DIR) + "/examples/" + name;
}

enum class Stderr { kDiscard, kCapture };

// Runs `command` through the shell and captures its standard output.
inline RunResult RunShell(const std::string& command) {
  RunResult result;
  auto start = std::chrono::steady_clock::now();
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 65536> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return result;
}

// `arguments` is passed through the shell; callers quote what needs it.
// `prefix` comes before the binary: "timeout 20", "printf x |".
inline RunResult RunGpudoctor(const std::string& arguments, Stderr stderr_mode = Stderr::kDiscard,
                              const std::string& prefix = "") {
  return RunShell(prefix + (prefix.empty() ? "" : " ") + Binary() + " " + arguments +
                  (stderr_mode == Stderr::kCapture ? " 2>&1" : " 2>/dev/null"));
}

}  // namespace gpudoctor::testing
