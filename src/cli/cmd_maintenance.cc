// `gpudoctor maintenance`: the upkeep schedule the operators' guides of GPU
// servers ask for ([maintenance.<task>] in the config), when each task was
// last done and when it is due; `gpudoctor maintenance done TASK` records
// that a task was done, in the agent's history, where `check` reads it
// (rule maintenance_due).
//
//   gpudoctor maintenance
//   gpudoctor maintenance done dust_cleaning --note "filters replaced"
//   gpudoctor maintenance done driver_and_firmware --at 2026-11-02
//
// Exit codes: 0 listed or recorded, 64 bad arguments (unknown task,
// unreadable date), 65 the history or the config is not usable, 66 the config
// cannot be opened, 73 the record could not be written.

#include <cstdio>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "assess/agent_history.h"
#include "cli/commands.h"
#include "cli/sources.h"
#include "cli/terminal.h"
#include "cli/time_option.h"
#include "common/json_text.h"
#include "common/suggest.h"
#include "common/text.h"
#include "health/health_config.h"
#include "health/maintenance.h"
#include "host/host_parsers.h"
#include "store/sqlite_store.h"

namespace gpudoctor {
namespace {

struct MaintenanceOptions {
  std::string database = kDefaultHistoryDatabase;
  // `done`
  std::string task;
  std::string at = "now";
  std::string note;
};

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "gpudoctor maintenance: %s\n", message.c_str());
  return code;
}

void PrintJson(const nlohmann::json& json) {
  std::printf("%s\n", ToJsonText(json, 2).c_str());
}

std::string Day(WallTime time) { return FormatIsoUtc(time).substr(0, 10); }

// The loaded driver's build date, which tells when driver_and_firmware was last done.
std::optional<WallTime> DriverBuiltAt() {
  InputText version = ReadOptionInput("driver version", "/proc/driver/nvidia/version", 64 * 1024);
  if (version.error) return std::nullopt;
  auto built = ParseNvidiaDriverBuildDate(version.text);
  return built ? std::optional<WallTime>(*built) : std::nullopt;
}

std::vector<std::string> TaskNames(const std::vector<MaintenanceTask>& schedule) {
  std::vector<std::string> names;
  for (const MaintenanceTask& task : schedule) names.push_back(task.name);
  return names;
}

// The records kept in `database`; a missing file is none (nothing recorded yet).
Result<std::vector<MaintenanceDone>> ReadRecords(const std::string& database, WallTime now) {
  OpenedHistory opened = OpenHistoryReadOnly(database, now);
  if (opened.state == AgentRecord::State::kMissing) return std::vector<MaintenanceDone>{};
  if (opened.state == AgentRecord::State::kUnreadable) return Error{opened.note};
  return opened.store->QueryMaintenance();
}

int RunList(const MaintenanceOptions& options, const CommandContext& context) {
  CommandConfig loaded = LoadCommandConfig(context);
  if (loaded.error) return Fail(loaded.error->exit_code, loaded.error->message);
  const std::vector<MaintenanceTask>& schedule = loaded.config.maintenance;
  const WallTime now = SystemClock::Instance().Now();
  auto records = ReadRecords(options.database, now);
  if (!records) return Fail(exit_code::kDataError, options.database + ": " + records.error().message);
  const std::optional<WallTime> driver_built_at = DriverBuiltAt();

  nlohmann::json tasks = nlohmann::json::array();
  const Style style(context.options.color, stdout);
  if (!context.options.json) {
    std::printf("Maintenance schedule (history: %s)\n\n", options.database.c_str());
    if (schedule.empty()) std::printf("No task is scheduled ([maintenance.<task>] in the config adds one).\n");
  }
  for (const MaintenanceTask& task : schedule) {
    const MaintenanceStatus status = StatusOf(task, *records, driver_built_at);
    const bool overdue = status.OverdueAt(now);
    const std::optional<WallTime> last = status.last_done(), due = status.due();
    if (context.options.json) {
      nlohmann::json entry{{"task", task.name},
                           {"title", task.title},
                           {"every_days", std::chrono::duration_cast<std::chrono::hours>(task.every).count() / 24},
                           {"overdue", overdue}};
      entry["last_recorded"] = status.last_recorded ? nlohmann::json(FormatIsoUtc(*status.last_recorded)) : nullptr;
      entry["driver_built_at"] = status.driver_built_at ? nlohmann::json(FormatIsoUtc(*status.driver_built_at)) : nullptr;
      entry["due"] = due ? nlohmann::json(FormatIsoUtc(*due)) : nullptr;
      tasks.push_back(std::move(entry));
      continue;
    }
    std::string state = !last ? style.Dim("never recorded")
                        : overdue ? style.Severity(Severity::kWarning) + " overdue since " + Day(*due)
                                  : "due " + Day(*due);
    std::string source;
    if (last) source = last == status.last_recorded ? "last done " + Day(*last) : "driver built " + Day(*last);
    std::printf("  %-22s every %-9s %-26s %s\n", task.name.c_str(), DescribeEvery(task.every).c_str(), source.c_str(),
                state.c_str());
    std::printf("  %-22s %s\n", "", style.Dim(task.title).c_str());
  }
  if (context.options.json) {
    PrintJson({{"database", options.database}, {"tasks", std::move(tasks)}});
  } else if (!schedule.empty()) {
    std::printf("\nRecord a task when it is done: gpudoctor maintenance done TASK [--at DATE] [--note TEXT]\n");
  }
  return exit_code::kOk;
}

