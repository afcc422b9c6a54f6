#include "agent/diag_schedule.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <ctime>

#include "agent/subprocess.h"
#include "common/text.h"
#include "diag/diag_levels.h"
#include "diag/diag_summary.h"
#include "health/toml_table_reader.h"

extern char** environ;

namespace gpudoctor {

namespace {

// The latest `minute_of_day` (local time) at or before `now`.
WallTime LatestDailyTime(WallTime now, int minute_of_day) {
  const std::time_t now_t = std::chrono::system_clock::to_time_t(now);
  std::tm local{};
  localtime_r(&now_t, &local);
  for (int days_back = 0; days_back < 3; ++days_back) {
    std::tm slot = local;
    slot.tm_mday -= days_back;
    slot.tm_hour = minute_of_day / 60;
    slot.tm_min = minute_of_day % 60;
    slot.tm_sec = 0;
    slot.tm_isdst = -1;  // whatever daylight saving time says on that day
    const std::time_t slot_t = std::mktime(&slot);
    if (slot_t != -1 && slot_t <= now_t) return std::chrono::system_clock::from_time_t(slot_t);
  }
  return now;
}

std::string GpuList(const std::vector<int>& gpus) {
  std::string list;
  for (int gpu : gpus) list += (list.empty() ? "" : ",") + std::to_string(gpu);
  return list;
}

}  // namespace

Result<DiagScheduleConfig> ParseDiagSchedule(std::string_view text) {
  DiagScheduleConfig config;
  const std::string_view trimmed = Trim(text);
  if (trimmed == "off") return config;
  if (StartsWith(trimmed, "daily")) {
    const std::string_view time = Trim(trimmed.substr(5));
    const size_t colon = time.find(':');
    auto hours = colon == std::string_view::npos ? std::nullopt : ParseInt<int>(time.substr(0, colon));
    auto minutes = colon == std::string_view::npos ? std::nullopt : ParseInt<int>(time.substr(colon + 1));
    if (!hours || !minutes || *hours < 0 || *hours > 23 || *minutes < 0 || *minutes > 59 ||
        time.size() - colon != 3)
      return Error{fmt::format("'{}': a daily schedule is \"daily HH:MM\" in local time, like \"daily 03:00\"", text)};
    config.kind = DiagScheduleConfig::Kind::kDaily;
    config.minute_of_day = *hours * 60 + *minutes;
    return config;
  }
  auto every = ParseDuration(trimmed);
  if (!every) return Error{fmt::format("'{}': \"off\", \"daily HH:MM\" or an interval like \"24h\"", text)};
  if (*every < kShortestDiagInterval)
    return Error{fmt::format("'{}': at least {} between runs", text, FormatDuration(kShortestDiagInterval))};
  config.kind = DiagScheduleConfig::Kind::kEvery;
  config.every = *every;
  return config;
}

Result<DiagScheduleConfig> ParseDiagScheduleConfig(std::string_view toml_text) {
  toml::table root;
  try {
    root = toml::parse(toml_text);
  } catch (const toml::parse_error& error) {
    return Error{std::string(error.description())};
  }
  const toml::node* node = root.get("diag");
  if (node == nullptr) return DiagScheduleConfig{};
  const toml::table* table = node->as_table();
  if (table == nullptr) return Error{"diag: expected a table"};
  TomlTableReader reader(*table, "diag");
  std::string schedule = "off";
  int level = 1;
  reader.Read("schedule", schedule);
  reader.Read("level", level);
  if (std::optional<Error> error = reader.Finish()) return *error;
  auto config = ParseDiagSchedule(schedule);
  if (!config) return Error{"diag.schedule: " + config.error().message};
  if (FindDiagLevel(level) == nullptr)
    return Error{fmt::format("diag.level: {} is not a level: 1, 2 or 3 (gpudoctor diag --help)", level)};
  config->level = level;
  return config;
}

std::string DescribeDiagSchedule(const DiagScheduleConfig& config) {
  switch (config.kind) {
    case DiagScheduleConfig::Kind::kOff: return "off";
    case DiagScheduleConfig::Kind::kDaily:
      return fmt::format("daily at {:02}:{:02}", config.minute_of_day / 60, config.minute_of_day % 60);
    case DiagScheduleConfig::Kind::kEvery: return "every " + FormatDuration(config.every);
  }
  return "off";
}

std::vector<int> IdleGpus(const Snapshot& snapshot) {
  std::vector<int> idle;
  for (const GpuSnapshot& gpu : snapshot.gpus) {
    // A GPU whose processes NVML cannot list may be running a job.
    if (gpu.access_error != AccessError::kNone || !gpu.processes.has_value()) continue;
    if (gpu.processes.value().empty()) idle.push_back(static_cast<int>(gpu.index));
  }
  return idle;
}

// ---- the child ----

std::vector<std::string> ChildDiagLauncher::Command(const DiagRequest& request) const {
  std::vector<std::string> argv = command_;
  argv.insert(argv.end(), {"diag", "--level", std::to_string(request.level), "--json", "--quiet", "--gpu",
                           GpuList(request.gpus)});
  if (!database_.empty()) argv.insert(argv.end(), {"--db", database_});
  return argv;
}

Status ChildDiagLauncher::Start(const DiagRequest& request) {
  if (thread_.joinable()) return Error{"a scheduled diag is already running"};
  ProcessSpec spec{
      .argv = Command(request), .timeout = request.deadline, .max_output_bytes = 1 << 20, .cancel = &cancel_};
  // The child finds libcuda and the NVML library as the agent does.
  for (char** variable = environ; *variable != nullptr; ++variable) spec.env.emplace_back(*variable);
  done_ = false;
  thread_ = std::thread([this, spec = std::move(spec)] {
    DiagRunEnd end;
    Result<ProcessOutcome> ran = RunProcess(spec);
    if (!ran) {
      end.error = ran.error().message;
    } else {
      end.timed_out = ran->timed_out;
      if (!ran->timed_out && ran->signal == 0) end.exit_code = ran->exit_code;
      if (auto summary = FindDiagSummary(ran->output)) end.summary = summary->line;
      else end.error = ran->timed_out ? "timed out after " + FormatDuration(spec.timeout)
                                      : ran->Describe(spec.timeout) + ": " + FitOneLine(ran->output, 300);
    }
    end_ = std::move(end);
    done_ = true;
  });
  return {};
}

std::optional<DiagRunEnd> ChildDiagLauncher::Poll() {
  if (!thread_.joinable() || !done_) return std::nullopt;
  thread_.join();
  return std::move(end_);
}

void ChildDiagLauncher::Stop() {
  if (!thread_.joinable()) return;
  cancel_ = true;
  thread_.join();
  cancel_ = false;
}

// ---- the schedule ----

bool DiagScheduler::Due(WallTime now) const {
  switch (config_.kind) {
    case DiagScheduleConfig::Kind::kOff: return false;
    case DiagScheduleConfig::Kind::kEvery: return !last_run_ || now - *last_run_ >= config_.every;
    case DiagScheduleConfig::Kind::kDaily: {
      const WallTime slot = LatestDailyTime(now, config_.minute_of_day);
      return slot >= started_ && (!last_run_ || *last_run_ < slot);
    }
  }
  return false;
}

bool DiagScheduler::Tick(const Snapshot& snapshot, WallTime now, const std::vector<DiagnosticRecord>& history) {
  for (const DiagnosticRecord& record : history)
    if (!last_run_ || record.finished_at > *last_run_) last_run_ = record.finished_at;
  bool ended = false;
  if (running_) {
    std::optional<DiagRunEnd> end = launcher_.Poll();
    if (!end) return false;  // one run at a time
    running_ = false;
    ended = true;
    const std::string what = fmt::format("scheduled diag --level {} on GPU {}", config_.level, GpuList(running_gpus_));
    if (!end->summary.empty()) note_(fmt::format("{}: {}", what, end->summary));
    else note_(fmt::format("{} gave no result: {}", what, end->error));
  }
  if (!Due(now)) {
    waiting_noted_ = false;
    return ended;
  }
  const std::vector<int> idle = IdleGpus(snapshot);
  if (idle.empty()) {
    if (!waiting_noted_) note_("a scheduled diag is due, but no GPU is idle: it waits for one");
    waiting_noted_ = true;
    return ended;
  }
  waiting_noted_ = false;
  last_run_ = now;
  const DiagPlan* plan = FindDiagLevel(config_.level);
  const DiagRequest request{.level = config_.level, .gpus = idle, .deadline = plan ? plan->deadline : Duration{}};
  if (Status started = launcher_.Start(request); !started) {
    note_(fmt::format("the scheduled diag could not start: {}", started.error().message));
    return ended;
  }
  running_ = true;
  running_gpus_ = idle;
  const size_t busy = snapshot.gpus.size() - idle.size();
  note_(fmt::format("scheduled diag --level {} started on GPU {}{}", config_.level, GpuList(idle),
                    busy > 0 ? fmt::format(" ({} GPU{} busy or unreadable, not tested)", busy, busy == 1 ? "" : "s")
                             : ""));
  return ended;
}

}  // namespace gpudoctor
