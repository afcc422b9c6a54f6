#include "host/host_parsers.h"

#include <re2/re2.h>

#include <cmath>
#include <ctime>

#include "common/text.h"

namespace gpudoctor {
namespace {

std::optional<double> FiniteDouble(std::string_view text) {
  auto value = ParseDouble(text);
  if (!value || !std::isfinite(*value)) return std::nullopt;
  return value;
}

std::optional<PressureAverages> ParsePressureLine(std::string_view line) {
  PressureAverages averages;
  int seen = 0;
  auto words = SplitBlanks(line);  // "some avg10=0.00 avg60=0.00 avg300=0.00 total=0"
  for (size_t i = 1; i < words.size(); ++i) {
    std::string_view word = words[i];
    size_t eq = word.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    std::string_view key = word.substr(0, eq), value = word.substr(eq + 1);
    if (key == "total") {
      auto total = ParseInt<uint64_t>(value);
      if (!total) return std::nullopt;
      averages.total_us = *total;
      ++seen;
      continue;
    }
    auto number = FiniteDouble(value);
    if (!number) return std::nullopt;
    if (key == "avg10")
      averages.avg10 = *number, ++seen;
    else if (key == "avg60")
      averages.avg60 = *number, ++seen;
    else if (key == "avg300")
      averages.avg300 = *number, ++seen;
  }
  if (seen != 4) return std::nullopt;
  return averages;
}

SensorStatus IpmiStatus(std::string_view status) {
  status = Trim(status);
  // ipmitool prints ok, nc (non-critical), cr (critical), nr (non-recoverable),
  // ns (no reading); some versions prefix l/u for lower/upper.
  if (status == "ok") return SensorStatus::kOk;
  if (EndsWith(status, "nr") || EndsWith(status, "cr")) return SensorStatus::kCritical;
  if (EndsWith(status, "nc")) return SensorStatus::kWarning;
  return SensorStatus::kNoReading;
}

bool LooksLikePowerSupply(std::string_view name, std::string_view entity) {
  if (StartsWith(entity, "10.")) return true;  // IPMI entity 10: power supply
  std::string lower = ToLower(name);
  if (lower.find("psu") != std::string::npos || lower.find("power supply") != std::string::npos) return true;
  return lower.size() > 2 && lower[0] == 'p' && lower[1] == 's' &&
         (std::isdigit(static_cast<unsigned char>(lower[2])) || lower[2] == ' ' || lower[2] == '_');
}

// Asserted states of a discrete sensor that mean something is wrong.
SensorStatus DiscreteStatus(std::string_view states) {
  static const char* const kCritical[] = {"failure",      "fail",         "ac lost",        "input lost",
                                          "out-of-range", "config error", "non-recoverable"};
  static const char* const kWarning[] = {"predictive", "redundancy lost", "redundancy degraded", "non-critical"};
  for (const char* word : kCritical)
    if (ContainsIgnoreCase(states, word)) return SensorStatus::kCritical;
  for (const char* word : kWarning)
    if (ContainsIgnoreCase(states, word)) return SensorStatus::kWarning;
  return SensorStatus::kOk;
}

}  // namespace

Result<LoadAverage> ParseLoadAverage(std::string_view text) {
  auto words = SplitBlanks(Trim(text));
  if (words.size() < 4) return Error{"loadavg: expected 5 fields"};
  auto one = FiniteDouble(words[0]), five = FiniteDouble(words[1]), fifteen = FiniteDouble(words[2]);
  size_t slash = words[3].find('/');
  if (!one || !five || !fifteen || slash == std::string_view::npos) return Error{"loadavg: malformed"};
  auto runnable = ParseInt<uint32_t>(words[3].substr(0, slash));
  auto total = ParseInt<uint32_t>(words[3].substr(slash + 1));
  if (!runnable || !total) return Error{"loadavg: malformed task counts"};
  return LoadAverage{*one, *five, *fifteen, *runnable, *total};
}

Result<Pressure> ParsePressure(std::string_view text) {
  Pressure pressure;
  bool have_some = false;
  for (std::string_view line : Split(text, '\n')) {
    line = Trim(line);
    if (line.empty()) continue;
    auto averages = ParsePressureLine(line);
    if (!averages) return Error{"pressure: malformed line '" + std::string(line) + "'"};
    if (StartsWith(line, "some "))
      pressure.some = *averages, have_some = true;
    else if (StartsWith(line, "full "))
      pressure.full = *averages;
  }
  if (!have_some) return Error{"pressure: no 'some' line"};
  return pressure;
}

Result<MemoryInfo> ParseMemInfo(std::string_view text) {
  MemoryInfo info;
  std::optional<uint64_t> total, available, swap_total, swap_free;
  for (std::string_view line : Split(text, '\n')) {
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = line.substr(0, colon);
    auto words = SplitBlanks(line.substr(colon + 1));
    if (words.empty()) continue;
    auto number = ParseInt<uint64_t>(words[0]);
    if (!number) continue;
    uint64_t bytes = words.size() > 1 && words[1] == "kB" ? *number * 1024 : *number;
    if (key == "MemTotal")
      total = bytes;
    else if (key == "MemAvailable")
      available = bytes;
    else if (key == "SwapTotal")
      swap_total = bytes;
    else if (key == "SwapFree")
      swap_free = bytes;
  }
  if (!total || !available) return Error{"meminfo: MemTotal or MemAvailable missing"};
  info.total_bytes = *total;
  info.available_bytes = *available;
  info.swap_total_bytes = swap_total.value_or(0);
  info.swap_free_bytes = swap_free.value_or(0);
  return info;
}

Result<uint32_t> ParseCpuList(std::string_view text) {
  text = Trim(text);
  if (text.empty()) return Error{"cpu list: empty"};
  uint32_t count = 0;
  for (std::string_view range : Split(text, ',')) {
    size_t dash = range.find('-');
    auto first = ParseInt<uint32_t>(range.substr(0, dash));
    auto last = dash == std::string_view::npos ? first : ParseInt<uint32_t>(range.substr(dash + 1));
    if (!first || !last || *last < *first || *last - *first > 1'000'000) {
      return Error{"cpu list: malformed '" + std::string(range) + "'"};
    }
    count += *last - *first + 1;
  }
  return count;
}

Result<ProcStat> ParseProcStat(std::string_view text) {
  size_t open = text.find('(');
  size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return Error{"stat: no command name"};
  }
  auto pid = ParseInt<uint32_t>(text.substr(0, open));
  std::string_view rest = Trim(text.substr(close + 1));
  if (!pid || rest.empty()) return Error{"stat: malformed"};
  ProcStat stat{*pid, std::string(text.substr(open + 1, close - open - 1)), rest.front()};
  // After the name: state is field 3, the parent field 4, the start time field 22.
  const std::vector<std::string_view> fields = SplitBlanks(rest);
  if (fields.size() > 1) stat.parent_pid = ParseInt<uint32_t>(fields[1]).value_or(0);
  if (fields.size() > 19) stat.start_time_ticks = ParseInt<uint64_t>(fields[19]).value_or(0);
  return stat;
}

