#include "health/detectors/trend_config.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <sstream>

#include "common/text.h"
#include "health/detectors/trend_config_toml.h"
#include "health/toml_table_reader.h"

namespace gpudoctor {
namespace {

// Applies `read` to the sub-table `name` when present.
template <typename ReadFields>
std::optional<Error> Section(const toml::table& detectors, const char* name, ReadFields read) {
  const toml::node* node = detectors.get(name);
  if (!node) return std::nullopt;
  const toml::table* table = node->as_table();
  if (!table) return Error{std::string("detectors.") + name + ": expected a table"};
  TomlTableReader reader(*table, std::string("detectors.") + name);
  read(reader);
  return reader.Finish();
}

std::optional<Error> ReadJob(const toml::table& table, size_t position, JobWatchConfig& job) {
  TomlTableReader reader(table, "detectors.job[" + std::to_string(position) + "]");
  std::string log, heartbeat;
  reader.Read("name", job.name);
  reader.Read("log", log);
  reader.Read("heartbeat", heartbeat);
  reader.ReadRegex("progress_regex", job.progress_regex);
  reader.ReadRegex("loss_regex", job.loss_regex);
  reader.Read("stall_after", job.stall_after);
  reader.Read("flat_loss_window", job.flat_loss_window);
  reader.Read("flat_loss_min_values", job.flat_loss_min_values);
  reader.Read("flat_loss_tolerance", job.flat_loss_tolerance);
  reader.Read("require_gpu_processes", job.require_gpu_processes);
  if (log.empty() == heartbeat.empty()) reader.Fail("log", "set exactly one of `log` and `heartbeat`");
  job.heartbeat = !heartbeat.empty();
  job.path = job.heartbeat ? heartbeat : log;
  if (job.name.empty()) job.name = job.path;
  if (!job.loss_regex.empty() && RE2(job.loss_regex, RE2::Quiet).NumberOfCapturingGroups() < 1)
    reader.Fail("loss_regex", "needs a capture group around the loss value");
  return reader.Finish();
}

}  // namespace

Duration TrendConfig::LongestWindow() const {
  Duration longest = std::max({utilization_stuck.after, utilization_flapping.window, tensor_cores_idle.after,
                               gpu_straggler.after, memory_leak.window, counter_rates.window, cooling_failure.window});
  for (const JobWatchConfig& job : jobs) longest = std::max(longest, job.flat_loss_window);
  return longest + max_sample_gap;
}

Result<TrendConfig> TrendConfigFromToml(const toml::table& root) {
  TrendConfig config;
  const toml::node* node = root.get("detectors");
  if (!node) return config;
  const toml::table* detectors = node->as_table();
  if (!detectors) return Error{"detectors: expected a table"};

  std::optional<Error> error;
  auto check = [&](std::optional<Error> result) {
    if (!error) error = std::move(result);
  };
  check(Section(*detectors, "utilization_stuck", [&](TomlTableReader& r) {
    UtilizationStuckConfig& c = config.utilization_stuck;
    r.Read("after", c.after);
    r.Read("high_percent", c.high_percent);
    r.Read("low_percent", c.low_percent);
    r.Read("busy_wait_power_fraction", c.busy_wait_power_fraction);
    r.Read("busy_wait_sm_active", c.busy_wait_sm_active);
  }));
  check(Section(*detectors, "tensor_cores_idle", [&](TomlTableReader& r) {
    TensorCoresIdleConfig& c = config.tensor_cores_idle;
    r.Read("after", c.after);
    r.Read("min_utilization_percent", c.min_utilization_percent);
    r.Read("min_sm_active", c.min_sm_active);
    r.Read("max_tensor_active", c.max_tensor_active);
  }));
  check(Section(*detectors, "utilization_flapping", [&](TomlTableReader& r) {
    UtilizationFlappingConfig& c = config.utilization_flapping;
    r.Read("window", c.window);
    r.Read("high_percent", c.high_percent);
    r.Read("low_percent", c.low_percent);
    r.Read("min_transitions", c.min_transitions);
  }));
  check(Section(*detectors, "gpu_straggler", [&](TomlTableReader& r) {
    StragglerConfig& c = config.gpu_straggler;
    r.Read("after", c.after);
    r.Read("idle_percent", c.idle_percent);
    r.Read("busy_percent", c.busy_percent);
    r.Read("min_busy_peers", c.min_busy_peers);
  }));
  check(Section(*detectors, "memory_leak", [&](TomlTableReader& r) {
    MemoryLeakConfig& c = config.memory_leak;
    r.Read("window", c.window);
    r.Read("min_span", c.min_span);
    r.Read("min_rate_mib_per_min", c.min_rate_mib_per_min);
    r.Read("phases", c.phases);
    r.Read("min_trough_rise_mib", c.min_trough_rise_mib);
    r.Read("min_trough_rise_share", c.min_trough_rise_share);
    r.Read("critical_time_to_full", c.critical_time_to_full);
    if (c.phases < 2) r.Fail("phases", "needs at least 2");
  }));
  check(Section(*detectors, "counter_rates", [&](TomlTableReader& r) {
    CounterRateConfig& c = config.counter_rates;
    r.Read("window", c.window);
    r.Read("min_span", c.min_span);
    r.Read("ecc_corrected_per_min", c.ecc_corrected_per_min);
    r.Read("pcie_replays_per_min", c.pcie_replays_per_min);
    r.Read("nvlink_errors_per_min", c.nvlink_errors_per_min);
  }));
  check(Section(*detectors, "cooling_failure", [&](TomlTableReader& r) {
    CoolingConfig& c = config.cooling_failure;
    r.Read("window", c.window);
    r.Read("min_rise_c", c.min_rise_c);
    r.Read("min_late_rise_c", c.min_late_rise_c);
    r.Read("min_late_to_early_ratio", c.min_late_to_early_ratio);
    r.Read("util_band_percent", c.util_band_percent);
    r.Read("power_band_fraction", c.power_band_fraction);
    r.Read("fan_max_percent", c.fan_max_percent);
    r.Read("critical_temperature_c", c.critical_temperature_c);
  }));
  if (error) return *error;

  TomlTableReader top(*detectors, "detectors");
  top.Read("max_sample_gap", config.max_sample_gap);
  for (const char* section : {"utilization_stuck", "utilization_flapping", "tensor_cores_idle", "gpu_straggler",
                              "memory_leak", "counter_rates", "cooling_failure", "job"})
    top.ReadElsewhere(section);
  if (auto top_error = top.Finish()) return *top_error;
  if (const toml::node* jobs = detectors->get("job")) {
    const toml::array* list = jobs->as_array();
    if (!list) return Error{"detectors.job: expected an array of tables ([[detectors.job]])"};
    for (size_t i = 0; i < list->size(); ++i) {
      const toml::table* table = (*list)[i].as_table();
      if (!table) return Error{"detectors.job[" + std::to_string(i) + "]: expected a table"};
      JobWatchConfig job;
      if (auto job_error = ReadJob(*table, i, job)) return *job_error;
      // The name tells the job's findings apart (their subject).
      for (size_t earlier = 0; earlier < config.jobs.size(); ++earlier) {
        if (config.jobs[earlier].name == job.name)
          return Error{fmt::format("detectors.job[{}].name: '{}' is already the name of detectors.job[{}]", i,
                                   job.name, earlier)};
      }
      config.jobs.push_back(std::move(job));
    }
  }
  return config;
}

Result<TrendConfig> ParseTrendConfig(std::string_view toml_text) {
  try {
    toml::table root = toml::parse(toml_text);
    return TrendConfigFromToml(root);
  } catch (const toml::parse_error& error) {
    std::ostringstream message;
    message << "config line " << error.source().begin.line << ": " << error.description();
    return Error{message.str()};
  }
}

}  // namespace gpudoctor
