#include "health/health_config.h"

#include <algorithm>

#include <toml++/toml.h>

#include <cassert>
#include <cmath>
#include <limits>
#include <sstream>
#include <type_traits>
#include <variant>

#include "common/input_file.h"
#include "common/text.h"
#include "health/correlate/correlation_config_toml.h"
#include "health/cuda_compat.h"
#include "health/embedded_data.h"
#include "health/rule_ids.h"
#include "logs/catalog.h"

namespace gpudoctor {
namespace {

using Target =
    std::variant<double*, uint64_t*, uint32_t*, bool*, Duration*, std::string*, std::vector<std::string>*, Severity*>;

// One configurable value: where it lives in the TOML and in the structs.
struct Binding {
  std::string_view table;  // "host" or a rule id
  std::string_view key;
  Target target;
};

std::vector<Binding> HostBindings(HostConfig& h) {
  return {
      {"host", "disk_paths", &h.disk_paths},
      {"host", "processes", &h.processes},
      {"host", "backup_dirs", &h.backup_dirs},
      {"host", "ipmi", &h.ipmi},
      {"host", "command_timeout", &h.command_timeout},
      {"host", "backup_scan_file_limit", &h.backup_scan_file_limit},
      {"host", "backup_scan_depth", &h.backup_scan_depth},
  };
}

std::vector<Binding> ThresholdBindings(RuleThresholds& t) {
  return {
      {"temperature_high", "warning_c", &t.temperature_high.warning_c},
      {"temperature_high", "critical_c", &t.temperature_high.critical_c},
      {"temperature_high", "use_gpu_limits", &t.temperature_high.use_gpu_limits},
      {"temperature_high", "gpu_limit_margin_c", &t.temperature_high.gpu_limit_margin_c},
      {"fan_failure", "hot_c", &t.fan_failure.hot_c},
      {"power_capped", "over_limit_percent", &t.power_capped.over_limit_percent},
      {"inlet_temperature", "sensor_names", &t.inlet_temperature.sensor_names},
      {"inlet_temperature", "min_c", &t.inlet_temperature.min_c},
      {"inlet_temperature", "max_c", &t.inlet_temperature.max_c},
      {"inlet_temperature", "critical_max_c", &t.inlet_temperature.critical_max_c},
      {"ecc_uncorrectable", "volatile_count", &t.ecc_uncorrectable.volatile_count},
      {"ecc_uncorrectable", "aggregate_count", &t.ecc_uncorrectable.aggregate_count},
      {"ecc_corrected_high", "volatile_count", &t.ecc_corrected_high.volatile_count},
      {"retired_pages", "warning_count", &t.retired_pages.warning_count},
      {"retired_pages", "critical_count", &t.retired_pages.critical_count},
      {"memory_high", "warning_percent", &t.memory_high.warning_percent},
      {"pcie_link_degraded", "min_utilization_percent", &t.pcie_link_degraded.min_utilization_percent},
      {"pcie_replay", "warning_per_minute", &t.pcie_replay.warning_per_minute},
      {"nvlink_errors", "warning_per_minute", &t.nvlink_errors.warning_per_minute},
      {"nvlink_errors", "warning_total", &t.nvlink_errors.warning_total},
      {"xid_recent", "window", &t.xid_recent.window},
      {"log_errors", "window", &t.log_errors.window},
      {"cuda_incompatible", "required", &t.cuda_incompatible.required},
      {"gpu_count_mismatch", "expected", &t.gpu_count_mismatch.expected},
      {"disk_space", "warning_free_percent", &t.disk_space.warning_free_percent},
      {"disk_space", "critical_free_percent", &t.disk_space.critical_free_percent},
      {"process_missing", "severity", &t.process_missing.severity},
      {"backup_stale", "max_age", &t.backup_stale.max_age},
      {"host_hung_tasks", "blocked_for", &t.host_hung_tasks.blocked_for},
      {"agent_history", "stale_after", &t.agent_history.stale_after},
      {"diagnostic_failed", "window", &t.diagnostic_failed.window},
      {"host_hung_tasks", "gpu_task_names", &t.host_hung_tasks.gpu_task_names},
      {"host_hung_tasks", "window", &t.host_hung_tasks.window},
      {"host_memory", "warning_available_percent", &t.host_memory.warning_available_percent},
      {"host_pressure", "memory_full_avg60", &t.host_pressure.memory_full_avg60},
      {"host_pressure", "io_full_avg60", &t.host_pressure.io_full_avg60},
      {"host_pressure", "cpu_some_avg60", &t.host_pressure.cpu_some_avg60},
  };
}

std::string Where(std::string_view origin, const toml::node& node, std::string_view path) {
  std::ostringstream out;
  out << origin;
  if (node.source().begin.line > 0) out << ":" << node.source().begin.line;
  out << ": " << path;
  return out.str();
}

Error TypeError(std::string_view origin, const toml::node& node, std::string_view path, std::string_view expected) {
  return Error{Where(origin, node, path) + ": expected " + std::string(expected)};
}

Result<std::vector<std::string>> StringList(const toml::node& node, std::string_view origin, std::string_view path) {
  const toml::array* array = node.as_array();
  if (array == nullptr) return TypeError(origin, node, path, "an array of strings");
  std::vector<std::string> values;
  for (const toml::node& item : *array) {
    std::optional<std::string> text = item.value<std::string>();
    if (!text || !item.is_string()) return TypeError(origin, item, path, "an array of strings");
    values.push_back(*text);
  }
  return values;
}

// Stores `node` into `target`, checking its type and range.
Status Assign(const Target& target, const toml::node& node, std::string_view origin, std::string_view path) {
  struct Visitor {
    const toml::node& node;
    std::string_view origin;
    std::string_view path;

    Status operator()(double* out) const {
      if (!node.is_number()) return TypeError(origin, node, path, "a number");
      double value = *node.value<double>();
      if (!std::isfinite(value)) return TypeError(origin, node, path, "a finite number");
      *out = value;
      return {};
    }
    Status operator()(uint64_t* out) const {
      if (!node.is_integer() || *node.value<int64_t>() < 0) return TypeError(origin, node, path, "a whole number >= 0");
      *out = static_cast<uint64_t>(*node.value<int64_t>());
      return {};
    }
    Status operator()(uint32_t* out) const {
      if (!node.is_integer() || *node.value<int64_t>() < 0 ||
          *node.value<int64_t>() > std::numeric_limits<uint32_t>::max()) {
        return TypeError(origin, node, path, "a whole number >= 0");
      }
      *out = static_cast<uint32_t>(*node.value<int64_t>());
      return {};
    }
    Status operator()(bool* out) const {
      if (!node.is_boolean()) return TypeError(origin, node, path, "true or false");
      *out = *node.value<bool>();
      return {};
    }
    Status operator()(Duration* out) const {
      std::optional<Duration> duration;
      if (node.is_string()) duration = ParseDuration(*node.value<std::string>());
      if (!duration) return TypeError(origin, node, path, "a duration such as \"30m\" or \"24h\"");
      *out = *duration;
      return {};
    }
    Status operator()(std::string* out) const {
      if (!node.is_string()) return TypeError(origin, node, path, "a string");
      *out = *node.value<std::string>();
      return {};
    }
    Status operator()(std::vector<std::string>* out) const {
      Result<std::vector<std::string>> values = StringList(node, origin, path);
      if (!values) return values.error();
      *out = std::move(values).value();
      return {};
    }
    Status operator()(Severity* out) const {
      std::optional<Severity> severity;
      if (node.is_string()) severity = SeverityFromName(*node.value<std::string>());
      if (!severity) return TypeError(origin, node, path, "one of \"ok\", \"warning\", \"critical\", \"unknown\"");
      *out = *severity;
      return {};
    }
  };
  return std::visit(Visitor{node, origin, path}, target);
}

const Binding* FindBinding(const std::vector<Binding>& bindings, std::string_view table, std::string_view key) {
  for (const Binding& binding : bindings)
    if (binding.table == table && binding.key == key) return &binding;
  return nullptr;
}

// `advice = "xid 79"`: the actions are the Xid catalog's steps for that Xid,
// so a rule and the Xid that report the same fault give one advice text.
Status ApplyAdvice(Remedy& remedy, const toml::node& node, std::string_view origin, std::string_view path) {
  std::string advice;
  if (Status status = Assign(&advice, node, origin, path); !status) return status;
  std::optional<uint32_t> code = XidOfAdvice(advice);
  const XidInfo* xid = code ? LogCatalog::Builtin().FindXid(*code) : nullptr;
  if (xid == nullptr)
    return Error{Where(origin, node, path) + ": expected \"xid N\" naming an Xid the catalog lists, not '" + advice +
                 "'"};
  remedy.actions = xid->steps.empty() ? std::vector<std::string>{xid->action} : xid->steps;
  return {};
}

Status ApplyRemedyKey(Remedy& remedy, std::string_view key, const toml::node& node, std::string_view origin,
                      std::string_view path) {
  if (key == "cause") return Assign(&remedy.cause, node, origin, path);
  if (key == "advice") return ApplyAdvice(remedy, node, origin, path);
  return Assign(&remedy.actions, node, origin, path);
}

bool IsRemedyKey(std::string_view key) { return key == "cause" || key == "actions" || key == "advice"; }

Status ApplyHost(HealthConfig& config, const toml::table& table, std::string_view origin) {
  const std::vector<Binding> bindings = HostBindings(config.host);
  for (const auto& [key, node] : table) {
    const std::string path = "host." + std::string(key.str());
    const Binding* binding = FindBinding(bindings, "host", key.str());
    if (binding == nullptr) return Error{Where(origin, node, path) + ": unknown key"};
    if (Status status = Assign(binding->target, node, origin, path); !status) return status;
  }
  return {};
}

Status ApplyRule(HealthConfig& config, std::string_view rule_id, const toml::table& table, std::string_view origin) {
  const std::vector<Binding> bindings = ThresholdBindings(config.thresholds);
  RuleSettings& rule = config.rules[std::string(rule_id)];
  for (const auto& [key, node] : table) {
    const std::string path = "rules." + std::string(rule_id) + "." + std::string(key.str());
    Status status;
    if (key == "enabled") {
      status = Assign(&rule.enabled, node, origin, path);
    } else if (key == "category") {
      status = Assign(&rule.category, node, origin, path);
      if (status) {
        if (std::string wrong = CheckRuleCategory(rule.category); !wrong.empty())
          return Error{Where(origin, node, path) + ": " + wrong};
      }
    } else if (IsRemedyKey(key.str())) {
      status = ApplyRemedyKey(rule.remedy, key.str(), node, origin, path);
    } else if (const toml::table* case_table = node.as_table()) {
      if (!IsRuleCase(rule_id, key.str())) return Error{Where(origin, node, path) + ": unknown case"};
      Remedy& remedy = rule.cases[std::string(key.str())];
      for (const auto& [case_key, case_node] : *case_table) {
        const std::string case_path = path + "." + std::string(case_key.str());
        if (!IsRemedyKey(case_key.str())) {
          return Error{Where(origin, case_node, case_path) +
                       ": unknown key (a case holds only cause and actions or advice)"};
        }
        if (Status s = ApplyRemedyKey(remedy, case_key.str(), case_node, origin, case_path); !s) return s;
      }
    } else if (const Binding* binding = FindBinding(bindings, rule_id, key.str())) {
      status = Assign(binding->target, node, origin, path);
    } else {
      return Error{Where(origin, node, path) + ": unknown key"};
    }
    if (!status) return status;
  }
  return {};
}

Status ApplyChecklist(HealthConfig& config, const toml::node& node, std::string_view origin) {
  const toml::array* array = node.as_array();
  if (array == nullptr) return TypeError(origin, node, "checklist", "an array of tables ([[checklist]])");
  std::vector<ChecklistEntry> checklist;
  for (const toml::node& item : *array) {
    const toml::table* table = item.as_table();
    if (table == nullptr) return TypeError(origin, item, "checklist", "an array of tables ([[checklist]])");
    ChecklistEntry entry;
    for (const auto& [key, value] : *table) {
      const std::string path = "checklist." + std::string(key.str());
      Status status;
      if (key == "title")
        status = Assign(&entry.title, value, origin, path);
      else if (key == "rules")
        status = Assign(&entry.rule_ids, value, origin, path);
      else
        return Error{Where(origin, value, path) + ": unknown key"};
      if (!status) return status;
    }
    if (entry.title.empty()) return Error{Where(origin, item, "checklist") + ": every item needs a title"};
    for (const std::string& id : entry.rule_ids) {
      if (IsRuleId(id)) continue;
      return Error{Where(origin, item, "checklist.rules") + ": " +
                   (IsTrendDetectorId(id) ? "'" + id + "' is a trend detector of the agent, which `check` does not run"
                                          : "unknown rule id '" + id + "'")};
    }
    checklist.push_back(std::move(entry));
  }
  config.checklist = std::move(checklist);
  return {};
}

// [maintenance.<task>]: `every` and `title`; a task not in the schedule yet needs both.
Status ApplyMaintenance(HealthConfig& config, const toml::node& node, std::string_view origin) {
  const toml::table* tasks = node.as_table();
  if (tasks == nullptr) return TypeError(origin, node, "maintenance", "a table");
  for (const auto& [name, task_node] : *tasks) {
    const std::string path = "maintenance." + std::string(name.str());
    const toml::table* table = task_node.as_table();
    if (table == nullptr) return TypeError(origin, task_node, path, "a table");
    MaintenanceTask* known = nullptr;
    for (MaintenanceTask& scheduled : config.maintenance)
      if (scheduled.name == name.str()) known = &scheduled;
    MaintenanceTask task = known ? *known : MaintenanceTask{std::string(name.str()), "", Duration{}};
    for (const auto& [key, value] : *table) {
      const std::string key_path = path + "." + std::string(key.str());
      Status status;
      if (key == "every")
        status = Assign(&task.every, value, origin, key_path);
      else if (key == "title")
        status = Assign(&task.title, value, origin, key_path);
      else
        return Error{Where(origin, value, key_path) + ": unknown key"};
      if (!status) return status;
    }
    if (task.title.empty() || task.every <= Duration::zero())
      return Error{Where(origin, task_node, path) + ": a task needs a title and a duration `every` longer than zero"};
    if (known != nullptr)
      *known = std::move(task);
    else
      config.maintenance.push_back(std::move(task));
  }
  return {};
}

// Checks that hold between keys, after every key is applied.
Status Validate(const HealthConfig& config, std::string_view origin) {
  const RuleThresholds& t = config.thresholds;
  auto fail = [&](const std::string& what) { return Error{std::string(origin) + ": " + what}; };
  if (t.temperature_high.warning_c > t.temperature_high.critical_c) {
    return fail("rules.temperature_high: warning_c is above critical_c");
  }
  if (t.disk_space.critical_free_percent > t.disk_space.warning_free_percent) {
    return fail("rules.disk_space: critical_free_percent is above warning_free_percent");
  }
  if (t.inlet_temperature.min_c > t.inlet_temperature.max_c ||
      t.inlet_temperature.max_c > t.inlet_temperature.critical_max_c) {
    return fail("rules.inlet_temperature: expected min_c <= max_c <= critical_max_c");
  }
  if (t.retired_pages.warning_count > t.retired_pages.critical_count) {
    return fail("rules.retired_pages: warning_count is above critical_count");
  }
  if (!t.cuda_incompatible.required.empty() && !ParseCudaVersion(t.cuda_incompatible.required)) {
    return fail("rules.cuda_incompatible.required: '" + t.cuda_incompatible.required +
                "' is not a CUDA version such as \"12.4\"");
  }
  return {};
}

}  // namespace

bool HealthConfig::Enabled(std::string_view rule_id) const {
  auto it = rules.find(rule_id);
  return it == rules.end() || it->second.enabled;
}

std::string CheckRuleCategory(std::string_view category) {
  for (std::string_view known : kRuleCategories)
    if (category == known) return "";
  std::string known_list;
  for (std::string_view known : kRuleCategories)
    known_list += (known_list.empty() ? "" : ", ") + std::string(known);
  return "'" + std::string(category) + "' is not a category; expected one of " + known_list;
}

std::string_view HealthConfig::Category(std::string_view rule_id) const {
  std::string_view category;
  if (auto it = rules.find(rule_id); it != rules.end()) category = it->second.category;
  else if (const CorrelationRule* correlation = correlations.Find(rule_id)) category = correlation->category;
  return category.empty() ? std::string_view("unknown") : category;
}

const Remedy& HealthConfig::RemedyFor(std::string_view rule_id, std::string_view case_name) const {
  static const Remedy kNone;
  auto rule = rules.find(rule_id);
  if (rule == rules.end()) return kNone;
  if (!case_name.empty()) {
    auto found = rule->second.cases.find(case_name);
    if (found != rule->second.cases.end()) return found->second;
  }
  return rule->second.remedy;
}

Result<HealthConfig> ApplyHealthConfig(HealthConfig base, std::string_view text, std::string_view origin) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& error) {
    std::ostringstream out;
    out << origin << ":" << error.source().begin.line << ":" << error.source().begin.column << ": "
        << error.description();
    return Error{out.str()};
  }

  for (const auto& [key, node] : root) {
    if (key == "host") {
      const toml::table* table = node.as_table();
      if (table == nullptr) return TypeError(origin, node, "host", "a table");
      if (Status status = ApplyHost(base, *table, origin); !status) return status.error();
    } else if (key == "rules") {
      const toml::table* rules = node.as_table();
      if (rules == nullptr) return TypeError(origin, node, "rules", "a table");
      for (const auto& [rule_id, rule_node] : *rules) {
        const std::string path = "rules." + std::string(rule_id.str());
        if (IsTrendDetectorId(rule_id.str())) {
          return Error{Where(origin, rule_node, path) +
                       ": a trend detector, not a rule: its thresholds go in [detectors] (docs/detectors.md)"};
        }
        if (!IsRuleId(rule_id.str())) return Error{Where(origin, rule_node, path) + ": unknown rule id"};
        const toml::table* table = rule_node.as_table();
        if (table == nullptr) return TypeError(origin, rule_node, path, "a table");
        if (Status status = ApplyRule(base, rule_id.str(), *table, origin); !status) return status.error();
      }
    } else if (key == "checklist") {
      if (Status status = ApplyChecklist(base, node, origin); !status) return status.error();
    } else if (key == "maintenance") {
      if (Status status = ApplyMaintenance(base, node, origin); !status) return status.error();
    }
    // Other top-level tables belong to other parts of gpudoctor.
  }
  if (Status status = ApplyCorrelationTables(root, origin, base.correlations, base.escalation); !status)
    return status.error();
  if (Status status = Validate(base, origin); !status) return status.error();
  return base;
}