Result<uint64_t> ParseContextSwitches(std::string_view text) {
  std::optional<uint64_t> voluntary, involuntary;
  for (std::string_view line : Split(text, '\n')) {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    if (key == "voluntary_ctxt_switches") voluntary = ParseInt<uint64_t>(Trim(line.substr(colon + 1)));
    if (key == "nonvoluntary_ctxt_switches") involuntary = ParseInt<uint64_t>(Trim(line.substr(colon + 1)));
  }
  if (!voluntary || !involuntary) return Error{"status: no context switch counts"};
  return *voluntary + *involuntary;
}

Result<double> ParsePcieSpeed(std::string_view text) {
  auto words = SplitBlanks(Trim(text));
  if (words.size() < 2 || words[1] != "GT/s") return Error{"PCIe speed '" + std::string(Trim(text)) + "'"};
  auto speed = FiniteDouble(words[0]);
  if (!speed || *speed <= 0) return Error{"PCIe speed '" + std::string(Trim(text)) + "'"};
  return *speed;
}

Result<std::string> ParseNvidiaModuleVersion(std::string_view text) {
  static const RE2 kBare(R"(^\s*(\d+\.\d+(?:\.\d+)*)\s*$)");
  static const RE2 kProcLine(R"(Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)*))");
  std::string version;
  std::string_view first_line = text.substr(0, text.find('\n'));
  if (RE2::FullMatch(first_line, kBare, &version) || RE2::PartialMatch(first_line, kProcLine, &version)) {
    return version;
  }
  return Error{"no driver version in '" + std::string(Trim(first_line)) + "'"};
}

