// Pure parsers for the text the kernel and ipmitool produce. Each takes the
// whole text of one file or one command's output and never throws; bad input
// gives an Error (or skips the bad line, where a file has many).
//
//   Result<LoadAverage> load = ParseLoadAverage("0.52 0.58 0.59 2/1134 12345\n");
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "host/host_signals.h"

namespace gpudoctor {

Result<LoadAverage> ParseLoadAverage(std::string_view text);  // /proc/loadavg
Result<Pressure> ParsePressure(std::string_view text);        // /proc/pressure/{cpu,memory,io}
Result<MemoryInfo> ParseMemInfo(std::string_view text);       // /proc/meminfo
Result<uint32_t> ParseCpuList(std::string_view text);         // "0-7,16-23" -> 16

// The fields of /proc/<pid>/stat that matter here. The command name may hold
// spaces and parentheses, so it is taken up to the last ')'. Fields past the
// state that a short line lacks stay 0.
struct ProcStat {
  uint32_t pid = 0;
  std::string name;
  char state = '?';
  uint32_t parent_pid = 0;
  uint64_t start_time_ticks = 0;  // field 22: clock ticks after boot
};
Result<ProcStat> ParseProcStat(std::string_view text);

// voluntary_ctxt_switches + nonvoluntary_ctxt_switches of /proc/<pid>/status.
Result<uint64_t> ParseContextSwitches(std::string_view text);

// "16.0 GT/s PCIe", "8 GT/s", "2.5 GT/s" -> GT/s. "Unknown" is an error.
Result<double> ParsePcieSpeed(std::string_view text);

// The version in /sys/module/nvidia/version ("550.54.15\n") or in the
// first line of /proc/driver/nvidia/version.
Result<std::string> ParseNvidiaModuleVersion(std::string_view text);
// When the loaded driver was built, from /proc/driver/nvidia/version's first
// line ("... 550.54.15  Release Build  (...)  Tue Mar  5 19:33:33 UTC 2024").
Result<WallTime> ParseNvidiaDriverBuildDate(std::string_view text);

// `ipmitool sdr elist` output: "Inlet Temp | 04h | ok | 7.1 | 23 degrees C".
// Lines that are not sensor rows are skipped.
std::vector<Sensor> ParseIpmiSdrList(std::string_view text);

}  // namespace gpudoctor
