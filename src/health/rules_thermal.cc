// Rules about heat, fans and power.
#include <algorithm>
#include <optional>

#include "common/text.h"
#include "health/rule_context.h"

namespace gpudoctor::rules_internal {
namespace {

// Every hwmon and BMC sensor that could be read.
std::vector<const Sensor*> HostSensors(const RuleContext& context) {
  std::vector<const Sensor*> sensors;
  const HostSignals* host = context.input.host;
  if (host == nullptr) return sensors;
  for (const Field<std::vector<Sensor>>* source : {&host->ipmi_sensors, &host->hwmon_sensors}) {
    if (!source->has_value()) continue;
    for (const Sensor& sensor : source->value()) sensors.push_back(&sensor);
  }
  return sensors;
}

bool IsInletSensor(const Sensor& sensor, const std::vector<std::string>& names) {
  if (sensor.kind != SensorKind::kTemperature) return false;
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& name) { return ContainsIgnoreCase(sensor.name, name); });
}

std::string DescribeSensor(const Sensor& sensor) {
  std::string text = fmt::format("{} '{}'", sensor.source, sensor.name);
  if (sensor.value)
    text += fmt::format(": {} {}", FormatNumber(*sensor.value), sensor.unit);
  else if (!sensor.detail.empty())
    text += ": " + sensor.detail;
  text += fmt::format(" (status {})", SensorStatusName(sensor.status));
  return text;
}

Severity FromSensorStatus(SensorStatus status) {
  switch (status) {
    case SensorStatus::kWarning: return Severity::kWarning;
    case SensorStatus::kCritical: return Severity::kCritical;
    default: return Severity::kOk;
  }
}

// The temperatures a GPU (or its memory) is judged against, and where they
// come from.
struct TemperatureLimits {
  double warning_c;
  double critical_c;
  std::string from;  // "its maximum operating temperature 87 °C", or "" for the configured figures
};

// The card's own limit when it reports one (the lower of its maximum
// operating and slowdown temperatures), the warning gpu_limit_margin_c below
// it; the configured warning_c and critical_c otherwise.
TemperatureLimits LimitsFor(const GpuSnapshot& gpu, const RuleThresholds& thresholds) {
  const auto& config = thresholds.temperature_high;
  TemperatureLimits limits{config.warning_c, config.critical_c, ""};
  if (!config.use_gpu_limits) return limits;
  std::optional<uint32_t> limit;
  auto consider = [&](const Field<uint32_t>& gpu_limit, std::string_view name) {
    if (!gpu_limit.has_value() || gpu_limit.value() == 0 || (limit && gpu_limit.value() >= *limit)) return;
    limit = gpu_limit.value();
    limits.from = fmt::format("{} {} °C", name, gpu_limit.value());
  };
  consider(gpu.temperature_max_operating_c, "its maximum operating temperature");
  consider(gpu.temperature_slowdown_c, "its slowdown temperature");
  if (limit) {
    limits.critical_c = *limit;
    limits.warning_c = *limit - config.gpu_limit_margin_c;
  }
  return limits;
}

// The memory's limits: only a card that reports its memory's maximum
// operating temperature is judged (no guide gives one figure for all memory).
std::optional<TemperatureLimits> MemoryLimitsFor(const GpuSnapshot& gpu, const RuleThresholds& thresholds) {
  const auto& config = thresholds.temperature_high;
  if (!config.use_gpu_limits || !gpu.memory_temperature_max_c.has_value() || gpu.memory_temperature_max_c.value() == 0)
    return std::nullopt;
  const double limit = gpu.memory_temperature_max_c.value();
  return TemperatureLimits{limit - config.gpu_limit_margin_c, limit,
                           fmt::format("its memory's maximum operating temperature {} °C", limit)};
}

Severity Judge(double temperature, const TemperatureLimits& limits) {
  return temperature >= limits.critical_c  ? Severity::kCritical
         : temperature >= limits.warning_c ? Severity::kWarning
                                           : Severity::kOk;
}

// A GPU cooled by the chassis airflow: NVML reports no fan for it.
bool IsPassivelyCooled(const GpuSnapshot& gpu) {
  return gpu.fan_speeds_percent.not_supported() ||
         (gpu.fan_speeds_percent.has_value() && gpu.fan_speeds_percent.value().empty());
}

