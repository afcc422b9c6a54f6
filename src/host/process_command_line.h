// The command line of a process a GPU names, for the `gpudoctor trace-alloc --
// COMMAND` that memory_leak and memory_high suggest (docs/trace-alloc.md).
//
//   std::vector<std::string> argv = ProcessCommandLine(env, 4242, "python");
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "host/host_env.h"

namespace gpudoctor {

// How a judge reads a process's command line (pid, and the name NVML gave
// it): the argv, or empty when it cannot be read or is not that process.
using ProcessCommandLines = std::function<std::vector<std::string>(uint32_t pid, const std::string& name)>;

// /proc/PID/cmdline when /proc/PID/comm or the program's name matches `name`
// (in a container /proc may hold another process under that number); empty
// otherwise. An empty `name` matches any process.
std::vector<std::string> ProcessCommandLine(const HostEnv& host, uint32_t pid, const std::string& name);

// ProcessCommandLine over `host`, which must outlive the function.
ProcessCommandLines CommandLinesFrom(const HostEnv& host);

}  // namespace gpudoctor