const HealthConfig& DefaultHealthConfig() {
  static const HealthConfig config = [] {
    HealthConfig empty;
    for (std::string_view id : kRuleIds) empty.rules[std::string(id)];
    Result<HealthConfig> parsed = ApplyHealthConfig(std::move(empty), kRulesToml, "data/rules.toml");
    if (parsed) parsed = ApplyHealthConfig(std::move(parsed).value(), kCorrelationsToml, "data/correlations.toml");
    // The defaults are compiled in and covered by tests: failing here is a build error.
    assert(parsed.ok() && "data/rules.toml or data/correlations.toml does not parse");
    return parsed.ok() ? std::move(parsed).value() : HealthConfig{};
  }();
  return config;
}

Result<HealthConfig> LoadHealthConfigFile(const std::string& path) {
  auto text = ReadInputFile(path, kMaxConfigFileBytes);
  if (!text) return text.error();
  return ApplyHealthConfig(DefaultHealthConfig(), *text, path);
}

std::vector<std::string> HealthConfigKeys() {
  HostConfig host;
  RuleThresholds thresholds;
  std::vector<std::string> keys;
  for (const Binding& b : HostBindings(host)) keys.push_back("[host] " + std::string(b.key));
  for (const Binding& b : ThresholdBindings(thresholds))
    keys.push_back("[rules." + std::string(b.table) + "] " + std::string(b.key));
  return keys;
}