int RunDone(const MaintenanceOptions& options, const CommandContext& context) {
  CommandConfig loaded = LoadCommandConfig(context);
  if (loaded.error) return Fail(loaded.error->exit_code, loaded.error->message);
  const MaintenanceTask* task = FindMaintenanceTask(loaded.config.maintenance, options.task);
  if (task == nullptr) {
    const std::vector<std::string> names = TaskNames(loaded.config.maintenance);
    return Fail(exit_code::kUsage, fmt::format("no maintenance task '{}'.{} The schedule has: {}", options.task,
                                               DidYouMean(NearestNames(options.task, names)), QuotedList(names, "and")));
  }
  const WallTime now = SystemClock::Instance().Now();
  std::optional<WallTime> at = ParseWhen(options.at, now);
  if (!at) return Fail(exit_code::kUsage, "--at: expected \"now\", a duration like 3d, or a UTC date 2026-11-02");
  if (*at > now) return Fail(exit_code::kUsage, "--at is in the future: record a task once it is done");

  // The history is the agent's; recording here creates it when no agent has run yet.
  auto store = SqliteHistoryStore::Open(options.database, SqliteStoreOptions{}, now);
  if (!store) return Fail(exit_code::kCannotCreate, options.database + ": " + store.error().message);
  const MaintenanceDone done{task->name, *at, options.note};
  if (Status status = (*store)->RecordMaintenance(done, now); !status)
    return Fail(exit_code::kCannotCreate, "cannot record it: " + status.error().message);
  const WallTime next = *at + std::chrono::duration_cast<WallTime::duration>(task->every);
  if (context.options.json) {
    PrintJson({{"recorded", true},
               {"task", task->name},
               {"done_at", FormatIsoUtc(*at)},
               {"note", options.note},
               {"next_due", FormatIsoUtc(next)},
               {"database", options.database}});
  } else {
    std::printf("Recorded: %s, done %s. Next due %s (every %s).\n", task->title.c_str(), Day(*at).c_str(),
                Day(next).c_str(), DescribeEvery(task->every).c_str());
  }
  return exit_code::kOk;
}

}  // namespace

void RegisterMaintenanceCommand(CLI::App& app, CommandContext& context) {
  auto options = std::make_shared<MaintenanceOptions>();
  CLI::App* command = app.add_subcommand(
      "maintenance", "The upkeep schedule (dust, power and cabling, driver and firmware): what is due, what was done");
  command->add_option("--db", options->database, "History file of `gpudoctor agent`, where the records are kept")
      ->capture_default_str();
  command->footer(
      "The operators' guides of GPU servers ask for dust cleaning monthly, a check of the power supplies and\n"
      "cabling quarterly, and driver and firmware updates every six months. The schedule is data\n"
      "([maintenance.<task>] with title and every, in data/rules.toml or a --config file, which may add\n"
      "tasks). `check` reports each overdue task as maintenance_due; the loaded driver's build date counts\n"
      "as the last driver_and_firmware update when no newer record says otherwise.\n"
      "Examples:\n"
      "  gpudoctor maintenance                                        the schedule and what is due\n"
      "  gpudoctor maintenance done dust_cleaning --note \"filters replaced\"\n"
      "  gpudoctor maintenance done power_and_cabling --at 2026-11-28\n"
      "Exit status: 0 listed or recorded, 64 bad arguments (unknown task, unreadable date), 65 the\n"
      "history or the config is not usable, 66 the config cannot be opened, 73 the record could not be\n"
      "written.");

  CLI::App* done = command->add_subcommand("done", "Record that a maintenance task was done");
  done->add_option("task", options->task, "The task, as the schedule names it (dust_cleaning, ...)")->required();
  done->add_option("--at", options->at, "When it was done: \"now\", a duration before now (3d) or a UTC date 2026-11-02")
      ->capture_default_str();
  done->add_option("--note", options->note, "What was done, kept with the record");
  done->add_option("--db", options->database, "History file of `gpudoctor agent` (created when missing)")
      ->capture_default_str();
  done->callback([options, &context] { context.exit_code = RunDone(*options, context); });

  command->callback([options, command, &context] {
    if (command->got_subcommand("done")) return;
    context.exit_code = RunList(*options, context);
  });
}

}  // namespace gpudoctor
