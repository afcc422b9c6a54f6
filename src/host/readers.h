// Internal to gd_host: one reader per group of signals, each turning what
// HostEnv gives into Fields. CollectHostSignals calls them in turn.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "host/host_env.h"
#include "host/host_signals.h"

namespace gpudoctor::host_internal {

// NotSupported when `path` does not exist, Failed when it cannot be read or
// `parse` rejects it, else the parsed value.
template <typename T, typename Parse>
Field<T> ReadParsed(const HostEnv& env, std::string_view path, Parse parse) {
  if (!env.Exists(path)) return Field<T>::NotSupported();
  Result<std::string> text = env.ReadFile(path);
  if (!text) return Field<T>::Failed(text.error().message);
  Result<T> parsed = parse(*text);
  if (!parsed) return Field<T>::Failed(std::string(path) + ": " + parsed.error().message);
  return Field<T>::Value(std::move(parsed).value());
}

// /proc: load, pressure, memory, processes, blocked tasks.
void ReadProcSignals(const HostConfig& config, const HostEnv& env, HostSignals& signals);
// /sys: NVIDIA PCI devices and their links, hwmon, kernel modules, CPUs.
void ReadSysfsSignals(const HostEnv& env, HostSignals& signals);
// statvfs of the disk paths and the newest file of each backup directory.
void ReadStorageSignals(const HostConfig& config, const HostEnv& env, HostSignals& signals);
// BMC sensors through ipmitool.
Field<std::vector<Sensor>> ReadIpmiSensors(const HostConfig& config, HostEnv& env);

}  // namespace gpudoctor::host_internal
