// gpudoctor-probe: the NVML probe the hang-proof collector runs (nvml/probe.h).
//
// It is gpudoctor's `__probe` command as a program of its own, linked with
// nothing but the NVML loader: it starts in a few milliseconds and stays a
// few MiB over a bare program that loads NVML, without the HTTP and TLS
// libraries the agent's server needs. gpudoctor runs it from beside itself,
// and re-executes itself as the probe where it is missing.
#include "nvml/probe.h"

int main(int argc, char** argv) { return gpudoctor::RunProbeCommandLine(argc, argv); }
