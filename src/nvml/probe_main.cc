// gpudoctor-probe: the NVML probe the hang-proof collector runs (nvml/probe.h).
//
// It is gpudoctor's `__probe` command as a program of its own, linked with
// nothing but the NVML loader: it starts in a few milliseconds and stays a
// few MiB over a bare program that loads NVML, without the HTTP and TLS
// libraries the agent's server needs. gpudoctor runs it from beside itself,
// and re-executes itself as the probe where it is missing.
#include <cstdio>
#include <string_view>

#include "common/build_info.h"
#include "nvml/probe.h"

int main(int argc, char** argv) {
  // For a person (and the man page made from this text); gpudoctor never passes these.
  if (argc == 2 && (std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "--version")) {
    const std::string_view version = gpudoctor::GetBuildInfo().version;
    if (std::string_view(argv[1]) == "--version") {
      std::printf("gpudoctor-probe %.*s\n", static_cast<int>(version.size()), version.data());
      return 0;
    }
    std::printf(
        "Usage: gpudoctor-probe\n"
        "Reads the NVIDIA GPUs through NVML for gpudoctor, which starts it with a deadline and talks to it over\n"
        "pipes it sets up, so that a driver that hangs in NVML hangs this process and never gpudoctor.\n"
        "It is not meant to be run by hand: gpudoctor runs it from its own folder, or runs itself as the probe\n"
        "where this program is missing.\n");
    return 0;
  }
  return gpudoctor::RunProbeCommandLine(argc, argv);
}