// Why no chassis fan could be read, source by source.
std::string WhyNoChassisFan(const HostSignals* host) {
  if (host == nullptr) return "the host's fan sensors were not read (captured input or --no-host)";
  auto why = [](const Field<std::vector<Sensor>>& source, std::string_view name, std::string_view absent) {
    if (source.failed()) return fmt::format("{}: {}", name, source.error());
    if (source.not_supported()) return fmt::format("{}: {}", name, absent);
    return fmt::format("{}: no fan sensor with a reading", name);
  };
  return "no chassis fan sensor could be read (" +
         why(host->hwmon_sensors, "hwmon", "no sensor chips in /sys/class/hwmon") + "; " +
         why(host->ipmi_sensors, "IPMI", "ipmitool not installed, or [host] ipmi = false") + ")";
}

}  // namespace

void TemperatureHigh(RuleContext& context) {
  size_t checked = 0, own_limits = 0, memories = 0;
  bool reported = false;
  const GpuSnapshot* hottest = nullptr;
  double hottest_margin = 0;  // how far the hottest GPU is below its warning
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    if (gpu->temperature_c.failed()) {
      context.Report("temperature_high", Severity::kUnknown, RefFor(*gpu),
                     fmt::format("{} temperature could not be read", GpuLabel(*gpu)),
                     {"temperature_c: " + gpu->temperature_c.error()});
      reported = true;
      continue;
    }
    if (!gpu->temperature_c.has_value()) continue;
    ++checked;
    const uint32_t temperature = gpu->temperature_c.value();
    const TemperatureLimits limits = LimitsFor(*gpu, context.thresholds);
    own_limits += !limits.from.empty();
    const double margin = limits.warning_c - temperature;
    if (hottest == nullptr || margin < hottest_margin) {
      hottest = gpu;
      hottest_margin = margin;
    }
    auto limits_line = [](const TemperatureLimits& l) {
      return fmt::format("warning at {} °C, critical at {} °C ({})", FormatNumber(l.warning_c),
                         FormatNumber(l.critical_c), l.from.empty() ? "the configured figures" : "from " + l.from);
    };
    if (Severity severity = Judge(temperature, limits); severity != Severity::kOk) {
      std::vector<std::string> evidence{fmt::format("{} temperature: {} °C", GpuLabel(*gpu), temperature),
                                        limits_line(limits)};
      if (gpu->temperature_slowdown_c.has_value())
        evidence.push_back(fmt::format("slowdown at {} °C", gpu->temperature_slowdown_c.value()));
      if (gpu->temperature_shutdown_c.has_value())
        evidence.push_back(fmt::format("shutdown at {} °C", gpu->temperature_shutdown_c.value()));
      if (gpu->fan_speeds_percent.has_value() && !gpu->fan_speeds_percent.value().empty()) {
        std::vector<std::string> fans;
        for (uint32_t speed : gpu->fan_speeds_percent.value()) fans.push_back(fmt::format("{}%", speed));
        evidence.push_back("fans: " + JoinWithAnd(fans));
      }
      context.Report("temperature_high", severity, RefFor(*gpu),
                     fmt::format("{} at {} °C ({} at {} °C)", GpuLabel(*gpu), temperature,
                                 severity == Severity::kCritical ? "critical" : "warning",
                                 FormatNumber(severity == Severity::kCritical ? limits.critical_c : limits.warning_c)),
                     std::move(evidence));
      reported = true;
    }
    const std::optional<TemperatureLimits> memory = MemoryLimitsFor(*gpu, context.thresholds);
    if (!memory || !gpu->memory_temperature_c.has_value()) continue;
    ++memories;
    const uint32_t memory_c = gpu->memory_temperature_c.value();
    if (Severity severity = Judge(memory_c, *memory); severity != Severity::kOk) {
      Finding& finding = context.Report(
          "temperature_high", severity, RefFor(*gpu),
          fmt::format("{} memory at {} °C ({} at {} °C)", GpuLabel(*gpu), memory_c,
                      severity == Severity::kCritical ? "critical" : "warning",
                      FormatNumber(severity == Severity::kCritical ? memory->critical_c : memory->warning_c)),
          {fmt::format("{} memory temperature: {} °C", GpuLabel(*gpu), memory_c), limits_line(*memory),
           fmt::format("GPU temperature: {} °C", temperature)});
      finding.subject = "memory";
      reported = true;
    }
  }
  if (reported || checked == 0) return;
  std::vector<std::string> evidence;
  if (own_limits < checked)
    evidence.push_back(fmt::format("{} report no temperature limit: judged at the configured {} °C warning",
                                   Plural(checked - own_limits, "GPU", "GPUs"),
                                   FormatNumber(context.thresholds.temperature_high.warning_c)));
  if (memories > 0) evidence.push_back(fmt::format("memory judged on {}", Plural(memories, "GPU", "GPUs")));
  const std::string below =
      own_limits == 0 ? FormatNumber(context.thresholds.temperature_high.warning_c) + " °C"
                      : std::string(checked == 1 ? "its warning temperature" : "their warning temperatures");
  const std::string hottest_line = fmt::format("{} °C, warning at {} °C", hottest->temperature_c.value(),
                                               FormatNumber(hottest->temperature_c.value() + hottest_margin));
  context.Pass("temperature_high",
               checked == 1 ? fmt::format("GPU {} below {} ({})", hottest->index, below,
                                          own_limits == 0 ? fmt::format("{} °C", hottest->temperature_c.value())
                                                          : hottest_line)
                            : fmt::format("All {} GPUs below {} (nearest: {} at {})", checked, below,
                                          GpuLabel(*hottest),
                                          own_limits == 0 ? fmt::format("{} °C", hottest->temperature_c.value())
                                                          : hottest_line),
               std::move(evidence));
}

