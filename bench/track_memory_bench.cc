// The trend detectors' history: heap bytes held by TrendDetectors once its
// window is full, fed as the agent feeds it (Observe, then Evaluate, every
// interval) with the snapshots of 8 H100 SXM GPUs in training, and the CPU
// time of one Observe and Evaluate at that point. Built from another checkout
// too, it measures that checkout's history the same way.
//
//   build/bin/track_memory_bench [--minutes 40] [--gpus 8] [--interval-ms 1000]
//
// Three runs: with the training process's memory readings (the memory_leak
// detector keeps a series of them per process); without them, which leaves
// the GPU points alone; and without them on GPUs whose error counters move at
// every sample (a failing link: the detectors report it). Heap bytes are
// mallinfo2()'s in-use bytes (uordblks + hblkhd, malloc's chunk overhead
// included) after minus before.
// Results go in docs/benchmarks.md ("Where the agent's resident memory goes").
#include <malloc.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#include "health/detectors/trend_detectors.h"

namespace {

using namespace gpudoctor;

size_t HeapInUse() {
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct Scenario {
  const char* name;
  bool process_memory;   // the process's memory is reported
  bool moving_counters;  // the error counters count up at every sample
};

// GPU `i` of an 8x H100 SXM5 node training at second `t`: NVML's whole-number utilisation and temperature,
// power in milliwatts, GPM activity, no fans, error counters, 18 NVLinks, one process.
GpuSnapshot H100At(uint32_t i, double t, const Scenario& scenario) {
  GpuSnapshot gpu;
  gpu.index = i;
  gpu.uuid = Field<std::string>::Value("GPU-5a1e7c3d-0000-4000-8000-00000000000" + std::to_string(i));
  gpu.pci_bus_id = Field<std::string>::Value("00000000:" + std::to_string(18 + 16 * i) + ":00.0");
  auto whole = [](double value) { return Field<uint32_t>::Value(static_cast<uint32_t>(std::lround(value))); };
  gpu.utilization_gpu_percent = whole(95 + 4 * std::sin(t / 13 + i));
  gpu.temperature_c = whole(63 + 2 * std::sin(t / 300 + i));
  gpu.power_draw_w = Field<double>::Value(std::round(612000 + 25000 * std::sin(t / 7 + i)) / 1000);
  gpu.power_limit_w = Field<double>::Value(700);
  gpu.gpm_sm_active = Field<double>::Value(0.88 + 0.03 * std::sin(t / 11 + i));
  gpu.gpm_tensor_active = Field<double>::Value(0.52 + 0.05 * std::sin(t / 17 + i));
  gpu.memory_total_bytes = Field<uint64_t>::Value(80ull << 30);
  gpu.memory_used_bytes = Field<uint64_t>::Value(70112ull << 20);
  const uint64_t count = scenario.moving_counters ? static_cast<uint64_t>(t) : 0;
  gpu.ecc_volatile_corrected = Field<uint64_t>::Value(count);
  gpu.ecc_volatile_uncorrected = Field<uint64_t>::Value(0);
  gpu.pcie_replay_count = Field<uint64_t>::Value(count);
  std::vector<NvLinkInfo> links(18);
  for (uint32_t link = 0; link < links.size(); ++link) {
    links[link].link = link;
    links[link].active = Field<bool>::Value(true);
    for (Field<uint64_t>* counter : {&links[link].replay_errors, &links[link].recovery_errors,
                                     &links[link].crc_flit_errors, &links[link].crc_data_errors})
      *counter = Field<uint64_t>::Value(link == 0 ? count : 0);
  }
  gpu.nvlinks = Field<std::vector<NvLinkInfo>>::Value(std::move(links));
  ProcessInfo process{.pid = 51877 + i, .name = "python3"};
  if (scenario.process_memory) process.used_memory_bytes = Field<uint64_t>::Value(70112ull << 20);
  gpu.processes = Field<std::vector<ProcessInfo>>::Value({process});
  return gpu;
}

struct Held {
  size_t points_per_gpu = 0;
  size_t heap_bytes = 0;
  double cpu_us_per_tick = 0;  // one Observe and one Evaluate, over the last minute
  size_t findings = 0;         // at the last tick
};

Held Run(int minutes, uint32_t gpus, std::chrono::milliseconds interval, const Scenario& scenario) {
  const WallTime start{std::chrono::seconds{1'700'000'000}};
  const int ticks = static_cast<int>(std::chrono::minutes(minutes) / interval);
  const int timed = static_cast<int>(std::chrono::minutes(1) / interval);
  const size_t before = HeapInUse();
  Held result;
  {
    TrendDetectors detectors({});
    double cpu = 0;
    for (int tick = 0; tick < ticks; ++tick) {
      const WallTime now = start + tick * interval;
      const double t = std::chrono::duration<double>(now - start).count();
      Snapshot snapshot;
      snapshot.taken_at = now;
      for (uint32_t i = 0; i < gpus; ++i) snapshot.gpus.push_back(H100At(i, t, scenario));
      const double cpu_start = CpuSeconds();
      detectors.Observe(snapshot, now);
      result.findings = detectors.Evaluate(now).size();
      if (tick >= ticks - timed) cpu += CpuSeconds() - cpu_start;
    }
    result.heap_bytes = HeapInUse() - before;
    result.points_per_gpu = detectors.Track(0)->points.size();
    result.cpu_us_per_tick = cpu / timed * 1e6;
  }
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  int minutes = 40;
  uint32_t gpus = 8;
  std::chrono::milliseconds interval{1000};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long value = std::strtol(argv[i + 1], nullptr, 10);
    if (flag == "--minutes") minutes = static_cast<int>(value);
    else if (flag == "--gpus") gpus = static_cast<uint32_t>(value);
    else if (flag == "--interval-ms") interval = std::chrono::milliseconds(value);
    else {
      std::fprintf(stderr, "usage: %s [--minutes N] [--gpus N] [--interval-ms N]\n", argv[0]);
      return 2;
    }
  }
  std::printf("%u GPUs, one snapshot every %lld ms for %d minutes; sizeof(GpuPoint) = %zu\n", gpus,
              static_cast<long long>(interval.count()), minutes, sizeof(GpuPoint));
  for (const Scenario& scenario : {Scenario{"with per-process memory series", true, false},
                                   Scenario{"GPU points only", false, false},
                                   Scenario{"GPU points, counters moving", false, true}}) {
    const Held r = Run(minutes, gpus, interval, scenario);
    std::printf("%-31s %5zu points/GPU %8zu bytes held (%.2f MiB, %5.1f a point) %4.0f us CPU a tick, %zu findings\n",
                scenario.name, r.points_per_gpu, r.heap_bytes, static_cast<double>(r.heap_bytes) / (1 << 20),
                static_cast<double>(r.heap_bytes) / static_cast<double>(r.points_per_gpu * gpus), r.cpu_us_per_tick,
                r.findings);
  }
  return 0;
}
