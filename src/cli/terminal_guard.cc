#include "cli/terminal_guard.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <utility>
#include <string>
#include <string_view>

#include "common/terminal_text.h"

namespace gpudoctor {
namespace {

struct GuardedStream {
  int fd;
  TerminalEscaper escaper;
};

bool WriteAll(int fd, std::string_view text) {
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
  const std::string_view bytes(data, size);
  if (stream->escaper.PassesUnchanged(bytes)) {  // nearly all output: written as it is
    return WriteAll(stream->fd, bytes) ? static_cast<ssize_t>(size) : -1;
  }
  std::string out;
  out.reserve(size);
  stream->escaper.Feed(bytes, out);
  return WriteAll(stream->fd, out) ? static_cast<ssize_t>(size) : -1;
}

// What is held at the end (a sequence cut short by the last write) is written, escaped.
int FinishGuarded(void* cookie) {
  auto* stream = static_cast<GuardedStream*>(cookie);
  std::string out;
  stream->escaper.Finish(out);
  return WriteAll(stream->fd, out) ? 0 : EOF;
}

// The streams live as long as the process: exit() flushes them after main.
GuardedStream g_stdout_stream{STDOUT_FILENO, {}};
GuardedStream g_stderr_stream{STDERR_FILENO, {}};
std::FILE* g_raw_stderr = stderr;
std::FILE* g_guarded_stdout = nullptr;
std::FILE* g_guarded_stderr = nullptr;

std::FILE* Guard(GuardedStream& guarded, int buffering) {
  cookie_io_functions_t functions{};
  functions.write = &WriteGuarded;
  functions.close = &FinishGuarded;
  std::FILE* stream = fopencookie(&guarded, "w", functions);
  if (stream != nullptr) setvbuf(stream, nullptr, buffering, buffering == _IONBF ? 0 : BUFSIZ);
  return stream;
}

void FinishAtExit() {
  for (auto [stream, guarded] : {std::pair{g_guarded_stdout, &g_stdout_stream}, {g_guarded_stderr, &g_stderr_stream}}) {
    if (stream == nullptr) continue;
    std::fflush(stream);
    FinishGuarded(guarded);
  }
}

}  // namespace

void GuardTerminalOutput() {
  if (g_guarded_stdout != nullptr) return;
  std::fflush(stdout);
  std::fflush(stderr);
  g_raw_stderr = stderr;
  g_guarded_stdout = Guard(g_stdout_stream, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF);
  g_guarded_stderr = Guard(g_stderr_stream, _IONBF);
  if (g_guarded_stdout != nullptr) stdout = g_guarded_stdout;
  if (g_guarded_stderr != nullptr) stderr = g_guarded_stderr;
  std::atexit(&FinishAtExit);
}

std::FILE* RawStderr() { return g_raw_stderr; }

int OutputDescriptor(std::FILE* stream) {
  if (stream != nullptr && stream == g_guarded_stdout) return STDOUT_FILENO;
  if (stream != nullptr && stream == g_guarded_stderr) return STDERR_FILENO;
  return stream != nullptr ? fileno(stream) : -1;
}

}  // namespace gpudoctor
