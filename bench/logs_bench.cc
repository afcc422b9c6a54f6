// Log engine benchmark: MB/s of the log engine and of the whole commands as
// users run them (`gpudoctor logs FILE --json`, `gpudoctor check --no-host
// --logs FILE`), their start-up on an empty log, next to `grep -E -f` with an
// equivalent pattern set (the same literals the engine's prefilter looks for)
// and `cat >/dev/null`, all measured in the same run on the same file. Wall
// time and CPU time (of all threads: the reader reads ahead on a second one),
// each against grep's; the commands also pinned to one CPU (`taskset -c N`,
// the last this process may use: the first often takes the machine's
// interrupts), where they read on one thread, as the baseline for reading
// ahead. Also
// reports each program's peak memory.
//
//   python3 bench/logs_gen.py --size-mb 1024 --output /tmp/kern-1g.log
//   build/bin/logs_bench /tmp/kern-1g.log [--runs 3] [--engine-only]
//
// Results go in docs/benchmarks.md ("Log engine").
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/text.h"
#include "logs/catalog.h"
#include "logs/log_reader.h"

namespace {

using namespace gpudoctor;
using Stopwatch = std::chrono::steady_clock;

double Seconds(Stopwatch::time_point start) { return std::chrono::duration<double>(Stopwatch::now() - start).count(); }

// The highest-numbered CPU this process may run on.
int LastCpu() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  int last = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) last = cpu;
  }
  return last;
}

struct Timing {
  double wall = 0;  // seconds
  double cpu = 0;   // user + system seconds: what the reader itself cost, even on a busy machine
  double peak_mib = 0;  // peak resident size of the program
};