void FanFailure(RuleContext& context) {
  const double hot_c = context.thresholds.fan_failure.hot_c;
  size_t gpu_fans = 0, chassis_fans = 0, passive_gpus = 0;
  bool reported = false;
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    if (IsPassivelyCooled(*gpu)) ++passive_gpus;
    const std::optional<uint32_t> temperature = gpu->temperature_c.optional();
    const bool hot = temperature && *temperature >= hot_c;
    std::string temperature_text = temperature ? fmt::format("{} temperature: {} °C", GpuLabel(*gpu), *temperature)
                                               : fmt::format("{} temperature unknown", GpuLabel(*gpu));
    if (gpu->fan_speeds_percent.failed()) {
      context.Report("fan_failure", hot ? Severity::kCritical : Severity::kWarning, RefFor(*gpu),
                     fmt::format("{} fan reports an error", GpuLabel(*gpu)),
                     {"fan speed: " + gpu->fan_speeds_percent.error(), temperature_text});
      reported = true;
      continue;
    }
    if (!gpu->fan_speeds_percent.has_value()) continue;
    const std::vector<uint32_t>& speeds = gpu->fan_speeds_percent.value();
    std::vector<std::string> stopped;
    for (size_t fan = 0; fan < speeds.size(); ++fan) {
      ++gpu_fans;
      if (speeds[fan] == 0 && hot) stopped.push_back(fmt::format("fan {}", fan));
    }
    if (stopped.empty()) continue;
    context.Report(
        "fan_failure", Severity::kCritical, RefFor(*gpu),
        fmt::format("{} {} at 0% while the GPU is at {} °C", GpuLabel(*gpu), JoinWithAnd(stopped), *temperature),
        {fmt::format("{} at 0%", JoinWithAnd(stopped)), temperature_text,
         fmt::format("a stopped fan is a failure at or above {} °C", FormatNumber(hot_c))});
    reported = true;
  }
  for (const Sensor* sensor : HostSensors(context)) {
    if (sensor->kind != SensorKind::kFan || sensor->status == SensorStatus::kNoReading) continue;
    ++chassis_fans;
    Severity severity = FromSensorStatus(sensor->status);
    if (severity == Severity::kOk) continue;
    context.Report("fan_failure", severity, std::nullopt, fmt::format("Chassis fan '{}' reports a fault", sensor->name),
                   {DescribeSensor(*sensor)});
    reported = true;
  }
  if (reported) return;
  if (gpu_fans + chassis_fans == 0) {
    if (passive_gpus > 0)
      context.Unchecked("fan_failure", "the GPUs are passively cooled (NVML reports no fan on them) and " +
                                           WhyNoChassisFan(context.input.host));
    return;
  }
  std::vector<std::string> parts;
  if (gpu_fans > 0) parts.push_back(Plural(gpu_fans, "GPU fan", "GPU fans"));
  if (chassis_fans > 0) parts.push_back(Plural(chassis_fans, "chassis fan", "chassis fans"));
  std::string summary = "Fans turning (" + JoinWithAnd(parts);
  if (passive_gpus > 0) summary += fmt::format("; {} passively cooled", Plural(passive_gpus, "GPU", "GPUs"));
  context.Pass("fan_failure", summary + ")");
}

