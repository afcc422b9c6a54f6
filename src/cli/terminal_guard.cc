#include "cli/terminal_guard.h"

#include <unistd.h>

#include <cerrno>
#include <string>

#include "common/terminal_text.h"

namespace gpudoctor {
namespace {

struct GuardedStream {
  int fd;
  TerminalEscaper escaper;
};

bool WriteAll(int fd, const std::string& text) {
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

ssize_t WriteGuarded(void* cookie, const char* data, size_t size) {
  auto* stream = static_cast<GuardedStream*>(cookie);
  std::string out;
  stream->escaper.Feed(std::string_view(data, size), out);
  return WriteAll(stream->fd, out) ? static_cast<ssize_t>(size) : -1;
}

int CloseGuarded(void* cookie) {
  auto* stream = static_cast<GuardedStream*>(cookie);
  std::string out;
  stream->escaper.Finish(out);
  const bool ok = WriteAll(stream->fd, out);
  delete stream;
  return ok ? 0 : EOF;
}

std::FILE* g_raw_stderr = stderr;
std::FILE* g_guarded_stdout = nullptr;
std::FILE* g_guarded_stderr = nullptr;

std::FILE* Guard(int fd, int buffering) {
  cookie_io_functions_t functions{};
  functions.write = &WriteGuarded;
  functions.close = &CloseGuarded;
  std::FILE* stream = fopencookie(new GuardedStream{fd, {}}, "w", functions);
  if (stream != nullptr) setvbuf(stream, nullptr, buffering, buffering == _IONBF ? 0 : BUFSIZ);
  return stream;
}

}  // namespace

void GuardTerminalOutput() {
  if (g_guarded_stdout != nullptr) return;
  std::fflush(stdout);
  std::fflush(stderr);
  g_raw_stderr = stderr;
  g_guarded_stdout = Guard(STDOUT_FILENO, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF);
  g_guarded_stderr = Guard(STDERR_FILENO, _IONBF);
  if (g_guarded_stdout != nullptr) stdout = g_guarded_stdout;
  if (g_guarded_stderr != nullptr) stderr = g_guarded_stderr;
}

std::FILE* RawStderr() { return g_raw_stderr; }

int OutputDescriptor(std::FILE* stream) {
  if (stream != nullptr && stream == g_guarded_stdout) return STDOUT_FILENO;
  if (stream != nullptr && stream == g_guarded_stderr) return STDERR_FILENO;
  return stream != nullptr ? fileno(stream) : -1;
}

}  // namespace gpudoctor
