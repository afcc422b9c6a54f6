// CPU time and peak RSS of one full snapshot through the hang-proof collector.
//
//   snapshot_bench GPUDOCTOR_BINARY FAKE_NVML_LIBRARY SCENARIO SNAPSHOTS
// prints "cpu_us_per_snapshot=<n> parent_us=<n> probe_us=<n> start_ms=<n>
// parent_max_rss_kb=<n> probe_max_rss_kb=<n>".
//
// CPU counts both processes: this one and the probe it talks to. Like the
// floor, which starts its clock once NVML is loaded and initialised, the
// figure per snapshot leaves out starting the probe: a first collector takes
// one snapshot and a second takes 1 + SNAPSHOTS, and the difference between
// the two is divided by SNAPSHOTS. start_ms is what the first one cost in all
// (starting the probe, loading NVML, one snapshot): paid once per agent.

#include <sys/resource.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

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
  // One collector taking `count` snapshots, its probe reaped: the CPU this
  // process and the probe used, in microseconds.
  size_t gpus = 0;
  auto run = [&](int count) {
    rusage self_before{}, self_after{}, children_before{}, children_after{};
    getrusage(RUSAGE_SELF, &self_before);
    getrusage(RUSAGE_CHILDREN, &children_before);
    {
      // Refilling one snapshot, as the agent does (SnapshotSource::CollectInto).
      gpudoctor::NvmlCollector collector(options);
      gpudoctor::Snapshot snapshot;
      for (int i = 0; i < count; ++i) {
        collector.CollectInto(snapshot);
        gpus += snapshot.gpus.size();
      }
    }
    while (wait(nullptr) > 0) {
    }
    getrusage(RUSAGE_SELF, &self_after);
    getrusage(RUSAGE_CHILDREN, &children_after);
    return std::pair(CpuMicros(self_after) - CpuMicros(self_before),
                     CpuMicros(children_after) - CpuMicros(children_before));
  };
  const auto [start_parent, start_probe] = run(1);
  const auto [parent, probe] = run(1 + snapshots);
  if (gpus != static_cast<size_t>(snapshots + 2) * 8) std::fprintf(stderr, "warning: read %zu GPUs in total\n", gpus);
  rusage self{}, children{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  const double parent_us = (parent - start_parent) / snapshots;
  const double probe_us = (probe - start_probe) / snapshots;
  std::printf("cpu_us_per_snapshot=%.1f parent_us=%.1f probe_us=%.1f start_ms=%.1f parent_max_rss_kb=%ld "
              "probe_max_rss_kb=%ld\n",
              parent_us + probe_us, parent_us, probe_us, (start_parent + start_probe) / 1000, self.ru_maxrss,
              children.ru_maxrss);
  return 0;
}