double CpuSeconds(const rusage& usage) {
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// Runs a shell command with its output sent to `output`, and times it.
Timing TimeCommand(const std::string& command, const std::string& output = "/dev/null") {
  auto start = Stopwatch::now();
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", (command + " >" + output + " 2>&1").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  return Timing{Seconds(start), CpuSeconds(usage), static_cast<double>(usage.ru_maxrss) / 1024.0};
}

double ProcessCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

// The literals of every catalog pattern as extended regular expressions,
// caseless ones spelled with [xX] classes: what the engine's prefilter
// searches for.
std::string WritePatternFile() {
  std::string path = "/tmp/gpudoctor_logs_bench_patterns.txt";
  std::ofstream out(path);
  for (const PatternSpec& pattern : LogCatalog::Builtin().patterns()) {
    for (const std::string& literal : pattern.literals) {
      std::string ere;
      for (char c : literal) {
        bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (pattern.caseless && letter) {
          ere += std::string("[") + static_cast<char>(std::tolower(c)) + static_cast<char>(std::toupper(c)) + "]";
        } else if (std::string(".[]()*+?{}|^$\\").find(c) != std::string::npos) {
          ere += std::string("\\") + c;
        } else {
          ere += c;
        }
      }
      out << ere << "\n";
    }
  }
  out << "GPU at PCI:\nGPU Board Serial Number:\nserial number is\n";
  return path;
}

constexpr int kStartRuns = 30;

// The median of each column on its own.
Timing Median(std::vector<Timing> runs) {
  auto middle = [&](auto field) {
    std::vector<double> values;
    for (const Timing& run : runs) values.push_back(run.*field);
    std::nth_element(values.begin(), values.begin() + static_cast<long>(values.size() / 2), values.end());
    return values[values.size() / 2];
  };
  return Timing{middle(&Timing::wall), middle(&Timing::cpu), middle(&Timing::peak_mib)};
}

Timing Best(const std::vector<Timing>& runs) {
  Timing best = runs.front();
  for (const Timing& run : runs) {
    best.wall = std::min(best.wall, run.wall);
    best.cpu = std::min(best.cpu, run.cpu);
    best.peak_mib = std::max(best.peak_mib, run.peak_mib);
  }
  return best;
}

// The gpudoctor binary built beside this benchmark.
std::string GpudoctorPath(const char* argv0) {
  std::string self = argv0;
  size_t slash = self.rfind('/');
  return (slash == std::string::npos ? std::string(".") : self.substr(0, slash)) + "/gpudoctor";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: logs_bench LOGFILE [--runs N] [--engine-only]\n");
    return 64;
  }
  std::string path = argv[1];
  int runs = 3;
  bool engine_only = false;
  for (int i = 2; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--runs" && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    if (flag == "--engine-only") engine_only = true;  // for profiling
  }
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) {
    std::perror(path.c_str());
    return 66;
  }
  const double megabytes = static_cast<double>(info.st_size) / 1e6;
  std::string patterns = WritePatternFile();

  // Warm the page cache and the built-in catalog so every contender reads from memory.
  TimeCommand("cat '" + path + "'");
  (void)LineMatcher::Builtin();

  const std::string gpudoctor = GpudoctorPath(argv[0]);
  const std::string empty = "/tmp/gpudoctor_logs_bench_empty.log";
  std::ofstream{empty};
  const bool commands = !engine_only && access(gpudoctor.c_str(), X_OK) == 0;

  std::vector<Timing> cat_runs, grep_runs, engine_runs, logs_runs, check_runs, logs_start_runs, check_start_runs;
  std::vector<Timing> logs_one_cpu_runs, check_one_cpu_runs;
  const std::string one_cpu = "taskset -c " + std::to_string(LastCpu());
  uint64_t events = 0, lines = 0, parsed = 0;
  for (int run = 0; run < runs; ++run) {
    if (engine_only) {
      cat_runs.push_back({1, 1});
      grep_runs.push_back({1, 1});
    } else {
      cat_runs.push_back(TimeCommand("cat '" + path + "'"));
    }
    // Counting into a file: with its output on /dev/null GNU grep stops at the first match.
    if (!engine_only) {
      grep_runs.push_back(
          TimeCommand("LC_ALL=C grep -E -c -f '" + patterns + "' '" + path + "'", "/tmp/gpudoctor_logs_bench.out"));
    }
    if (commands) {
      // check exits 1 to 3 when it finds problems; only the time matters here.
      logs_runs.push_back(TimeCommand("'" + gpudoctor + "' logs '" + path + "' --json"));
      check_runs.push_back(TimeCommand("'" + gpudoctor + "' check --no-host --logs '" + path + "'"));
      logs_one_cpu_runs.push_back(TimeCommand(one_cpu + " '" + gpudoctor + "' logs '" + path + "' --json"));
      check_one_cpu_runs.push_back(TimeCommand(one_cpu + " '" + gpudoctor + "' check --no-host --logs '" + path + "'"));
    }
    auto start = Stopwatch::now();
    double cpu_start = ProcessCpuSeconds();
    uint64_t critical = 0;  // the sink does a little work per event, as a real consumer would
    auto stats = ScanLogFile(path, ReadOptions{}, [&](LogEvent&& event) {
      critical += event.severity == EventSeverity::kCritical;
    });
    rusage self{};
    getrusage(RUSAGE_SELF, &self);
    engine_runs.push_back(
        Timing{Seconds(start), ProcessCpuSeconds() - cpu_start, static_cast<double>(self.ru_maxrss) / 1024.0});
    if (!stats) {
      std::fprintf(stderr, "%s\n", stats.error().message.c_str());
      return 1;
    }
    events = stats->events;
    lines = stats->lines;
    parsed = stats->parsed_lines;
  }

  std::printf("file: %s, %.0f MB, %llu lines, %llu lines parsed in full, %llu events\n", path.c_str(), megabytes,
              static_cast<unsigned long long>(lines), static_cast<unsigned long long>(parsed),
              static_cast<unsigned long long>(events));
  std::printf("best of %d runs, file in page cache\n\n", runs);
  const Timing grep = Best(grep_runs);
  std::printf("| reader | wall s | MB/s (wall) | wall: x grep | CPU s | MB/s (CPU) | CPU: x grep | peak MiB |\n"
              "|---|---|---|---|---|---|---|---|\n");
  auto row = [&](const char* name, const std::vector<Timing>& timings) {
    if (timings.empty()) return;
    Timing best = Best(timings);
    std::printf("| %s | %.2f | %.0f | %.2f | %.2f | %.0f | %.2f | %.1f |\n", name, best.wall, megabytes / best.wall,
                grep.wall / std::max(best.wall, 1e-3), best.cpu, megabytes / std::max(best.cpu, 1e-3),
                grep.cpu / std::max(best.cpu, 1e-3), best.peak_mib);
  };
  row("cat >/dev/null", cat_runs);
  row("LC_ALL=C grep -E -c -f (the engine's literals)", grep_runs);
  row("gpudoctor log engine (ScanLogFile: every event parsed in full)", engine_runs);
  row("gpudoctor logs FILE --json", logs_runs);
  row("gpudoctor check --no-host --logs FILE", check_runs);
  row((one_cpu + " gpudoctor logs FILE --json (one CPU: no reading ahead)").c_str(), logs_one_cpu_runs);
  row((one_cpu + " gpudoctor check --no-host --logs FILE").c_str(), check_one_cpu_runs);
  std::printf("\n");
  if (!commands) return 0;

  // Start-up: each program on an empty log, 30 times in turn, the median of
  // each (a single start is a few milliseconds, so one run says little).
  std::vector<Timing> cat_start, grep_start;
  for (int i = 0; i < kStartRuns; ++i) {
    cat_start.push_back(TimeCommand("cat '" + empty + "'"));
    grep_start.push_back(TimeCommand("LC_ALL=C grep -E -c -f '" + patterns + "' '" + empty + "'"));
    logs_start_runs.push_back(TimeCommand("'" + gpudoctor + "' logs '" + empty + "' --json"));
    check_start_runs.push_back(TimeCommand("'" + gpudoctor + "' check --no-host --logs '" + empty + "'"));
  }
  const Timing grep_median = Median(grep_start);
  std::printf("start-up on an empty log, median of %d starts (each through /bin/sh):\n\n", kStartRuns);
  std::printf("| program | wall ms | CPU ms | CPU: x grep | peak MiB |\n|---|---|---|---|---|\n");
  auto start_row = [&](const char* name, const std::vector<Timing>& timings) {
    const Timing median = Median(timings);
    std::printf("| %s | %.1f | %.1f | %.2f | %.1f |\n", name, median.wall * 1e3, median.cpu * 1e3,
                median.cpu / std::max(grep_median.cpu, 1e-6), median.peak_mib);
  };
  start_row("cat", cat_start);
  start_row("LC_ALL=C grep -E -c -f (the engine's literals)", grep_start);
  start_row("gpudoctor logs --json", logs_start_runs);
  start_row("gpudoctor check --no-host", check_start_runs);
  return 0;
}
