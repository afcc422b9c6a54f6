// store_bench: how large the SQLite history grows and how fast it takes
// samples. Simulates N days of G GPUs sampled every S seconds on a fake clock,
// running Maintain once a simulated minute as the agent does, at the default
// retention (raw 7 days, 1-minute and 1-hour buckets 90 days).
//
//   store_bench                      30 days, 8 GPUs, 5 s, one process per GPU
//   store_bench --days 2 --gpus 4    a quicker run
//   store_bench --db /tmp/h.db --keep
//
// Prints the file size at the end (and at each simulated week), the rows per
// table, insert throughput and Maintain latency. Results: docs/benchmarks.md.

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/clock.h"
#include "store/sqlite_store.h"

namespace gpudoctor {
namespace {

struct Options {
  int days = 30;
  int gpus = 8;
  int interval_s = 5;
  int processes = 1;
  std::string db;
  bool keep = false;
};

uint64_t FileBytes(const std::string& path) {
  std::error_code error;
  uint64_t total = 0;
  for (const char* suffix : {"", "-wal", "-shm"}) {
    auto size = std::filesystem::file_size(path + suffix, error);
    if (!error) total += size;
  }
  return total;
}

double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// Readings that move like a busy training node: noisy temperatures, power
// with milliwatt precision, counters that rarely change.
GpuSample Simulate(uint32_t gpu, WallTime t, int64_t step) {
  const double phase = static_cast<double>(step) / 97.0 + gpu;
  GpuSample sample;
  sample.time = t;
  sample.gpu_index = gpu;
  sample.uuid = "GPU-" + std::to_string(gpu) + "b6d5c3e-91a4-4f7e-8f21-0c9d5e6a7b8c";
  sample[Metric::kTemperatureC] = std::round(68 + 6 * std::sin(phase));
  sample[Metric::kMemoryTemperatureC] = std::round(74 + 5 * std::sin(phase / 2));
  sample[Metric::kPowerW] = std::round((520 + 120 * std::sin(phase * 3)) * 1000) / 1000;
  sample[Metric::kUtilizationGpuPercent] = std::round(std::clamp(92 + 10 * std::sin(phase * 5), 0.0, 100.0));
  sample[Metric::kUtilizationMemoryPercent] = std::round(40 + 20 * std::sin(phase * 7));
  sample[Metric::kMemoryUsedBytes] = 60e9 + std::round(4e9 * std::sin(phase / 3) / 1048576) * 1048576;
  sample[Metric::kMemoryTotalBytes] = 85899345920.0;
  sample[Metric::kFanPercent] = std::nullopt;  // liquid-cooled HGX: no fans
  sample[Metric::kSmClockMhz] = std::round(1980 - 5 * (step % 7));
  sample[Metric::kMemoryClockMhz] = 2619;
  sample[Metric::kEccCorrected] = static_cast<double>(step / 200000);
  sample[Metric::kEccUncorrected] = 0;
  sample[Metric::kPcieReplays] = static_cast<double>(step / 50000);
  sample[Metric::kNvlinkErrors] = 0;
  sample[Metric::kXidEvents] = 0;
  return sample;
}

int64_t CountRows(const std::string& path, const char* table) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* statement = nullptr;
  int64_t rows = -1;
  if (sqlite3_prepare_v2(db, (std::string("SELECT count(*) FROM ") + table).c_str(), -1, &statement, nullptr) ==
          SQLITE_OK &&
      sqlite3_step(statement) == SQLITE_ROW)
    rows = sqlite3_column_int64(statement, 0);
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return rows;
}

int Run(const Options& options) {
  const std::string path = options.db.empty()
                               ? (std::filesystem::temp_directory_path() /
                                  ("gpudoctor-store-bench-" + std::to_string(getpid()) + ".db"))
                                     .string()
                               : options.db;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);

  FakeClock clock;
  auto store = SqliteHistoryStore::Open(path, {}, clock.Now());
  if (!store) {
    std::fprintf(stderr, "store_bench: %s\n", store.error().message.c_str());
    return 1;
  }
  using Seconds = std::chrono::duration<double>;
  const auto wall_start = std::chrono::steady_clock::now();
  Seconds insert_time{0}, maintain_time{0}, maintain_max{0};
  int64_t snapshots = 0, gpu_rows = 0, process_rows = 0, maintains = 0;
  const int64_t steps = int64_t{options.days} * 86400 / options.interval_s;
  const int64_t steps_per_minute = std::max<int64_t>(1, 60 / options.interval_s);
  const int64_t steps_per_week = int64_t{7} * 86400 / options.interval_s;