void ClockThrottle(RuleContext& context) {
  constexpr uint64_t kHardware =
      clock_event::kHwSlowdown | clock_event::kHwThermalSlowdown | clock_event::kHwPowerBrakeSlowdown;
  size_t checked = 0;
  bool reported = false;
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    if (!gpu->clock_event_reasons.has_value()) continue;
    ++checked;
    const uint64_t reasons = gpu->clock_event_reasons.value();
    const bool hardware = reasons & kHardware;
    if (!hardware && !(reasons & clock_event::kSwThermalSlowdown)) continue;
    std::vector<std::string> names;
    for (const std::string& name : DecodeClockEventReasons(reasons))
      if (name != "gpu_idle" && name != "sw_power_cap" && name != "applications_clocks_setting") names.push_back(name);
    std::vector<std::string> evidence{
        fmt::format("clock event reasons: 0x{:x} ({})", reasons, JoinWithAnd(DecodeClockEventReasons(reasons)))};
    if (gpu->temperature_c.has_value())
      evidence.push_back(fmt::format("temperature: {} °C", gpu->temperature_c.value()));
    if (gpu->sm_clock_mhz.has_value()) evidence.push_back(fmt::format("SM clock: {} MHz", gpu->sm_clock_mhz.value()));
    if (gpu->power_draw_w.has_value() && gpu->power_limit_w.has_value()) {
      evidence.push_back(fmt::format("power: {} W of {} W", FormatNumber(gpu->power_draw_w.value()),
                                     FormatNumber(gpu->power_limit_w.value())));
    }
    // The slowdown's source picks the advice: the power system's brake, the
    // GPU's own heat (cooled by temperature_high's steps), or a board signal.
    const char* source = (reasons & clock_event::kHwPowerBrakeSlowdown) ? "power_brake"
                         : (reasons & (clock_event::kSwThermalSlowdown | clock_event::kHwThermalSlowdown)) ? "heat"
                                                                                                            : "";
    context.Report("clock_throttle", hardware ? Severity::kCritical : Severity::kWarning, RefFor(*gpu),
                   fmt::format("{} clocks slowed: {}", GpuLabel(*gpu), JoinWithAnd(names)), std::move(evidence),
                   source);
    reported = true;
  }
  if (!reported && checked > 0) {
    context.Pass("clock_throttle",
                 fmt::format("No GPU slowed by heat or hardware slowdown ({})", Plural(checked, "GPU", "GPUs")));
  }
}

void PowerCapped(RuleContext& context) {
  const double allowance = 1 + context.thresholds.power_capped.over_limit_percent / 100;
  size_t checked = 0;
  bool reported = false;
  std::vector<std::string> at_cap;
  for (const GpuSnapshot* gpu : context.ReadableGpus()) {
    if (!gpu->power_draw_w.has_value() || !gpu->power_limit_w.has_value() || gpu->power_limit_w.value() <= 0) continue;
    ++checked;
    const double draw = gpu->power_draw_w.value(), limit = gpu->power_limit_w.value();
    const bool capped =
        gpu->clock_event_reasons.has_value() && (gpu->clock_event_reasons.value() & clock_event::kSwPowerCap);
    if (capped) at_cap.push_back(GpuLabel(*gpu));
    if (draw <= limit * allowance) continue;
    std::vector<std::string> evidence{fmt::format("power draw: {} W", FormatNumber(draw)),
                                      fmt::format("power limit: {} W", FormatNumber(limit))};
    if (capped) evidence.push_back("the driver reports the GPU held at its power cap (sw_power_cap)");
    context.Report(
        "power_capped", Severity::kWarning, RefFor(*gpu),
        fmt::format("{} draws {} W, above its {} W limit", GpuLabel(*gpu), FormatNumber(draw), FormatNumber(limit)),
        std::move(evidence));
    reported = true;
  }
  if (reported || checked == 0) return;
  std::vector<std::string> evidence;
  if (!at_cap.empty()) evidence.push_back(JoinWithAnd(at_cap) + " at the power cap (normal under full load)");
  context.Pass("power_capped",
               fmt::format("{} within {} power limit",
                           checked == 1 ? std::string("The GPU") : fmt::format("All {} GPUs", checked),
                           checked == 1 ? "its" : "their"),
               std::move(evidence));
}