Result<WallTime> ParseNvidiaDriverBuildDate(std::string_view text) {
  static const RE2 kDate(R"(\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\s+(\d{1,2})\s+(\d\d):(\d\d):(\d\d)\s+UTC\s+(\d{4})\s*$)");
  constexpr std::string_view kMonths = "JanFebMarAprMayJunJulAugSepOctNovDec";
  std::string_view first_line = Trim(text.substr(0, text.find('\n')));
  std::string month;
  int day = 0, hour = 0, minute = 0, second = 0, year = 0;
  if (!RE2::PartialMatch(first_line, kDate, &month, &day, &hour, &minute, &second, &year))
    return Error{"no build date in '" + std::string(first_line) + "'"};
  std::tm civil{};
  civil.tm_year = year - 1900;
  civil.tm_mon = static_cast<int>(kMonths.find(month) / 3);
  civil.tm_mday = day;
  civil.tm_hour = hour;
  civil.tm_min = minute;
  civil.tm_sec = second;
  return WallTime{std::chrono::seconds{timegm(&civil)}};
}

std::vector<Sensor> ParseIpmiSdrList(std::string_view text) {
  std::vector<Sensor> sensors;
  for (std::string_view line : Split(text, '\n')) {
    auto columns = Split(line, '|');
    if (columns.size() != 5) continue;
    Sensor sensor;
    sensor.source = "ipmi";
    sensor.name = std::string(Trim(columns[0]));
    std::string_view status = Trim(columns[2]);
    std::string_view entity = Trim(columns[3]);
    std::string_view reading = Trim(columns[4]);
    if (sensor.name.empty()) continue;
    sensor.detail = std::string(reading);
    sensor.status = IpmiStatus(status);

    auto words = SplitBlanks(reading);
    std::optional<double> number = words.empty() ? std::nullopt : FiniteDouble(words[0]);
    std::string unit = words.size() > 1 ? std::string(reading.substr(words[1].data() - reading.data())) : "";
    std::string lower_name = ToLower(sensor.name);
    if (number && unit == "degrees C") {
      sensor.kind = SensorKind::kTemperature, sensor.unit = "C";
    } else if (number && unit == "RPM") {
      sensor.kind = SensorKind::kFan, sensor.unit = "RPM";
    } else if (number && unit == "percent" && lower_name.find("fan") != std::string::npos) {
      sensor.kind = SensorKind::kFan, sensor.unit = "%";
    } else if (number && unit == "Volts") {
      sensor.kind = SensorKind::kVoltage, sensor.unit = "V";
    } else if (number && unit == "Watts") {
      sensor.kind = SensorKind::kPower, sensor.unit = "W";
    } else if (number && unit == "Amps") {
      sensor.kind = SensorKind::kCurrent, sensor.unit = "A";
    } else {
      number.reset();
      if (LooksLikePowerSupply(sensor.name, entity))
        sensor.kind = SensorKind::kPowerSupply;
      else if (lower_name.find("fan") != std::string::npos)
        sensor.kind = SensorKind::kFan;
      // A discrete sensor's status column is "ok" even when it asserts a
      // failure; the states in the reading say what is wrong.
      if (sensor.status == SensorStatus::kOk) sensor.status = DiscreteStatus(reading);
      if (sensor.status == SensorStatus::kNoReading && !reading.empty() && !ContainsIgnoreCase(reading, "no reading") &&
          !ContainsIgnoreCase(reading, "disabled")) {
        sensor.status = DiscreteStatus(reading);
      }
    }
    sensor.value = number;
    sensors.push_back(std::move(sensor));
  }
  return sensors;
}

}  // namespace gpudoctor
