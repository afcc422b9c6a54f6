// Rules about tasks hung in the kernel: driver_hang (in the NVIDIA driver)
// and host_hung_tasks (anywhere else).
//
// A task is hung the way the kernel judges it: blocked in uninterruptible
// sleep without being scheduled for hung_task_timeout_secs. The evidence is
// the kernel's own "blocked for more than N seconds" lines in the log window,
// or the agent's, which sees a task blocked across its samples
// (BlockedTaskWatch). A task in D state in one sample is only a note in the
// ok line: it may be running again a millisecond later.
#include <algorithm>

#include "common/text.h"
#include "health/rule_context.h"

namespace gpudoctor::rules_internal {
namespace {

// gpudoctor's own tasks wait on what they measure; its probe hung in NVML is nvml_hang's.
constexpr std::string_view kOwnTaskName = "gpudoctor";
constexpr size_t kMaxLogLinesPerTask = 3;

struct HungTask {
  std::optional<uint32_t> pid;
  std::string name;
  std::vector<std::string> evidence;
  bool gpu_tool = false;   // a GPU tool (nvidia-smi, ...) lives in the driver
  bool nvidia_tie = false;  // a device file, stack frame or wait channel of the driver
  bool InDriver() const { return gpu_tool || nvidia_tie; }
  std::string Label() const { return pid ? fmt::format("{} (pid {})", name, *pid) : name; }
};

// What both rules judge: the tasks blocked long enough, and what was seen
// besides (tasks blocked in this sample only, the kernel's own counters).
struct HungTaskView {
  bool judged = false;  // the blocked tasks or the kernel log were read
  std::vector<HungTask> hung;
  size_t seen_once = 0;  // tasks blocked in this sample, not known to be blocked for long
  std::vector<std::string> notes;
};

// The kernel's hung_task_timeout_secs, or blocked_for when it is unknown or
// 0 (the kernel's detector off: then only the agent can find hung tasks).
Duration HungTaskTimeout(const RuleContext& context) {
  const HostSignals* host = context.input.host;
  if (host != nullptr && host->hung_task_timeout_seconds.value_or(0) > 0)
    return std::chrono::seconds(host->hung_task_timeout_seconds.value());
  return context.thresholds.host_hung_tasks.blocked_for;
}

// The kernel keeps 15 characters of a task's name.
bool SameTaskName(std::string_view task, std::string_view name) { return task == name.substr(0, 15); }

class HungTaskFinder {
 public:
  explicit HungTaskFinder(const RuleContext& context)
      : context_(context),
        config_(context.thresholds.host_hung_tasks),
        host_(context.input.host),
        timeout_(HungTaskTimeout(context)) {}

  HungTaskView Find() {
    const bool have_tasks = host_ != nullptr && host_->blocked_tasks.has_value();
    const std::vector<LogEvent>* events = context_.input.log_events;
    view_.judged = have_tasks || events != nullptr;
    if (!view_.judged) return std::move(view_);
    if (events != nullptr)
      for (const LogEvent& event : *events) AddReport(event);
    if (have_tasks)
      for (const BlockedTask& task : host_->blocked_tasks.value()) AddBlockedNow(task);
    AddKernelNotes(events != nullptr);
    return std::move(view_);
  }

 private:
  // A "blocked for more than N seconds" line of the kernel's detector.
  void AddReport(const LogEvent& event) {
    if (event.kind != "hung_task" || SameTaskName(kOwnTaskName, event.process) ||
        !context_.WithinWindow(event.time, config_.window))
      return;
    HungTask& task = TaskFor(event.pid, event.process);
    if (task.evidence.size() < kMaxLogLinesPerTask) task.evidence.push_back(event.raw.empty() ? event.message : event.raw);
    if (std::string_view frames = event.Field("driver_frames"); !frames.empty()) {
      task.nvidia_tie = true;
      task.evidence.push_back(fmt::format("its kernel stack runs in {}", frames));
    }
  }

