// GuardTerminalOutput: from the moment main() calls it, every byte gpudoctor
// writes through stdout and stderr passes through TerminalEscaper
// (common/terminal_text.h), so no text from outside (a log line, a process
// name, an agent's label, a server's error) can drive the terminal, whichever
// command prints it and however. What gpudoctor draws itself with cursor
// movements (diag's live progress) goes to RawStderr() instead.
//
//   GuardTerminalOutput();                        // first thing in main()
//   std::fprintf(stderr, "%s\n", line.c_str());   // escaped
//   std::fprintf(RawStderr(), "\x1b[2A");         // not escaped: for gpudoctor's own drawing only
#pragma once

#include <cstdio>

namespace gpudoctor {

void GuardTerminalOutput();

// The stream behind stderr, unguarded.
std::FILE* RawStderr();

// The descriptor a stream writes to, guarded or not (fileno() of a guarded
// stream is -1): for isatty().
int OutputDescriptor(std::FILE* stream);

}  // namespace gpudoctor
