// CPU time and peak RSS of one full snapshot through the hang-proof collector.
//
//   snapshot_bench GPUDOCTOR_BINARY FAKE_NVML_LIBRARY SCENARIO SNAPSHOTS
// prints "cpu_us_per_snapshot=<n> parent_us=<n> probe_us=<n> parent_max_rss_kb=<n> probe_max_rss_kb=<n>"
// (parent_us and probe_us split the CPU per snapshot between the two processes).
// CPU counts both processes: this one and the probe it talks to.

#include <sys/resource.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "nvml/collector.h"

namespace {

double CpuMicros(const rusage& r) {
  return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 + r.ru_utime.tv_usec + r.ru_stime.tv_usec;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: snapshot_bench GPUDOCTOR_BINARY FAKE_NVML_LIBRARY SCENARIO SNAPSHOTS\n");
    return 64;
  }
  gpudoctor::CollectorOptions options;
  options.probe_executable = argv[1];
  options.library_path = argv[2];
  options.scenario_path = argv[3];
  const int snapshots = std::atoi(argv[4]);
  rusage self_before{}, self_after{}, children{};
  size_t gpus = 0;
  getrusage(RUSAGE_SELF, &self_before);
  {
    gpudoctor::NvmlCollector collector(options);
    for (int i = 0; i < snapshots; ++i) gpus += collector.Collect().gpus.size();
  }
  while (wait(nullptr) > 0) {
  }
  getrusage(RUSAGE_SELF, &self_after);
  getrusage(RUSAGE_CHILDREN, &children);
  if (gpus != static_cast<size_t>(snapshots) * 8) std::fprintf(stderr, "warning: read %zu GPUs in total\n", gpus);
  const double parent = CpuMicros(self_after) - CpuMicros(self_before);
  const double probe = CpuMicros(children);
  std::printf("cpu_us_per_snapshot=%.1f parent_us=%.1f probe_us=%.1f parent_max_rss_kb=%ld probe_max_rss_kb=%ld\n",
              (parent + probe) / snapshots, parent / snapshots, probe / snapshots, self_after.ru_maxrss,
              children.ru_maxrss);
  return 0;
}
