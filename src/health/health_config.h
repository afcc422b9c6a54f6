// HealthConfig: every threshold, text and switch the health rules use.
//
// The defaults live in data/rules.toml, which is compiled into the binary; a
// config file uses the same layout and replaces only the keys it sets. The
// remediation text (cause and actions) is data too, so operators can adapt
// it to their site without touching code. docs/findings.md lists every key.
//
//   Result<HealthConfig> config = LoadHealthConfigFile("/etc/gpudoctor.toml");
//   if (!config) return Fail(config.error().message);
//   HostSignals host = CollectHostSignals(config->host, env);
//   std::vector<Finding> findings = EvaluateRules(input, *config);
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "health/correlate/correlation_config.h"
#include "health/finding.h"
#include "health/maintenance.h"
#include "host/host_signals.h"

namespace gpudoctor {

// Thresholds, one struct per rule that has any; names match [rules.<id>] keys.
struct RuleThresholds {
  struct {
    double warning_c = 0;   // for a card that reports no limit of its own (or use_gpu_limits = false)
    double critical_c = 0;
    bool use_gpu_limits = true;      // judge each card (and its memory) by the limits NVML reports for it
    double gpu_limit_margin_c = 0;   // warning this far below the card's limit
  } temperature_high;
  struct {
    double hot_c = 0;
  } fan_failure;
  struct {
    double over_limit_percent = 0;
  } power_capped;
  struct {
    std::vector<std::string> sensor_names;
    double min_c = 0;
    double max_c = 0;
    double critical_max_c = 0;
  } inlet_temperature;
  struct {
    uint64_t volatile_count = 0;
    uint64_t aggregate_count = 0;
  } ecc_uncorrectable;
  struct {
    uint64_t volatile_count = 0;
  } ecc_corrected_high;
  struct {
    uint64_t warning_count = 0;
    uint64_t critical_count = 0;
  } retired_pages;
  struct {
    double warning_percent = 0;
  } memory_high;
  struct {
    double min_utilization_percent = 0;
  } pcie_link_degraded;
  struct {
    double warning_per_minute = 0;
  } pcie_replay;
  struct {
    double warning_per_minute = 0;
    uint64_t warning_total = 0;  // one snapshot alone: errors on one link since the counters were reset
  } nvlink_errors;
  struct {
    Duration window{};
  } xid_recent;
  struct {
    Duration window{};
  } log_errors;
  struct {
    std::string required;  // "12.4"; empty: not checked
  } cuda_incompatible;
  struct {
    uint64_t expected = 0;  // 0: not checked
  } gpu_count_mismatch;
  struct {
    double warning_free_percent = 0;
    double critical_free_percent = 0;
  } disk_space;
  struct {
    Severity severity = Severity::kCritical;
  } process_missing;
  struct {
    Duration max_age{};
  } backup_stale;
  struct {
    Duration blocked_for{};  // when the kernel's hung_task_timeout_secs is unknown or 0
    std::vector<std::string> gpu_task_names;
    Duration window{};
  } host_hung_tasks;
  struct {
    double warning_available_percent = 0;
  } host_memory;
  struct {
    double memory_full_avg60 = 0;
    double io_full_avg60 = 0;
    double cpu_some_avg60 = 0;
  } host_pressure;
  struct {
    Duration stale_after{};
  } agent_history;
  struct {
    Duration window{};
  } diagnostic_failed;
};

// The categories a rule or correlation may name: the causes triage weighs.
inline constexpr std::string_view kRuleCategories[] = {"pcie",   "memory",      "power", "thermal",
                                                       "driver", "application", "host",  "unknown"};
// "" when `category` is one of kRuleCategories, else the message that says so.
std::string CheckRuleCategory(std::string_view category);

// Everything about one rule that is not a threshold.
struct RuleSettings {
  bool enabled = true;
  std::string category;  // thermal, power, pcie, memory, driver, application, host, unknown
  Remedy remedy;
  std::map<std::string, Remedy, std::less<>> cases;  // [rules.<id>.<case>]
};

// One line of the weekly checklist and the rules that decide it.
struct ChecklistEntry {
  std::string title;
  std::vector<std::string> rule_ids;
};

struct HealthConfig {
  HostConfig host;  // [host]: what the host signals collect
  RuleThresholds thresholds;
  std::map<std::string, RuleSettings, std::less<>> rules;  // one entry per rule id
  std::vector<ChecklistEntry> checklist;
  std::vector<MaintenanceTask> maintenance;  // [maintenance.<task>]: the upkeep schedule
  CorrelationConfig correlations;  // [correlations.<id>]: one story per incident
  EscalationConfig escalation;     // [escalation]: the agent's history makes repeated trouble worse news

  bool Enabled(std::string_view rule_id) const;
  // A rule's or a correlation's category; "unknown" when none is set.
  std::string_view Category(std::string_view rule_id) const;
  // The remedy of `rule_id`'s case `case_name`, or the rule's own remedy
  // when the case has none (or `case_name` is empty).
  const Remedy& RemedyFor(std::string_view rule_id, std::string_view case_name = {}) const;
};

// The compiled-in defaults of data/rules.toml and data/correlations.toml.
const HealthConfig& DefaultHealthConfig();

// Applies the TOML `text` on top of `base`. Unknown keys in [host],
// [rules.*], [correlations.*] and [escalation], unknown rule ids and values
// of the wrong type are errors that name the key; other top-level tables are
// left to other modules. A
// [[checklist]] array, when present, replaces the whole checklist.
// `origin` names the text in error messages (a file name).
Result<HealthConfig> ApplyHealthConfig(HealthConfig base, std::string_view text, std::string_view origin);

// The largest config file gpudoctor reads (every command's --config, the
// agent's too); data/rules.toml, the whole default set, is about 25 KiB.
inline constexpr uint64_t kMaxConfigFileBytes = 1 << 20;

// DefaultHealthConfig() with the file at `path` applied. The file is read
// under the input rule (common/input_file.h), at most kMaxConfigFileBytes.
Result<HealthConfig> LoadHealthConfigFile(const std::string& path);

// "[rules.temperature_high] warning_c", ... : every threshold key, for docs and tests.
std::vector<std::string> HealthConfigKeys();

// The keys of [rules.<rule_id>] with their values in `config`, as TOML writes
// them ("warning_c", "75"; "window", "\"24h\""), in the order of docs/findings.md.
std::vector<std::pair<std::string, std::string>> RuleThresholdValues(const HealthConfig& config,
                                                                     std::string_view rule_id);

// How far back any rule looks at log events: the longest of their windows.
// Older events can be dropped while a log is read.
Duration LogEventSpan(const HealthConfig& config);

}  // namespace gpudoctor
