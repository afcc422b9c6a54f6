#include "logs/line_prefix.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "common/text.h"
#include "logs/log_time.h"

namespace gpudoctor {
namespace {

PrefixOptions Options() {
  PrefixOptions options;
  options.reference_time = *ParseTimeBound("2025-06-01T00:00:00Z", WallTime{}, 0);
  return options;
}

std::string Iso(const std::optional<WallTime>& time) { return time ? FormatIsoUtc(*time) : "none"; }

TEST(LinePrefix, Kmsg) {
  LinePrefix p = ParseLinePrefix("6,1234,5678901,-;NVRM: Xid (PCI:0000:01:00): 79", Options());
  EXPECT_EQ(p.format, LineFormat::kKmsg);
  EXPECT_EQ(p.kmsg_sequence, 1234u);
  EXPECT_DOUBLE_EQ(*p.uptime_seconds, 5.678901);
  EXPECT_EQ(p.message, "NVRM: Xid (PCI:0000:01:00): 79");
}

TEST(LinePrefix, DmesgPlainAndDelta) {
  LinePrefix p = ParseLinePrefix("[  365.969676] NVRM: GPU at PCI:0000:01:00: GPU-4e39", Options());
  EXPECT_EQ(p.format, LineFormat::kDmesg);
  EXPECT_DOUBLE_EQ(*p.uptime_seconds, 365.969676);
  EXPECT_EQ(p.message, "NVRM: GPU at PCI:0000:01:00: GPU-4e39");
  EXPECT_FALSE(p.time);

  p = ParseLinePrefix("[  +0.000316] pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0", Options());
  EXPECT_EQ(p.format, LineFormat::kDmesgDelta);
  EXPECT_DOUBLE_EQ(*p.delta_seconds, 0.000316);
  EXPECT_EQ(p.message, "pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0");
}

TEST(LinePrefix, DmesgCtimeAndMinuteStamp) {
  LinePrefix p = ParseLinePrefix("[Mon Aug  5 03:54:13 2024] NVRM: Xid (PCI:0000:00:07): 31", Options());
  EXPECT_EQ(p.format, LineFormat::kDmesgCtime);
  EXPECT_EQ(Iso(p.time), "2024-08-05T03:54:13.000Z");
  EXPECT_FALSE(p.time_estimated);
  EXPECT_EQ(p.message, "NVRM: Xid (PCI:0000:00:07): 31");

  p = ParseLinePrefix("[Feb23 16:24] NVRM: loading", Options());
  EXPECT_EQ(p.format, LineFormat::kDmesgMinute);
  EXPECT_EQ(Iso(p.time), "2025-02-23T16:24:00.000Z");
  EXPECT_TRUE(p.time_estimated);
}

TEST(LinePrefix, DmesgIsoAndJournalIso) {
  LinePrefix p = ParseLinePrefix("2024-05-01T12:00:00,123456+02:00 NVRM: Xid (PCI:0000:01:00): 79", Options());
  EXPECT_EQ(p.format, LineFormat::kDmesgIso);
  EXPECT_EQ(Iso(p.time), "2024-05-01T10:00:00.123Z");
  EXPECT_TRUE(p.time_is_utc);
  EXPECT_EQ(p.message, "NVRM: Xid (PCI:0000:01:00): 79");

  p = ParseLinePrefix("2024-05-01T12:00:00.654321+0000 gpu-7 kernel: NVRM: Xid (PCI:0000:01:00): 79", Options());
  EXPECT_EQ(p.format, LineFormat::kSyslogIso);
  EXPECT_EQ(p.host, "gpu-7");
  EXPECT_EQ(p.program, "kernel");
  EXPECT_EQ(p.message, "NVRM: Xid (PCI:0000:01:00): 79");
}

TEST(LinePrefix, SyslogWithHostAndUptime) {
  LinePrefix p = ParseLinePrefix(
      "Feb 15 17:37:45 Gipfeli kernel: [82659.755847] NVRM: Xid (PCI:0000:41:00): 13, Graphics", Options());
  EXPECT_EQ(p.format, LineFormat::kSyslog);
  EXPECT_EQ(p.host, "Gipfeli");
  EXPECT_EQ(p.program, "kernel");
  EXPECT_DOUBLE_EQ(*p.uptime_seconds, 82659.755847);
  EXPECT_EQ(Iso(p.time), "2025-02-15T17:37:45.000Z");
  EXPECT_TRUE(p.time_estimated);
  EXPECT_EQ(p.message, "NVRM: Xid (PCI:0000:41:00): 13, Graphics");
}

TEST(LinePrefix, SyslogYearInferredFromReference) {
  // December lines read in June belong to the previous year only if they
  // would otherwise lie in the future.
  LinePrefix p = ParseLinePrefix("Dec  2 11:49:53 worker4 kernel: msg", Options());
  EXPECT_EQ(Iso(p.time), "2024-12-02T11:49:53.000Z");
  PrefixOptions fixed = Options();
  fixed.year = 2019;
  fixed.utc_offset_minutes = 60;
  p = ParseLinePrefix("Dec  2 11:49:53 worker4 kernel: msg", fixed);
  EXPECT_EQ(Iso(p.time), "2019-12-02T10:49:53.000Z");
  EXPECT_FALSE(p.time_estimated);
}

TEST(LinePrefix, SyslogWithoutHostAndOtherPrograms) {
  LinePrefix p = ParseLinePrefix("Sep 16 19:51:15 kernel: [    0.064261] mce: [Hardware Error]: x", Options());
  EXPECT_EQ(p.host, "");
  EXPECT_EQ(p.program, "kernel");
  EXPECT_EQ(p.message, "mce: [Hardware Error]: x");

  p = ParseLinePrefix("Sep 18 03:19:01 ubuntu2404 systemd[1]: nvidia-fabricmanager.service: Failed", Options());
  EXPECT_EQ(p.host, "ubuntu2404");
  EXPECT_EQ(p.program, "systemd");
  EXPECT_EQ(p.message, "systemd[1]: nvidia-fabricmanager.service: Failed");
}

TEST(LinePrefix, LocalisedMonths) {
  LinePrefix p = ParseLinePrefix("4月 19 22:36:49 Reverier-Arch kernel: NVRM: loading", Options());
  EXPECT_EQ(p.format, LineFormat::kSyslog);
  EXPECT_EQ(Iso(p.time), "2025-04-19T22:36:49.000Z");
  EXPECT_EQ(p.host, "Reverier-Arch");

  p = ParseLinePrefix("kwi 03 09:01:25 testowy kernel: NVRM: Xid", Options());
  EXPECT_EQ(Iso(p.time), "2025-04-03T09:01:25.000Z");
  for (const char* month : {"Mär", "mars", "févr.", "дек", "Okt", "ago", "4월", "MAY"}) {
    EXPECT_TRUE(MonthFromName(month)) << month;
  }
  EXPECT_EQ(*MonthFromName("Дек"), 12u);
  EXPECT_FALSE(MonthFromName("NVRM"));
}

TEST(LinePrefix, JournalMonotonicNeedsKernelOrPid) {
  LinePrefix p = ParseLinePrefix("[ 123.456789] gpu-7 kernel: NVRM: Xid", Options());
  EXPECT_EQ(p.format, LineFormat::kJournalMonotonic);
  EXPECT_EQ(p.host, "gpu-7");
  EXPECT_EQ(p.message, "NVRM: Xid");
  // A kernel message that only looks like "host program:".
  p = ParseLinePrefix("[ 123.456789] Hardware name: Dell Inc. PowerEdge", Options());
  EXPECT_EQ(p.format, LineFormat::kDmesg);
  EXPECT_EQ(p.message, "Hardware name: Dell Inc. PowerEdge");
}

TEST(LinePrefix, CollectorPrefixes) {
  LinePrefix p = ParseLinePrefix(
      "Xid errors on instance: ip-26-0-146-100, Error: May 19 07:08:57 ip-26-0-146-100 kernel: [680111.646286] NVRM: "
      "Xid (PCI:0000:10:1c): 63, pid=1850",
      Options());
  EXPECT_EQ(p.format, LineFormat::kSyslog);
  EXPECT_EQ(p.host, "ip-26-0-146-100");
  EXPECT_EQ(p.message, "NVRM: Xid (PCI:0000:10:1c): 63, pid=1850");

  p = ParseLinePrefix("node17: [  721.028170] INFO: task nvc:[driver]:5403 blocked", Options());
  EXPECT_EQ(p.format, LineFormat::kDmesg);
  EXPECT_EQ(p.host, "node17");
  EXPECT_EQ(p.message, "INFO: task nvc:[driver]:5403 blocked");

  p = ParseLinePrefix("10.1.2.3 <4>Feb 15 17:37:45 gpu-3 kernel: NVRM: x", Options());
  EXPECT_EQ(p.host, "gpu-3");
  EXPECT_EQ(p.message, "NVRM: x");
}

TEST(LinePrefix, Talos) {
  // siderolabs/talos#6206 (talosctl dmesg): node, facility, level, UTC stamp.
  LinePrefix p = ParseLinePrefix(
      "10.0.20.203: kern: warning: [2022-09-02T19:03:17.235131838Z]: NVRM: GPU 0000:01:00.0: RmInitAdapter failed! "
      "(0x63:0x0:1905)",
      Options());
  EXPECT_EQ(p.format, LineFormat::kTalos);
  EXPECT_EQ(p.host, "10.0.20.203");
  EXPECT_EQ(p.program, "kernel");
  EXPECT_EQ(p.level, "warning");
  EXPECT_EQ(Iso(p.time), "2022-09-02T19:03:17.235Z");
  EXPECT_TRUE(p.time_is_utc);
  EXPECT_EQ(p.message, "NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x63:0x0:1905)");
  // The capture: the level padded to the width of the longest.
  p = ParseLinePrefix("192.168.11.119: kern:     err: [2026-04-22T21:25:20.466Z]: nvidia-nvswitch1: SXid "
                      "(PCI:0000:aa:00.0): 24007, Severity 1 Engine instance 12 Sub-engine instance 00",
                      Options());
  EXPECT_EQ(p.format, LineFormat::kTalos);
  EXPECT_EQ(p.host, "192.168.11.119");
  EXPECT_EQ(p.level, "err");
  EXPECT_EQ(p.message, "nvidia-nvswitch1: SXid (PCI:0000:aa:00.0): 24007, Severity 1 Engine instance 12 Sub-engine "
                       "instance 00");
  // siderolabs/pkgs#792: a host name, and a user-space line.
  p = ParseLinePrefix("k3s-node5.lab: kern:    info: [2023-08-18T13:36:47.292786465Z]: Linux agpgart interface v0.103",
                      Options());
  EXPECT_EQ(p.format, LineFormat::kTalos);
  EXPECT_EQ(p.host, "k3s-node5.lab");
  EXPECT_EQ(p.message, "Linux agpgart interface v0.103");
}

TEST(LinePrefix, ConsoleBroadcast) {
  // madMAx43v3r/chia-plotter#535: the header dates the indented line after it.
  LinePrefix p = ParseLinePrefix("Message from syslogd@plot-071 at Jun 17 13:06:42 ...", Options());
  EXPECT_EQ(p.format, LineFormat::kBroadcastHeader);
  EXPECT_EQ(p.host, "plot-071");
  EXPECT_EQ(Iso(p.time), "2024-06-17T13:06:42.000Z");
  EXPECT_TRUE(p.message.empty());
  p = ParseLinePrefix(" kernel:[405108.698255] watchdog: BUG: soft lockup - CPU#2 stuck for 22s! [chia_plot:29632]",
                      Options());
  EXPECT_EQ(p.format, LineFormat::kBroadcastBody);
  EXPECT_EQ(p.program, "kernel");
  EXPECT_DOUBLE_EQ(*p.uptime_seconds, 405108.698255);
  EXPECT_EQ(p.message, "watchdog: BUG: soft lockup - CPU#2 stuck for 22s! [chia_plot:29632]");
  // A header with the weekday and year (quoted on linux-kernel, 2006).
  p = ParseLinePrefix("Message from syslogd@xxxxx at Thu Dec  7 04:17:21 2006 ...", Options());
  EXPECT_EQ(p.format, LineFormat::kBroadcastHeader);
  EXPECT_EQ(Iso(p.time), "2006-12-07T04:17:21.000Z");
}

TEST(LinePrefix, FabricManagerLog) {
  // leptonai/gpud's fabricmanager.log test data.
  LinePrefix p = ParseLinePrefix("[Feb 27 2025 15:10:02] [ERROR] [tid 12727] detected NVSwitch non-fatal error 12028 "
                                 "on fid 0 on NVSwitch pci bus id 00000000:86:00.0 physical id 3 port 61",
                                 Options());
  EXPECT_EQ(p.format, LineFormat::kFabricManager);
  EXPECT_EQ(p.level, "ERROR");
  EXPECT_EQ(Iso(p.time), "2025-02-27T15:10:02.000Z");
  EXPECT_EQ(p.message, "detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch pci bus id 00000000:86:00.0 "
                       "physical id 3 port 61");
}

TEST(LinePrefix, KlogAndGoLogOfKubernetesComponents) {
  // testdata/kernel_logs/xid_device_plugin.log: the device plugin's own lines, as `kubectl logs` shows them.
  LinePrefix go = ParseLinePrefix("2020/08/10 19:09:42 XidCriticalError: Xid=69 on Device=GPU-7540a9b3", Options());
  EXPECT_EQ(go.format, LineFormat::kGoLog);
  EXPECT_EQ(Iso(go.time), "2020-08-10T19:09:42.000Z");
  EXPECT_FALSE(go.time_estimated);
  EXPECT_EQ(go.message, "XidCriticalError: Xid=69 on Device=GPU-7540a9b3");
  // klog prints no year: it is inferred as for syslog dates.
  LinePrefix klog = ParseLinePrefix("I0810 15:36:05.551834       1 health.go:169] XidCriticalError: Xid=48", Options());
  EXPECT_EQ(klog.format, LineFormat::kKlog);
  EXPECT_EQ(klog.level, "info");
  EXPECT_TRUE(klog.time_estimated);
  EXPECT_EQ(klog.message, "XidCriticalError: Xid=48");
  EXPECT_EQ(ParseLinePrefix("E1203 01:02:03.000001 42 server.go:9] boom", Options()).level, "err");
  // Neither a month 13 nor a word that only starts like klog is a prefix.
  EXPECT_EQ(ParseLinePrefix("I1310 15:36:05.551834 1 a.go:1] x", Options()).format, LineFormat::kBare);
  EXPECT_EQ(ParseLinePrefix("I0810 is not a stamp", Options()).format, LineFormat::kBare);
}

TEST(LinePrefix, TheKernelsTagAloneWhenDateAndHostWereCut) {
  // testdata/kernel_logs/xid145_redacted_bus_b200.log: a dmesg excerpt posted with only the kernel's tag.
  LinePrefix p = ParseLinePrefix(
      "kernel: NVRM: GPU1 kbifCacheVFInfo_GB100: Unable to read NV_PF0_INITIAL_AND_TOTAL_VFS", Options());
  EXPECT_EQ(p.format, LineFormat::kProgramTag);
  EXPECT_EQ(p.program, "kernel");
  EXPECT_EQ(p.message, "NVRM: GPU1 kbifCacheVFInfo_GB100: Unable to read NV_PF0_INITIAL_AND_TOTAL_VFS");
  EXPECT_FALSE(p.time);
  // With an uptime stamp after the tag, the stamp is read as a dmesg line embedded after free text.
  LinePrefix uptime = ParseLinePrefix("kernel: [ 1234.567890] NVRM: loading", Options());
  EXPECT_DOUBLE_EQ(*uptime.uptime_seconds, 1234.56789);
  EXPECT_EQ(uptime.message, "NVRM: loading");
  // Only the kernel's own tag, at the start of the line.
  EXPECT_EQ(ParseLinePrefix("kernelspace: x", Options()).format, LineFormat::kBare);
  EXPECT_EQ(ParseLinePrefix("  kernel text", Options()).format, LineFormat::kBare);
}

TEST(LinePrefix, Rfc5424AndDmesgDecoded) {
  // RFC 5424's own example (section 6.5.1).
  LinePrefix p = ParseLinePrefix(
      "<34>1 2003-10-11T22:14:15.003Z mymachine.example.com su - ID47 - 'su root' failed for lonvick on /dev/pts/8",
      Options());
  EXPECT_EQ(p.format, LineFormat::kSyslog5424);
  EXPECT_EQ(p.host, "mymachine.example.com");
  EXPECT_EQ(p.program, "su");
  EXPECT_EQ(Iso(p.time), "2003-10-11T22:14:15.003Z");
  EXPECT_TRUE(p.time_is_utc);
  EXPECT_EQ(p.message, "'su root' failed for lonvick on /dev/pts/8");
  // leptonai/gpud#338 (dmesg --decode --time-format iso, quoted by gpud's scan).
  p = ParseLinePrefix("kern  :err   : 2025-01-25T10:34:54,859532+00:00 nvidia-nvswitch1: SXid (PCI:0000:84:00.0): "
                      "12028, Data {0x000001c0, 0x00bd5c8a, 0x00000500, 0x00000064, 0x00000000, 0x40008000, "
                      "0x5a001100, 0x00000000, 0x00000000}",
                      Options());
  EXPECT_EQ(p.format, LineFormat::kDmesgIso);
  EXPECT_EQ(p.level, "err");
  EXPECT_EQ(p.program, "kernel");
  EXPECT_EQ(Iso(p.time), "2025-01-25T10:34:54.859Z");
  EXPECT_EQ(p.message, "nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Data {0x000001c0, 0x00bd5c8a, 0x00000500, "
                       "0x00000064, 0x00000000, 0x40008000, 0x5a001100, 0x00000000, 0x00000000}");
}

TEST(LinePrefix, BareAndIndented) {
  LinePrefix p = ParseLinePrefix("oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null)", Options());
  EXPECT_EQ(p.format, LineFormat::kBare);
  EXPECT_EQ(p.message, "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null)");
  EXPECT_FALSE(p.indented);
  p = ParseLinePrefix("                                       NVRM: this kernel module", Options());
  EXPECT_EQ(p.format, LineFormat::kBare);
  EXPECT_TRUE(p.indented);
  p = ParseLinePrefix("", Options());
  EXPECT_EQ(p.format, LineFormat::kBare);
}

TEST(LinePrefix, YearsNoClockCanHoldGiveNoTime) {
  // 64-bit nanoseconds reach about 2262; a garbled year must not overflow.
  for (const char* line : {"Mar  3 00:16:40 2625 host kernel: x", "9999-05-01T12:00:00+0000 host kernel: x",
                           "[Sun Feb 23 16:24:18 9999] x", "Mar  3 00:16:40 1066 host kernel: x"}) {
    LinePrefix p = ParseLinePrefix(line, Options());
    EXPECT_FALSE(p.time.has_value()) << line << " -> " << Iso(p.time);
  }
  LinePrefix p = ParseLinePrefix("Mar  3 00:16:40 2200 host kernel: x", Options());
  EXPECT_EQ(Iso(p.time), "2200-03-03T00:16:40.000Z");
}

// The hand-written matchers of the common prefixes must agree with the
// regular expressions they stand in for, on every corpus line, on tricky
// hand-made lines, and on many mutations of both.
std::vector<std::string> CorpusLines() {
  std::vector<std::string> lines;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/kernel_logs")) {
    if (entry.path().extension() != ".log") continue;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  return lines;
}

void ExpectFastEqualsRegex(const std::string& line) {
  PrefixOptions fast = Options();
  PrefixOptions regex = Options();
  regex.regex_only = true;
  LinePrefix a = ParseLinePrefix(line, fast);
  LinePrefix b = ParseLinePrefix(line, regex);
  EXPECT_TRUE(a == b) << "line: \"" << line << "\"\n fast: " << LineFormatName(a.format) << " host \"" << a.host
                      << "\" program \"" << a.program << "\" message \"" << a.message << "\" time " << Iso(a.time)
                      << "\n regex: " << LineFormatName(b.format) << " host \"" << b.host << "\" program \"" << b.program
                      << "\" message \"" << b.message << "\" time " << Iso(b.time);
}

TEST(LinePrefixFastPath, AgreesWithTheRegexesOnTheCorpus) {
  auto lines = CorpusLines();
  ASSERT_GT(lines.size(), 100u);
  for (const std::string& line : lines) ExpectFastEqualsRegex(line);
}

TEST(LinePrefixLearned, AgreesWithTheGeneralPathOnTheCorpus) {
  for (LineFormat learned : {LineFormat::kTalos, LineFormat::kFabricManager, LineFormat::kSyslog}) {
    PrefixOptions options = Options();
    options.learned = learned;
    for (const std::string& line : CorpusLines()) {
      LinePrefix a = ParseLinePrefix(line, options);
      LinePrefix b = ParseLinePrefix(line, Options());
      EXPECT_TRUE(a == b) << LineFormatName(learned) << " line: \"" << line << "\"\n learned: "
                          << LineFormatName(a.format) << " host \"" << a.host << "\" message \"" << a.message
                          << "\"\n general: " << LineFormatName(b.format) << " host \"" << b.host << "\" message \""
                          << b.message << "\"";
    }
  }
}

TEST(LinePrefixLearned, SettlesOnTheFirstLinesFormat) {
  LearnedPrefix learned;
  for (int i = 0; i < LearnedPrefix::kLines - 1; ++i) learned.Note(LineFormat::kTalos);
  learned.Note(LineFormat::kBare);  // lines with no prefix do not count
  EXPECT_EQ(learned.learned(), LineFormat::kBare);
  learned.Note(LineFormat::kTalos);
  EXPECT_EQ(learned.learned(), LineFormat::kTalos);
  LearnedPrefix mixed;
  mixed.Note(LineFormat::kSyslog);
  mixed.Note(LineFormat::kTalos);
  for (int i = 0; i < 2 * LearnedPrefix::kLines; ++i) mixed.Note(LineFormat::kTalos);
  EXPECT_EQ(mixed.learned(), LineFormat::kBare);
}

TEST(LinePrefixFastPath, AgreesWithTheRegexesOnEdgeCases) {
  const char* const cases[] = {
      "Mar  3 00:16:40 gpu-node-17 kernel: [ 1000.003445] cgroup: fork rejected",
      "Mar. 3 00:16:40 host kernel: [1.5] x",
      "Mar.. 3 00:16:40 host kernel: x",
      ". 3 00:16:40 host kernel: x",
      "Mar 3 0:16:40 host kernel: x",
      "Mar 123 00:16:40 host kernel: x",
      "Mar 3 000:16:40 host kernel: x",
      "Mar 3 00:1:40 host kernel: x",
      "Mar 3 00:16:4 host kernel: x",
      "Mar 3 00:16:400 host kernel: x",
      "Mar 3 00:16:40.123456 host kernel: x",
      "Mar 3 00:16:40,1 host kernel: x",
      "Mar 3 00:16:40.1234567890 host kernel: x",
      "Mar 3 00:16:40. host kernel: x",
      "Mar 3 00:16:40 2024 host kernel: x",
      "Mar 3 00:16:40 20245 host kernel: x",
      "Mar 3 00:16:40  2024  host  kernel:  [  12.5]  x",
      "Mar 3 00:16:40 2024",
      "Mar 3 00:16:40 2024 ",
      "Mar 3 00:16:40",
      "Mar 3 00:16:40 ",
      "Mar\t3\t00:16:40\thost\tkernel:\tx",
      "Mar 3 00:16:40 host systemd[1]: Started x",
      "Mar 3 00:16:40 host systemd[]: x",
      "Mar 3 00:16:40 host systemd[12a]: x",
      "Mar 3 00:16:40 host systemd[12]x: x",
      "Mar 3 00:16:40 host systemd[12]:x",
      "Mar 3 00:16:40 host kernel:",
      "Mar 3 00:16:40 host kernel:x",
      "Mar 3 00:16:40 kernel: [ 5.0] x",
      "Mar 3 00:16:40 host ]kernel: x",
      "Mar 3 00:16:40 host: kernel: x",
      "Mar 3 00:16:40 a b c: x",
      "Mar 3 00:16:40 h\xc3\xa9te kernel: x",
      "Mar 3 00:16:40 host k\xff" "ernel: x",
      "M\xc3\xa4r 3 00:16:40 host kernel: x",
      "\xff 3 00:16:40 host kernel: x",
      "Mar 3 00:16:40 host kernel: [12.] x",
      "Mar 3 00:16:40 host kernel: [.5] x",
      "Mar 3 00:16:40 host kernel: [ 12.5 ] x",
      "Mar 3 00:16:40 host kernel: [ 12.5]x",
      "Mar 3 00:16:40 host kernel: [ 12.5]  x",
      "[ 12.5] host kernel: x",
      "[12.5]",
      "[ 12.5",
      "[ +0.000316] x",
      "[Feb23 16:24] x",
      "2024-05-01T12:00:00+0000 host kernel: [ 1.0] x",
      "2024-05-01T12:00:00,123456+00:00 x",
      "<4>Mar 3 00:16:40 host kernel: x",
      "node17: [ 12.3] msg",
      "Xid errors on instance: ip-1, Error: May 19 10:00:00 host kernel: x",
      "",
      " ",
      "   indented",
  };
  for (const char* line : cases) ExpectFastEqualsRegex(line);
}

TEST(LinePrefixFastPath, AgreesWithTheRegexesOnMutatedLines) {
  auto lines = CorpusLines();
  ASSERT_FALSE(lines.empty());
  std::mt19937 random(12345);
  const std::string alphabet = " \t:.,[]0123456789aZ-\xc3\xff+";
  for (int i = 0; i < 20000; ++i) {
    std::string line = lines[random() % lines.size()].substr(0, 80);
    int edits = 1 + static_cast<int>(random() % 3);
    for (int e = 0; e < edits && !line.empty(); ++e) {
      size_t at = random() % line.size();
      switch (random() % 3) {
        case 0: line[at] = alphabet[random() % alphabet.size()]; break;
        case 1: line.erase(at, 1); break;
        default: line.insert(at, 1, alphabet[random() % alphabet.size()]); break;
      }
    }
    ExpectFastEqualsRegex(line);
    if (HasFailure()) return;  // one counterexample is enough to read
  }
}

}  // namespace
}  // namespace gpudoctor
