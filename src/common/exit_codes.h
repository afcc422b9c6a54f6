// Exit statuses shared by every command (sysexits.h values where they fit;
// `check` and `triage` use the Nagios/NHC convention 0-3 instead), and the
// error an input carries with the status to exit with. docs/exit-codes.md
// documents each command's use of them.
#pragma once

#include <string>

namespace gpudoctor {

namespace exit_code {
inline constexpr int kOk = 0;
inline constexpr int kUsage = 64;          // bad command line
inline constexpr int kDataError = 65;      // input file unreadable as any known format
inline constexpr int kNoInput = 66;        // input file missing or unreadable
inline constexpr int kUnavailable = 69;    // no NVIDIA driver / NVML library, or NVML failed to start
inline constexpr int kInternal = 70;       // a bug: please report it
inline constexpr int kCannotCreate = 73;   // output file could not be written
}  // namespace exit_code

// An input that cannot be used, with the exit status to use with its message.
struct SourceError {
  std::string message;
  int exit_code;
};

}  // namespace gpudoctor