namespace {

// "24h", "90s", "7d", "500ms": the largest unit that divides the duration, as a config file writes it.
std::string DurationAsConfig(Duration duration) {
  const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(duration).count();
  static constexpr std::pair<int64_t, const char*> kUnits[] = {
      {86'400'000, "d"}, {3'600'000, "h"}, {60'000, "m"}, {1'000, "s"}};
  for (const auto& [size, unit] : kUnits)
    if (ms != 0 && ms % size == 0) return std::to_string(ms / size) + unit;
  return std::to_string(ms) + "ms";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> RuleThresholdValues(const HealthConfig& config,
                                                                     std::string_view rule_id) {
  RuleThresholds copy = config.thresholds;
  std::vector<std::pair<std::string, std::string>> values;
  for (const Binding& b : ThresholdBindings(copy)) {
    if (b.table != rule_id) continue;
    std::string text = std::visit(
        [](auto* target) -> std::string {
          using T = std::remove_pointer_t<decltype(target)>;
          if constexpr (std::is_same_v<T, double>) {
            std::ostringstream out;
            out << *target;
            return out.str();
          } else if constexpr (std::is_same_v<T, bool>) {
            return *target ? "true" : "false";
          } else if constexpr (std::is_same_v<T, Duration>) {
            return "\"" + DurationAsConfig(*target) + "\"";
          } else if constexpr (std::is_same_v<T, std::string>) {
            return "\"" + *target + "\"";
          } else if constexpr (std::is_same_v<T, Severity>) {
            return "\"" + std::string(SeverityName(*target)) + "\"";
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            std::string list;
            for (const std::string& item : *target) list += (list.empty() ? "\"" : ", \"") + item + "\"";
            return "[" + list + "]";
          } else {
            return std::to_string(*target);
          }
        },
        b.target);
    values.emplace_back(std::string(b.key), std::move(text));
  }
  return values;
}

Duration LogEventSpan(const HealthConfig& config) {
  const auto& thresholds = config.thresholds;
  return std::max({thresholds.xid_recent.window, thresholds.log_errors.window, thresholds.host_hung_tasks.window});
}

}  // namespace gpudoctor
