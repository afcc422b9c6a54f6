#include "host/host_signals.h"

#include <cmath>

#include "host/host_parsers.h"
#include "host/readers.h"

namespace gpudoctor {
namespace host_internal {

Field<std::vector<Sensor>> ReadIpmiSensors(const HostConfig& config, HostEnv& env) {
  if (!config.ipmi) return Field<std::vector<Sensor>>::NotSupported();
  CommandResult result = env.RunCommand({"ipmitool", "sdr", "elist"}, config.command_timeout);
  switch (result.status) {
    case CommandStatus::kNotInstalled: return Field<std::vector<Sensor>>::NotSupported();
    case CommandStatus::kTimedOut:
      return Field<std::vector<Sensor>>::Failed("ipmitool sdr elist: no answer from the BMC within the deadline");
    case CommandStatus::kFailedToStart: return Field<std::vector<Sensor>>::Failed(result.message);
    case CommandStatus::kExited: break;
  }
  if (result.exit_code != 0) {
    const std::string first_error = result.errors.substr(0, result.errors.find('\n'));
    return Field<std::vector<Sensor>>::Failed("ipmitool sdr elist exited with status " +
                                              std::to_string(result.exit_code) +
                                              (first_error.empty() ? "" : ": " + first_error));
  }
  return Field<std::vector<Sensor>>::Value(ParseIpmiSdrList(result.output));
}

}  // namespace host_internal

std::optional<uint32_t> PcieGenerationForSpeed(double gts) {
  struct Generation {
    double gts;
    uint32_t generation;
  };
  static constexpr Generation kGenerations[] = {{2.5, 1}, {5, 2}, {8, 3}, {16, 4}, {32, 5}, {64, 6}, {128, 7}};
  for (const Generation& g : kGenerations)
    if (std::fabs(gts - g.gts) < 0.01) return g.generation;
  return std::nullopt;
}

const char* SensorKindName(SensorKind kind) {
  switch (kind) {
    case SensorKind::kTemperature: return "temperature";
    case SensorKind::kFan: return "fan";
    case SensorKind::kVoltage: return "voltage";
    case SensorKind::kPower: return "power";
    case SensorKind::kCurrent: return "current";
    case SensorKind::kPowerSupply: return "power_supply";
    case SensorKind::kOther: return "other";
  }
  return "other";
}

const char* SensorStatusName(SensorStatus status) {
  switch (status) {
    case SensorStatus::kOk: return "ok";
    case SensorStatus::kWarning: return "warning";
    case SensorStatus::kCritical: return "critical";
    case SensorStatus::kNoReading: return "no_reading";
  }
  return "no_reading";
}

HostSignals CollectHostSignals(const HostConfig& config, HostEnv& env) {
  HostSignals signals;
  host_internal::ReadProcSignals(config, env, signals);
  host_internal::ReadSysfsSignals(env, signals);
  host_internal::ReadStorageSignals(config, env, signals);
  signals.ipmi_sensors = host_internal::ReadIpmiSensors(config, env);
  return signals;
}

}  // namespace gpudoctor
