#include "trace_alloc/traced_program.h"

#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "common/text.h"
#include "trace_alloc/elf_symbols.h"

namespace gpudoctor {

ResolvedCommand ResolveCommand(const std::string& name, const std::string& path_variable) {
  auto check = [](const std::string& path) -> std::optional<CommandError> {
    struct stat status;
    if (stat(path.c_str(), &status) != 0) return CommandError{127, path + ": " + std::strerror(errno)};
    if (S_ISDIR(status.st_mode)) return CommandError{126, path + ": is a directory"};
    if (access(path.c_str(), X_OK) != 0) return CommandError{126, path + ": " + std::strerror(errno)};
    return std::nullopt;
  };
  if (name.empty()) return {"", CommandError{127, "an empty command"}};
  if (name.find('/') != std::string::npos) return {name, check(name)};
  std::optional<CommandError> first_refusal;
  const std::string search = path_variable.empty() ? "/usr/local/bin:/usr/bin:/bin" : path_variable;
  for (std::string_view directory : Split(search, ':')) {
    const std::string candidate = (directory.empty() ? std::string(".") : std::string(directory)) + "/" + name;
    struct stat status;
    if (stat(candidate.c_str(), &status) != 0) continue;
    std::optional<CommandError> refusal = check(candidate);
    if (!refusal) return {candidate, std::nullopt};
    if (!first_refusal) first_refusal = refusal;
  }
  if (first_refusal) return {"", first_refusal};
  return {"", CommandError{127, name + ": command not found"}};
}

std::string ProgramStatus::Describe() const {
  if (signal != 0)
    return fmt::format("killed by signal {} ({}){}", signal, strsignal(signal), core_dumped ? ", core dumped" : "");
  return fmt::format("exited with status {}", exit_code);
}

StartedProgram TracedProgram::Start(const std::string& path, const std::vector<std::string>& argv,
                                    const std::vector<std::string>& environment) {
  std::vector<char*> args, env;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : environment) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  // gpudoctor ignores SIGINT and SIGQUIT while the program runs; the program
  // gets every signal's default and an empty mask, as from a shell.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, path.c_str(), nullptr, &attributes, args.data(), env.data());
  posix_spawnattr_destroy(&attributes);
  // posix_spawn returns the exec's error itself; errno says nothing here.
  if (error != 0) return {std::nullopt, CommandError{error == ENOENT ? 127 : 126, path + ": " + std::strerror(error)}};
  return {TracedProgram(pid), std::nullopt};
}

namespace {
ProgramStatus StatusOf(int status) {
  ProgramStatus result;
  if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
    result.core_dumped = WCOREDUMP(status);
  } else {
    result.exit_code = WEXITSTATUS(status);
  }
  return result;
}
}  // namespace

std::optional<ProgramStatus> TracedProgram::Poll() {
  int status = 0;
  pid_t done = waitpid(pid_, &status, WNOHANG);
  while (done < 0 && errno == EINTR) done = waitpid(pid_, &status, WNOHANG);
  if (done != pid_) return std::nullopt;
  return StatusOf(status);
}

ProgramStatus TracedProgram::Wait() {
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  return StatusOf(status);
}

void TracedProgram::Signal(int signal) const { kill(pid_, signal); }

std::vector<std::string> TracedEnvironment(char** base, const std::string& preload,
                                           const std::vector<std::string>& set) {
  std::vector<std::string> environment;
  std::string existing_preload;
  auto name_of = [](std::string_view entry) { return entry.substr(0, entry.find('=')); };
  for (char** entry = base; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::string_view name = name_of(text);
    if (name == "LD_PRELOAD") {
      existing_preload = std::string(text.substr(name.size() + 1));
      continue;
    }
    bool replaced = false;
    for (const std::string& s : set) replaced = replaced || name_of(s) == name;
    if (!replaced) environment.emplace_back(text);
  }
  for (const std::string& s : set) environment.push_back(s);
  if (!preload.empty() || !existing_preload.empty()) {
    std::string value = preload;
    if (!existing_preload.empty()) value += (value.empty() ? "" : ":") + existing_preload;
    environment.push_back("LD_PRELOAD=" + value);
  }
  return environment;
}

std::string WhyPreloadIsIgnored(const std::string& path) {
  std::string program = path;
  // A script: what runs is its interpreter.
  {
    std::ifstream file(path, std::ios::binary);
    char head[2] = {};
    if (file.read(head, 2) && head[0] == '#' && head[1] == '!') {
      std::string line;
      std::getline(file, line);
      const std::string_view trimmed = Trim(line);
      program = std::string(trimmed.substr(0, trimmed.find_first_of(" \t")));
      if (program.empty()) return "";
    }
  }
  struct stat status;
  if (stat(program.c_str(), &status) == 0 && (status.st_mode & (S_ISUID | S_ISGID)) != 0 && getuid() != 0)
    return program + " is set-user-ID or set-group-ID: the dynamic loader ignores LD_PRELOAD for it";
  Result<ElfImage> image = ReadElfFile(program);
  if (!image) return "";
#if defined(__x86_64__)
  constexpr uint16_t kOurMachine = EM_X86_64;
#elif defined(__aarch64__)
  constexpr uint16_t kOurMachine = EM_AARCH64;
#else
  constexpr uint16_t kOurMachine = 0;
#endif
  if (!image->is_64_bit || (kOurMachine != 0 && image->machine != kOurMachine))
    return program + " is built for another architecture than gpudoctor's library (32-bit or another CPU)";
  if (!image->has_interpreter)
    return program + " is statically linked: no dynamic loader runs, so no library can be preloaded into it";
  return "";
}

}  // namespace gpudoctor
