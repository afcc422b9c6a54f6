// The agent's scheduled diagnostics: the [diag] table of its config asks for
// `gpudoctor diag --level N` on the idle GPUs every day at a time or every
// interval. One run at a time, only on GPUs that NVML shows without a compute
// process; the run is a child `gpudoctor diag` that keeps its results in the
// agent's history (--db), where diagnostic_failed judges them like any run's.
//
//   [diag]
//   schedule = "daily 03:00"   # or "24h", "7d"; "off" (the default)
//   level = 1
//
//   DiagScheduler scheduler(config, launcher, started_at, note);
//   if (scheduler.Tick(snapshot, now, history.LatestDiagnostics(now))) history.DiagnosticsChanged();
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "model/diagnostic.h"
#include "model/snapshot.h"

namespace gpudoctor {

struct DiagScheduleConfig {
  enum class Kind { kOff, kDaily, kEvery };
  Kind kind = Kind::kOff;
  int minute_of_day = 0;  // kDaily: local time, 0 to 1439
  Duration every{};       // kEvery: at least kShortestDiagInterval
  int level = 1;
};

inline constexpr auto kShortestDiagInterval = std::chrono::minutes(10);

// "off", "daily HH:MM" (local time) or an interval ("24h", "7d").
Result<DiagScheduleConfig> ParseDiagSchedule(std::string_view text);
// The [diag] table of the agent's config file (TOML text); absent, the
// schedule is off. Unknown keys and values out of range are errors naming the key.
Result<DiagScheduleConfig> ParseDiagScheduleConfig(std::string_view toml_text);
// "off", "daily at 03:00", "every 24h"
std::string DescribeDiagSchedule(const DiagScheduleConfig& config);

// One run the scheduler asks for.
struct DiagRequest {
  int level = 1;
  std::vector<int> gpus;  // NVML indexes
  Duration deadline{};    // the run is ended past it
};

// How a run ended.
struct DiagRunEnd {
  bool timed_out = false;
  std::optional<int> exit_code;  // when it exited by itself
  std::string summary;           // the run's summary line; empty when it printed none
  std::string error;             // why it did not run or gave no summary
};

// Starts runs and says when they end; the agent's is a child process
// (ChildDiagLauncher), the tests' a script.
class DiagLauncher {
 public:
  virtual ~DiagLauncher() = default;
  // Called only when no run is under way.
  virtual Status Start(const DiagRequest& request) = 0;
  // The end of the run under way, once, when it has ended; nullopt while it runs.
  virtual std::optional<DiagRunEnd> Poll() = 0;
  // Ends a run under way and waits for it (the agent stopping).
  virtual void Stop() = 0;
};

// Runs `gpudoctor diag --level N --json --quiet --gpu LIST --db DATABASE` as a
// child: `command` is this binary with its global options (--simulate...).
class ChildDiagLauncher final : public DiagLauncher {
 public:
  ChildDiagLauncher(std::vector<std::string> command, std::string database)
      : command_(std::move(command)), database_(std::move(database)) {}
  ~ChildDiagLauncher() override { Stop(); }

  // The child's command line for `request`.
  std::vector<std::string> Command(const DiagRequest& request) const;

  Status Start(const DiagRequest& request) override;
  std::optional<DiagRunEnd> Poll() override;
  void Stop() override;

 private:
  std::vector<std::string> command_;
  std::string database_;
  std::thread thread_;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> done_{false};
  DiagRunEnd end_;  // written by thread_ before done_
};

class DiagScheduler {
 public:
  // `started` is when the agent started: a daily time that passed before it is not made up for.
  DiagScheduler(DiagScheduleConfig config, DiagLauncher& launcher, WallTime started,
                std::function<void(const std::string&)> note)
      : config_(config), launcher_(launcher), started_(started), note_(std::move(note)) {}

  void Reconfigure(DiagScheduleConfig config) { config_ = config; }

  // Once per cycle: takes the end of the run under way, and starts one when
  // it is due and a GPU is idle. `history` is the newest diagnostics the
  // agent's history holds (a run there counts as the last one, whoever made
  // it). True when a run ended: the history has new diagnostics.
  bool Tick(const Snapshot& snapshot, WallTime now, const std::vector<DiagnosticRecord>& history);

  bool running() const { return running_; }
  // When the last run started (or the newest diagnostic in the history finished).
  std::optional<WallTime> last_run() const { return last_run_; }

 private:
  bool Due(WallTime now) const;

  DiagScheduleConfig config_;
  DiagLauncher& launcher_;
  WallTime started_;
  std::function<void(const std::string&)> note_;
  bool running_ = false;
  std::vector<int> running_gpus_;
  std::optional<WallTime> last_run_;
  bool waiting_noted_ = false;  // "due, but every GPU is busy" said once per due time
};

// The GPUs a scheduled run may test: readable, and NVML lists their compute
// processes and there are none.
std::vector<int> IdleGpus(const Snapshot& snapshot);

}  // namespace gpudoctor