  std::printf("simulating %d days of %d GPUs every %d s (%d process(es) per GPU) into %s\n", options.days,
              options.gpus, options.interval_s, options.processes, path.c_str());
  std::vector<GpuSample> gpus;
  std::vector<ProcessMemorySample> processes;
  for (int64_t step = 0; step < steps; ++step) {
    clock.Advance(std::chrono::seconds(options.interval_s));
    gpus.clear();
    processes.clear();
    for (uint32_t gpu = 0; gpu < static_cast<uint32_t>(options.gpus); ++gpu) {
      gpus.push_back(Simulate(gpu, clock.Now(), step));
      for (int p = 0; p < options.processes; ++p)
        processes.push_back({clock.Now(), gpu, gpus.back().uuid, static_cast<uint32_t>(41000 + gpu * 8 + p),
                             "python3", static_cast<uint64_t>(*gpus.back()[Metric::kMemoryUsedBytes]) / 2});
    }
    const auto before = std::chrono::steady_clock::now();
    if (Status status = (*store)->Append(gpus, processes); !status) {
      std::fprintf(stderr, "store_bench: append: %s\n", status.error().message.c_str());
      return 1;
    }
    insert_time += std::chrono::steady_clock::now() - before;
    ++snapshots;
    gpu_rows += static_cast<int64_t>(gpus.size());
    process_rows += static_cast<int64_t>(processes.size());

    if (step % steps_per_minute == 0) {
      const auto start = std::chrono::steady_clock::now();
      auto report = (*store)->Maintain(clock.Now());
      if (!report) {
        std::fprintf(stderr, "store_bench: maintain: %s\n", report.error().message.c_str());
        return 1;
      }
      const Seconds took = std::chrono::steady_clock::now() - start;
      maintain_time += took;
      maintain_max = std::max(maintain_max, took);
      ++maintains;
    }
    if ((step + 1) % steps_per_week == 0) {
      std::printf("  day %3lld: file %.1f MiB\n", static_cast<long long>((step + 1) * options.interval_s / 86400),
                  MiB(FileBytes(path)));
      std::fflush(stdout);
    }
  }
  auto used = (*store)->UsedBytes();
  store->reset();  // closes the file: checkpoints and truncates the WAL
  const Seconds wall = std::chrono::steady_clock::now() - wall_start;

  std::printf("\nfile size at the end: %.1f MiB (%.1f MiB in live pages)\n", MiB(FileBytes(path)),
              used ? MiB(*used) : -1.0);
  for (const char* table : {"samples_raw", "process_memory", "samples_1m", "samples_1h", "gpus"})
    std::printf("  %-15s %10lld rows\n", table, static_cast<long long>(CountRows(path, table)));
  std::printf("inserts: %lld snapshots (%lld GPU rows, %lld process rows) in %.1f s: %.0f snapshots/s, %.0f rows/s\n",
              static_cast<long long>(snapshots), static_cast<long long>(gpu_rows), static_cast<long long>(process_rows),
              insert_time.count(), snapshots / insert_time.count(), (gpu_rows + process_rows) / insert_time.count());
  std::printf("maintain: %lld calls, mean %.2f ms, max %.1f ms\n", static_cast<long long>(maintains),
              1000 * maintain_time.count() / std::max<int64_t>(maintains, 1), 1000 * maintain_max.count());
  std::printf("wall time %.1f s\n", wall.count());
  if (!options.keep)
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return 0;
}

}  // namespace
}  // namespace gpudoctor

int main(int argc, char** argv) {
  gpudoctor::Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "store_bench: %s needs a value\n", arg.c_str());
        std::exit(64);
      }
      return argv[++i];
    };
    if (arg == "--days") options.days = std::atoi(next());
    else if (arg == "--gpus") options.gpus = std::atoi(next());
    else if (arg == "--interval") options.interval_s = std::atoi(next());
    else if (arg == "--processes") options.processes = std::atoi(next());
    else if (arg == "--db") options.db = next();
    else if (arg == "--keep") options.keep = true;
    else {
      std::fprintf(stderr, "usage: store_bench [--days N] [--gpus N] [--interval S] [--processes N] [--db PATH] [--keep]\n");
      return 64;
    }
  }
  if (options.days < 1 || options.gpus < 1 || options.interval_s < 1 || options.processes < 0) {
    std::fprintf(stderr, "store_bench: days, gpus and interval must be positive\n");
    return 64;
  }
  return gpudoctor::Run(options);
}