void PsuFault(RuleContext& context) {
  size_t checked = 0;
  bool reported = false;
  for (const Sensor* sensor : HostSensors(context)) {
    if (sensor->kind != SensorKind::kPowerSupply || sensor->status == SensorStatus::kNoReading) continue;
    ++checked;
    Severity severity = FromSensorStatus(sensor->status);
    if (severity == Severity::kOk) continue;
    context.Report("psu_fault", severity, std::nullopt,
                   fmt::format("Power supply '{}': {}", sensor->name, sensor->detail), {DescribeSensor(*sensor)});
    reported = true;
  }
  if (!reported && checked > 0) {
    context.Pass("psu_fault", fmt::format("No power supply fault ({})", Plural(checked, "sensor", "sensors")));
  }
}

void SensorAlarm(RuleContext& context) {
  const auto& inlet_names = context.thresholds.inlet_temperature.sensor_names;
  size_t checked = 0;
  bool reported = false;
  for (const Sensor* sensor : HostSensors(context)) {
    // Fans, power supplies and inlet air have rules of their own.
    if (sensor->kind == SensorKind::kFan || sensor->kind == SensorKind::kPowerSupply ||
        IsInletSensor(*sensor, inlet_names) || sensor->status == SensorStatus::kNoReading) {
      continue;
    }
    ++checked;
    Severity severity = FromSensorStatus(sensor->status);
    if (severity == Severity::kOk) continue;
    std::vector<std::string> evidence{DescribeSensor(*sensor)};
    if (sensor->value && !sensor->detail.empty() && StartsWith(sensor->source, "hwmon")) {
      evidence.push_back("sysfs: " + sensor->detail);  // the raw readings and limits
    }
    context.Report("sensor_alarm", severity, std::nullopt,
                   fmt::format("{} sensor '{}' beyond its alarm threshold", SensorKindName(sensor->kind), sensor->name),
                   std::move(evidence));
    reported = true;
  }
  if (!reported && checked > 0) {
    context.Pass("sensor_alarm",
                 fmt::format("{} within limits", Plural(checked, "hardware sensor", "hardware sensors")));
  }
}

void InletTemperature(RuleContext& context) {
  const auto& config = context.thresholds.inlet_temperature;
  std::vector<std::string> readings;
  bool reported = false;
  for (const Sensor* sensor : HostSensors(context)) {
    if (!IsInletSensor(*sensor, config.sensor_names) || !sensor->value) continue;
    const double value = *sensor->value;
    readings.push_back(fmt::format("'{}' {} °C", sensor->name, FormatNumber(value)));
    Severity severity = value > config.critical_max_c                  ? Severity::kCritical
                        : value > config.max_c || value < config.min_c ? Severity::kWarning
                                                                       : Severity::kOk;
    if (severity == Severity::kOk) continue;
    context.Report(
        "inlet_temperature", severity, std::nullopt,
        fmt::format("Inlet air at {} °C ({} {}-{} °C)", FormatNumber(value), value < config.min_c ? "below" : "above",
                    FormatNumber(config.min_c), FormatNumber(config.max_c)),
        {DescribeSensor(*sensor), fmt::format("recommended {}-{} °C, critical above {} °C", FormatNumber(config.min_c),
                                              FormatNumber(config.max_c), FormatNumber(config.critical_max_c))});
    reported = true;
  }
  if (!reported && !readings.empty()) {
    context.Pass("inlet_temperature",
                 fmt::format("Inlet air within {}-{} °C", FormatNumber(config.min_c), FormatNumber(config.max_c)),
                 std::move(readings));
  }
}

}  // namespace gpudoctor::rules_internal
