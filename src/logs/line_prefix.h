// Recognises the time/host prefix of one log line, whatever tool wrote it, and
// returns the message behind it. Pure: no state, no clock.
//
//   "Feb 15 17:37:45 Gipfeli kernel: [82659.755847] NVRM: Xid ..."
//   -> format kSyslog, host "Gipfeli", program "kernel", uptime 82659.755847,
//      message "NVRM: Xid ..."
//
// Formats: /dev/kmsg records, dmesg (plain, -T, -H, --time-format iso),
// journalctl (short, short-iso, short-precise, short-monotonic, any locale's
// month names), RFC 3164 syslog, lines a collector prefixed with a host, Talos
// (`talosctl dmesg`), syslogd's console broadcasts, the fabric manager's own log,
// RFC 5424 syslog, `dmesg -x` (facility and level decoded), and lines with no prefix at all.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/clock.h"

namespace gpudoctor {

enum class LineFormat {
  kBare,              // no recognised prefix
  kKmsg,              // "6,1234,5678901,-;msg"
  kDmesg,             // "[  123.456789] msg"
  kDmesgCtime,        // "[Sun Feb 23 16:24:18 2025] msg"            (dmesg -T)
  kDmesgDelta,        // "[  +0.000316] msg"                          (dmesg -H)
  kDmesgMinute,       // "[Feb23 16:24] msg"                          (dmesg -H)
  kDmesgIso,          // "2024-05-01T12:00:00,123456+00:00 msg"       (dmesg --time-format iso)
  kSyslog,            // "Feb 15 17:37:45 host kernel: msg"           (syslog, journalctl short)
  kSyslogIso,         // "2024-05-01T12:00:00+0000 host kernel: msg"  (journalctl short-iso, rsyslog)
  kJournalMonotonic,  // "[ 123.456789] host kernel: msg"            (journalctl short-monotonic)
  kTalos,             // "10.0.0.1: kern:     err: [2026-04-22T21:25:20.466Z]: msg"  (talosctl dmesg)
  kBroadcastHeader,   // "Message from syslogd@host at May 13 18:01:09 ..."  (no message: it dates the next line)
  kBroadcastBody,     // " kernel:[Hardware Error]: msg"              (the line after a broadcast header)
  kFabricManager,     // "[Feb 27 2025 15:10:02] [ERROR] [tid 12727] msg"  (nv-fabricmanager's log file)
  kSyslog5424,        // "<34>1 2003-10-11T22:14:15.003Z host app procid msgid [sd] msg"  (RFC 5424)
  kDmesgDecoded,      // "kern  :err   : msg"  (dmesg -x with no time; with one, the time's format is kept)
  kKlog,              // "I0810 15:36:05.551834       1 health.go:169] msg"  (Kubernetes components, kubectl logs)
  kGoLog,             // "2020/08/10 19:09:42 msg"  (Go's standard logger: device plugins, exporters)
  kProgramTag,        // "kernel: msg"  (a syslog line cut after its host)
};
const char* LineFormatName(LineFormat format);

struct PrefixOptions {
  std::optional<int> year;     // for year-less dates; nullopt: inferred from reference_time
  WallTime reference_time{};   // "now" for year inference
  int utc_offset_minutes = 0;  // zone assumed for local times
  // Skip the hand-written matchers of the common prefixes and use only the
  // regular expressions they stand in for: tests compare the two ways.
  bool regex_only = false;
  // The prefix the input's first lines had (LearnedPrefix): its matcher is tried first, and a line it does
  // not fit takes the general path. The result is the same either way; only the rare formats (Talos, the
  // fabric manager's log), which the general path tries last, are read faster.
  LineFormat learned = LineFormat::kBare;
};

struct LinePrefix {
  LineFormat format = LineFormat::kBare;
  std::optional<WallTime> time;
  bool time_is_utc = false;     // the line stated its zone
  bool time_estimated = false;  // year inferred, or minute precision
  std::optional<double> uptime_seconds;  // kernel stamp: seconds since boot
  std::optional<double> delta_seconds;   // dmesg -H: seconds since the previous line
  std::optional<uint64_t> kmsg_sequence;
  std::string_view host;     // syslog host, or the host a collector put in front
  std::string_view program;  // "kernel", "systemd", "nvidia-fabricmanager-start.sh"
  std::string_view level;    // the level the line states: "err" (Talos), "ERROR" (fabric manager)
  // For kernel lines the text after "kernel: [uptime] "; for other programs
  // the text from the program name on ("systemd[1]: ..."), which patterns may
  // need; for bare lines the whole line.
  std::string_view message;
  // A bare line that starts with white space: possibly the wrapped tail of the
  // previous message (journalctl indents continuation lines).
  bool indented = false;

  bool operator==(const LinePrefix&) const = default;
};

LinePrefix ParseLinePrefix(std::string_view line, const PrefixOptions& options);

// Learns an input's prefix from its first lines: feed each line's format; once `kLines` lines with a prefix
// agree, learned() names it (kBare until then, and for good when they disagree).
class LearnedPrefix {
 public:
  static constexpr int kLines = 8;
  void Note(LineFormat format) {
    if (settled_ || format == LineFormat::kBare || format == LineFormat::kBroadcastBody) return;
    if (seen_ == 0) candidate_ = format;
    if (format != candidate_) {
      settled_ = true;
      return;
    }
    if (++seen_ == kLines) {
      learned_ = candidate_;
      settled_ = true;
    }
  }
  LineFormat learned() const { return learned_; }

 private:
  LineFormat candidate_ = LineFormat::kBare;
  LineFormat learned_ = LineFormat::kBare;
  int seen_ = 0;
  bool settled_ = false;
};

}  // namespace gpudoctor
