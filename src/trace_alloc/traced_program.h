// TracedProgram: runs the program `gpudoctor trace-alloc` follows, as a shell
// would run it (PATH search, 127 when the command is not found, 126 when it
// cannot be executed), in gpudoctor's process group and terminal, with
// standard input and output untouched, the preloaded library and the ring's
// descriptor added to its environment.
//
//   ResolvedCommand resolved = ResolveCommand("python3", getenv("PATH"));   // or a 126/127 error
//   StartedProgram started = TracedProgram::Start(resolved.path, argv, environment);  // or a 126/127 error
//   while (!(status = started.program->Poll())) ...;
//   return status->ShellCode();   // the exit status, or 128 + the signal
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace gpudoctor {

struct CommandError {
  int exit_code = 127;  // 127 not found, 126 found but not executable
  std::string message;
};

struct ResolvedCommand {
  std::string path;
  std::optional<CommandError> error;
};

// Finds `name` as execvp would: a name with a slash as it is, else in $PATH.
ResolvedCommand ResolveCommand(const std::string& name, const std::string& path_variable);

struct ProgramStatus {
  int exit_code = 0;  // when it exited
  int signal = 0;     // when a signal ended it
  bool core_dumped = false;
  int ShellCode() const { return signal != 0 ? 128 + signal : exit_code; }
  // "exited with status 0", "killed by signal 15 (Terminated)".
  std::string Describe() const;
};

struct StartedProgram;

class TracedProgram {
 public:
  // `environment` is the whole environment ("NAME=value").
  static StartedProgram Start(const std::string& path, const std::vector<std::string>& argv,
                              const std::vector<std::string>& environment);
  pid_t pid() const { return pid_; }
  // The status once it has ended; nullopt while it runs.
  std::optional<ProgramStatus> Poll();
  // Waits for it to end.
  ProgramStatus Wait();
  void Signal(int signal) const;

 private:
  explicit TracedProgram(pid_t pid) : pid_(pid) {}
  pid_t pid_;
};

// The program running, or why it could not start with a shell's status for
// that (127 when the file or its script's interpreter is missing, else 126).
struct StartedProgram {
  std::optional<TracedProgram> program;
  std::optional<CommandError> error;
};

// The environment for the program: ours, with `preload` put first in
// LD_PRELOAD and each of `set` ("NAME=value") replacing its name.
std::vector<std::string> TracedEnvironment(char** base, const std::string& preload,
                                           const std::vector<std::string>& set);

// Why a preloaded library did not load into the program at `path`: a static
// program, a set-user-ID one, another architecture; a script is judged by its
// interpreter. Empty when nothing in the file explains it.
std::string WhyPreloadIsIgnored(const std::string& path);

}  // namespace gpudoctor