  // A task in D state in this sample: hung when the agent has seen it blocked
  // for the timeout; evidence for a task the kernel reported; else a note.
  void AddBlockedNow(const BlockedTask& blocked) {
    const std::optional<WallTime> since =
        context_.input.blocked_task_watch ? context_.input.blocked_task_watch->BlockedSince(blocked) : std::nullopt;
    const bool long_enough = since && context_.input.now - *since >= timeout_;
    HungTask* task = long_enough ? &TaskFor(blocked.pid, blocked.name) : FindTask(blocked.pid);
    if (task == nullptr) {
      ++view_.seen_once;
      view_.notes.push_back(Describe(blocked) + ": one sighting, not a hang unless it stays blocked for " +
                            FormatSpan(timeout_));
      return;
    }
    task->evidence.push_back(
        long_enough ? fmt::format("{}: blocked without being scheduled for {} (every sample since {})",
                                  Describe(blocked), FormatSpan(context_.input.now - *since), FormatIsoUtc(*since))
                    : Describe(blocked) + " now");
    for (const std::string& tie : blocked.nvidia_ties) task->evidence.push_back(tie);
    task->nvidia_tie |= !blocked.nvidia_ties.empty();
  }

  void AddKernelNotes(bool log_read) {
    const std::string span = FormatSpan(timeout_);
    if (host_ != nullptr && host_->hung_task_timeout_seconds.has_value() && host_->hung_task_timeout_seconds.value() == 0)
      view_.notes.push_back("the kernel's hung-task detector is off (hung_task_timeout_secs = 0): only the agent "
                            "can see a task blocked for " + span);
    if (host_ != nullptr && host_->hung_task_reports.value_or(0) > 0)
      view_.notes.push_back(fmt::format("kernel hung-task detections since boot: {}", host_->hung_task_reports.value()));
    if (log_read)
      view_.notes.push_back("kernel log of the last " + FormatSpan(config_.window) +
                            " searched for its 'blocked for more than' reports");
  }

  static std::string Describe(const BlockedTask& task) {
    return fmt::format("pid {} ({}) in D state{}", task.pid, task.name,
                       task.wait_channel.empty() ? "" : ", waiting in " + task.wait_channel);
  }

  HungTask* FindTask(std::optional<uint32_t> pid) {
    if (!pid) return nullptr;
    auto found = std::find_if(view_.hung.begin(), view_.hung.end(), [&](const HungTask& t) { return t.pid == pid; });
    return found == view_.hung.end() ? nullptr : &*found;
  }

  HungTask& TaskFor(std::optional<uint32_t> pid, const std::string& name) {
    if (HungTask* task = FindTask(pid)) return *task;
    const bool gpu_tool = std::any_of(config_.gpu_task_names.begin(), config_.gpu_task_names.end(),
                                      [&](const std::string& tool) { return SameTaskName(name, tool); });
    view_.hung.push_back({pid, name, {}, gpu_tool, false});
    return view_.hung.back();
  }

  const RuleContext& context_;
  const decltype(RuleThresholds::host_hung_tasks)& config_;
  const HostSignals* host_;
  const Duration timeout_;
  HungTaskView view_;
};

// Reports the hung tasks that `in_driver` selects as one finding of `rule_id`,
// or passes with `ok_summary` and the notes.
void ReportHungTasks(RuleContext& context, std::string_view rule_id, bool in_driver, Severity severity,
                     std::string_view where, std::string ok_summary) {
  HungTaskView view = HungTaskFinder(context).Find();
  if (!view.judged) return;
  std::vector<std::string> labels, evidence;
  for (const HungTask& task : view.hung) {
    if (task.InDriver() != in_driver) continue;
    labels.push_back(task.Label());
    if (task.gpu_tool && !task.nvidia_tie)
      evidence.push_back(task.name + " is a GPU tool: blocked this long, it waits on the driver");
    evidence.insert(evidence.end(), task.evidence.begin(), task.evidence.end());
  }
  if (labels.empty()) {
    if (view.seen_once > 0)
      ok_summary += fmt::format(" ({} in D state in this sample only)", Plural(view.seen_once, "task", "tasks"));
    context.Pass(rule_id, std::move(ok_summary), std::move(view.notes));
    return;
  }
  std::string summary = labels.size() == 1
                            ? fmt::format("{} hung {}", labels.front(), where)
                            : fmt::format("{} tasks hung {}: {}", labels.size(), where, JoinWithAnd(labels));
  context.Report(rule_id, severity, std::nullopt, std::move(summary), std::move(evidence));
}

}  // namespace

void DriverHang(RuleContext& context) {
  ReportHungTasks(context, "driver_hang", /*in_driver=*/true, Severity::kCritical, "in the NVIDIA driver",
                  "No task hung in the NVIDIA driver");
}

void HostHungTasks(RuleContext& context) {
  ReportHungTasks(context, "host_hung_tasks", /*in_driver=*/false, Severity::kWarning, "in the kernel",
                  "No task hung in the kernel");
}

}  // namespace gpudoctor::rules_internal
