#include "logs/log_parser.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "common/text.h"
#include "logs/log_time.h"

namespace gpudoctor {
namespace {

ParseOptions TestOptions() {
  ParseOptions options;
  options.prefix.reference_time = *ParseTimeBound("2025-06-01T00:00:00Z", WallTime{}, 0);
  options.source = "test.log";
  return options;
}

std::vector<std::string> Kinds(const std::vector<LogEvent>& events) {
  std::vector<std::string> kinds;
  for (const LogEvent& event : events) kinds.push_back(event.kind);
  return kinds;
}

using Strings = std::vector<std::string>;

TEST(LogParser, XidLineFromKmsg) {
  auto events = ParseLine("4,5012,44643002804,-;NVRM: Xid (PCI:0000:05:00): 79, pid=1173, GPU has fallen off the bus.",
                          TestOptions());
  ASSERT_EQ(Kinds(events), (Strings{"xid", "gpu_off_bus"}));
  EXPECT_EQ(events[0].xid, 79u);
  EXPECT_EQ(events[0].severity, EventSeverity::kCritical);
  EXPECT_EQ(events[0].pci_bus_id, "0000:05:00.0");
  EXPECT_EQ(events[0].pid, 1173u);
  EXPECT_DOUBLE_EQ(*events[0].uptime_seconds, 44643.002804);
  EXPECT_EQ(events[0].source, "test.log");
  EXPECT_EQ(events[0].line_number, 1u);
  EXPECT_EQ(events[1].Field("from_xid"), "79");
  EXPECT_FALSE(events[1].xid);
}

TEST(LogParser, UptimeBecomesWallTimeWithBootTime) {
  ParseOptions options = TestOptions();
  options.boot_time = *ParseTimeBound("2025-05-01T00:00:00Z", WallTime{}, 0);
  auto events = ParseLine("[  100.500000] NVRM: Xid (PCI:0000:05:00): 48, pid=1, Ch 00000001", options);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(FormatIsoUtc(*events[0].time), "2025-05-01T00:01:40.500Z");
  EXPECT_TRUE(events[0].time_is_utc);
  // A stamp no kernel prints (a damaged line): beyond what a time holds, so no time rather than an undefined one.
  events = ParseLine("[99999999999999.500000] NVRM: Xid (PCI:0000:05:00): 48, pid=1, Ch 00000001", options);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_FALSE(events[0].time);
}

TEST(LogParser, OlderXidFormatAndUnknownXid) {
  auto events =
      ParseLine("NVRM: Xid (0000:02:00): 13, 0001 00000000 0000a297 00001b0c 00000000 00000000", TestOptions());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].xid, 13u);
  EXPECT_EQ(events[0].pci_bus_id, "0000:02:00.0");
  events = ParseLine("NVRM: Xid (PCI:0000:02:00): 999, something new", TestOptions());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].xid, 999u);
  EXPECT_EQ(events[0].severity, EventSeverity::kWarning);  // the [kinds.xid] default
}

TEST(LogParser, JournalShortIsoStatesItsZone) {
  auto events = ParseLine(
      "2025-03-01T10:00:00.250000+01:00 gpu-node-7 kernel: NVRM: Xid (PCI:0000:3b:00): 95, pid=4242, name=python, "
      "Uncontained: FBHUB. RST: Yes, D-RST: No",
      TestOptions());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(FormatIsoUtc(*events[0].time), "2025-03-01T09:00:00.250Z");
  EXPECT_TRUE(events[0].time_is_utc);
  EXPECT_EQ(events[0].host, "gpu-node-7");
  EXPECT_EQ(events[0].process, "python");
  EXPECT_EQ(events[0].severity, EventSeverity::kCritical);
}

TEST(LogParser, DmesgRelativeLinesTakeTheMinuteStamp) {
  auto events = ParseText(
      "[Feb23 16:24] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
      "[  +0.000316] NVRM: Xid (PCI:0000:9b:00): 119, pid=1, name=x, Timeout after 6s of waiting for RPC response\n",
      TestOptions());
  ASSERT_EQ(Kinds(events), (Strings{"driver_loaded", "xid", "gsp_timeout"}));
  EXPECT_EQ(FormatIsoUtc(*events[1].time), "2025-02-23T16:24:00.000Z");
  EXPECT_TRUE(events[1].time_estimated);
}

TEST(LogParser, Xid154ResetRequired) {
  auto events = ParseLine(
      "NVRM: Xid (PCI:0000:07:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
      TestOptions());
  ASSERT_EQ(Kinds(events), (Strings{"xid", "reset_required"}));
  EXPECT_EQ(events[1].Field("recovery_action"), "0x2 (Node Reboot Required)");
  // Recovering to "None" needs no reset.
  events = ParseLine("NVRM: Xid (PCI:0000:07:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) "
                     "to 0x0 (None)",
                     TestOptions());
  EXPECT_EQ(Kinds(events), (Strings{"xid"}));
  events = ParseLine("NVRM: GPU0 rpcRmApiControl_GSP: status NV_ERR_RESET_REQUIRED", TestOptions());
  EXPECT_EQ(Kinds(events), (Strings{"reset_required"}));
}

TEST(LogParser, AerUncorrectedFatalOnAGpu) {
  auto events = ParseText(
      "[ 5.1] pcieport 0000:15:01.0: AER: Uncorrected (Fatal) error received: 0000:18:00.0\n"
      "[ 5.1] nvidia 0000:18:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)\n"
      "[ 5.1] nvidia 0000:18:00.0:   device [10de:2330] error status/mask=00000020/00000000\n"
      "[ 5.1] nvidia 0000:18:00.0:    [ 5] SDES                   (First)\n"
      "[ 5.1] nvidia 0000:18:00.0:    [18] MalfTLP\n"
      "[ 5.2] pcieport 0000:15:01.0: pciehp: Slot(3): Link Down\n",
      TestOptions());
  ASSERT_EQ(Kinds(events), (Strings{"pcie_aer", "pcie_link_down"}));
  const LogEvent& aer = events[0];
  EXPECT_EQ(aer.severity, EventSeverity::kCritical);
  EXPECT_EQ(aer.pci_bus_id, "0000:18:00.0");
  EXPECT_EQ(aer.Field("port"), "0000:15:01.0");
  EXPECT_EQ(aer.Field("aer_type"), "Transaction Layer");
  EXPECT_EQ(aer.Field("device_id"), "10de:2330");
  EXPECT_EQ(aer.Field("aer_errors"), "[ 5] SDES                   (First); [18] MalfTLP");
  EXPECT_EQ(events[1].line_number, 6u);
  EXPECT_EQ(events[1].Field("slot"), "3");
  EXPECT_EQ(events[1].pci_bus_id, "0000:15:01.0");
}

TEST(LogParser, WrappedNvrmMessageIsJoined) {
  auto events = ParseText(
      "Apr 20 19:55:29 host kernel: NVRM: API mismatch: the client has the version 550.76, but\n"
      "                             NVRM: this kernel module has the version 550.67.  Please\n"
      "                             NVRM: make sure that this kernel module and all NVIDIA driver\n"
      "                             NVRM: components have the same version.\n",
      TestOptions());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "driver_mismatch");
  EXPECT_EQ(events[0].Field("kernel_version"), "550.67");
  EXPECT_EQ(events[0].message,
            "NVRM: API mismatch: the client has the version 550.76, but this kernel module has the version 550.67.  "
            "Please make sure that this kernel module and all NVIDIA driver components have the same version.");
  EXPECT_EQ(std::count(events[0].raw.begin(), events[0].raw.end(), '\n'), 3);
}

TEST(LogParser, RecordOverSeveralLinesIsJoinedBeforeMatching) {
  // NVIDIA/NVSentinel#155: the probe prints one record over three lines; only the whole says the GPU fell off.
  auto events = ParseText(
      "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
      "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
      "               NVRM: fallen off the bus and is not responding to commands.\n"
      "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).\n",
      TestOptions());
  ASSERT_EQ(Kinds(events), (Strings{"gpu_off_bus", "driver_probe_failed"}));
  EXPECT_EQ(events[0].pci_bus_id, "0000:b3:00.0");
  EXPECT_EQ(events[0].Field("device_id"), "10de:26b5");
  EXPECT_EQ(events[0].line_number, 1u);
  EXPECT_DOUBLE_EQ(*events[0].uptime_seconds, 1843.308145);
  EXPECT_EQ(std::count(events[0].raw.begin(), events[0].raw.end(), '\n'), 2);
  // Its last line alone (the log lost the first two) still counts as what it shows.
  events = ParseLine("               NVRM: fallen off the bus and is not responding to commands.", TestOptions());
  ASSERT_EQ(Kinds(events), (Strings{"gpu_off_bus"}));
}

TEST(LogParser, ReportLineWithoutItsFirstLineStillCounts) {
  // The issue's Talos capture: an SXid report's second line, its first not in the log.
  auto events = ParseLine("192.168.11.119: kern:     err: [2026-04-22T21:25:20.466Z]: nvidia-nvswitch1: SXid "
                          "(PCI:0000:aa:00.0): 24007, Severity 1 Engine instance 12 Sub-engine instance 00",
                          TestOptions());
  ASSERT_EQ(Kinds(events), (Strings{"nvswitch_sxid"}));
  EXPECT_EQ(events[0].Field("sxid"), "24007");
  EXPECT_EQ(events[0].pci_bus_id, "0000:aa:00.0");
  EXPECT_EQ(events[0].host, "192.168.11.119");
  ASSERT_TRUE(events[0].time);
  EXPECT_EQ(FormatIsoUtc(*events[0].time), "2026-04-22T21:25:20.466Z");
  // With its first line, the same line joins the report and makes nothing of its own.
  events = ParseText("[   38.175561] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion Link "
                     "DLREQ interrupt\n"
                     "[   38.180708] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Severity 0 Engine instance 44 "
                     "Sub-engine instance 00\n",
                     TestOptions());
  ASSERT_EQ(Kinds(events), (Strings{"nvswitch_sxid"}));
  EXPECT_EQ(events[0].Field("engine_instance"), "44");
}

TEST(LogParser, ConsoleBroadcastTakesItsHeadersTimeAndHost) {
  // madMAx43v3r/chia-plotter#535.
  auto events = ParseText(
      "Message from syslogd@plot-071 at Jun 17 13:06:42 ...\n"
      " kernel:[405108.698255] watchdog: BUG: soft lockup - CPU#2 stuck for 22s! [chia_plot:29632]\n",
      TestOptions());
  ASSERT_EQ(Kinds(events), (Strings{"soft_lockup"}));
  EXPECT_EQ(events[0].host, "plot-071");
  ASSERT_TRUE(events[0].time);
  EXPECT_EQ(FormatIsoUtc(*events[0].time), "2024-06-17T13:06:42.000Z");
  EXPECT_EQ(events[0].line_number, 2u);
  // Constructed: the header of the line above before an AMD machine check line of henrygd/beszel#1558.
  events = ParseText(
      "Message from syslogd@plot-071 at Jun 17 13:06:42 ...\n"
      " kernel:[Hardware Error]: CPU:1 (19:18:1) MC17_STATUS[Over|CE|MiscV|-|-|-|SyndV|-|-|-]: 0xd820000000060150\n",
      TestOptions());
  ASSERT_EQ(Kinds(events), (Strings{"mce"}));
  EXPECT_EQ(events[0].Field("bank"), "17");
  EXPECT_EQ(events[0].host, "plot-071");
}

TEST(LogParser, XidNamingItsCauseGivesTheCauseAnEvent) {
  // NVIDIA/open-gpu-kernel-modules#1150.
  auto events = ParseLine(
      "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149",
      TestOptions());
  ASSERT_EQ(Kinds(events), (Strings{"xid", "xid"}));
  EXPECT_EQ(events[0].xid, 45u);
  EXPECT_EQ(events[0].Field("caused_by_xid"), "149");
  EXPECT_EQ(events[0].pid, 1818990u);
  EXPECT_EQ(events[1].xid, 149u);
  EXPECT_EQ(events[1].Field("named_by_xid"), "45");
  EXPECT_EQ(events[1].pci_bus_id, "0000:dc:00.0");
  EXPECT_FALSE(events[1].pid);
}

TEST(LogParser, JsonWrappedLinesAreReadAsTheLineTheyWrap) {
  // Constructed: journalctl -o json's fields around the Xid line of NVIDIA/open-gpu-kernel-modules#1150.
  auto events = ParseLine(
      R"({"_HOSTNAME":"gpu-7","__REALTIME_TIMESTAMP":"1779091200000000","SYSLOG_IDENTIFIER":"kernel",)"
      R"("MESSAGE":"NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001"})",
      TestOptions());
  ASSERT_EQ(Kinds(events), (Strings{"xid"}));
  EXPECT_EQ(events[0].host, "gpu-7");
  ASSERT_TRUE(events[0].time);
  EXPECT_EQ(FormatIsoUtc(*events[0].time), "2026-05-18T08:00:00.000Z");
  EXPECT_EQ(events[0].message, "NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001");
  EXPECT_EQ(events[0].raw.front(), '{');
  // Constructed: Docker's json-file record of the same line as a container printed it.
  events = ParseLine(R"({"log":"NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001\n",)"
                     R"("stream":"stdout","time":"2026-05-18T08:00:01.5Z"})",
                     TestOptions());
  ASSERT_EQ(Kinds(events), (Strings{"xid"}));
  ASSERT_TRUE(events[0].time);
  EXPECT_EQ(FormatIsoUtc(*events[0].time), "2026-05-18T08:00:01.500Z");
}

TEST(LogParser, ProbeFailureWithNouveau) {
  auto events = ParseText(
      "[ 3.1] NVRM: The NVIDIA probe routine was not called for 1 device(s).\n"
      "[ 3.1] NVRM: This can occur when a driver such as: \n"
      "[ 3.1] NVRM: nouveau, rivafb, nvidiafb or rivatv \n"
      "[ 3.1] NVRM: was loaded and obtained ownership of the NVIDIA device(s).\n"
      "[ 3.1] NVRM: No NVIDIA devices probed.\n",
      TestOptions());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "driver_probe_failed");
  EXPECT_EQ(events[0].Field("conflicting_driver"), "nouveau");
  EXPECT_EQ(events[0].Field("device_count"), "1");
}

// The wordings of drivers/base/dd.c from Linux 6.x and of the x86 traps' oops headers. The lines are built from
// the kernel's format strings (dev_err's "<driver> <device>: " prefix, the trap's "<reason>: <code> [#<n>]").
TEST(LogParser, NewerKernelsProbeFailureAndTrapOopses) {
  auto probe = ParseLine("[    5.1] nvidia 0000:3b:00.0: probe with driver nvidia failed with error -1", TestOptions());
  ASSERT_EQ(probe.size(), 1u);
  EXPECT_EQ(probe[0].kind, "driver_probe_failed");
  EXPECT_EQ(probe[0].Field("error_code"), "-1");
  EXPECT_EQ(probe[0].pci_bus_id, "0000:3b:00.0");
  for (std::string_view reason : {"divide error", "invalid opcode",
                                  "general protection fault, probably for non-canonical address 0xdead000000000100"}) {
    auto oops = ParseLine("[  812.3] " + std::string(reason) + ": 0000 [#1] PREEMPT SMP NOPTI", TestOptions());
    ASSERT_EQ(oops.size(), 1u) << reason;
    EXPECT_EQ(oops[0].kind, "kernel_oops");
    EXPECT_EQ(oops[0].Field("oops_number"), "1");
  }
}

TEST(LogParser, NvswitchSxidSeverityFollowsTheLine) {
  auto events = ParseLine(
      "nvidia-nvswitch3: SXid (PCI:0000:c8:00.0): 20034, Fatal, Link 24 LTSSM Fault Up", TestOptions());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].severity, EventSeverity::kCritical);
  EXPECT_EQ(events[0].Field("sxid"), "20034");
  events = ParseLine(
      "nvidia-nvswitch0: SXid (PCI:0000:07:00.0): 12028, Non-fatal, Link 45 egress non-posted PRIV error",
      TestOptions());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].severity, EventSeverity::kWarning);
}

// An error that reaches every switch of a baseboard: each prints its report at once, the lines interleaved
// (the order and the wording of a real service VM's log; the switches' bus ids shortened to two).
TEST(LogParser, InterleavedReportsOfSeveralSwitchesEachKeepTheirLines) {
  auto events = ParseText(
      "[ 8123.617543] nvidia-nvswitch1: SXid (PCI:0000:00:08.0): 11004, Non-fatal, Link 36 ingress invalid ACL "
      "(First)\n"
      "[ 8123.617548] nvidia-nvswitch2: SXid (PCI:0000:00:09.0): 11004, Non-fatal, Link 42 ingress invalid ACL "
      "(First)\n"
      "[ 8123.617798] nvidia-nvswitch2: SXid (PCI:0000:00:09.0): 11004, Severity 0 Engine instance 42 Sub-engine "
      "instance 00\n"
      "[ 8123.618226] nvidia-nvswitch1: SXid (PCI:0000:00:08.0): 11004, Severity 0 Engine instance 36 Sub-engine "
      "instance 00\n"
      "[ 8123.619785] nvidia-nvswitch1: SXid (PCI:0000:00:08.0): 11004, Data {0x00000008, 0xff9fc39c}\n"
      "[ 8123.619817] nvidia-nvswitch2: SXid (PCI:0000:00:09.0): 11004, Data {0x00000038, 0x008bb02f}\n",
      TestOptions());
  ASSERT_EQ(events.size(), 2u);  // no line of one switch's report is a report of its own
  EXPECT_EQ(events[0].pci_bus_id, "0000:00:08.0");
  EXPECT_EQ(events[0].Field("engine_instance"), "36");
  EXPECT_EQ(events[0].Field("sxid_data"), "0x00000008, 0xff9fc39c");
  EXPECT_EQ(events[0].severity, EventSeverity::kWarning);
  EXPECT_EQ(events[1].pci_bus_id, "0000:00:09.0");
  EXPECT_EQ(events[1].Field("engine_instance"), "42");
  EXPECT_EQ(events[1].Field("sxid_data"), "0x00000038, 0x008bb02f");
  EXPECT_EQ(events[1].severity, EventSeverity::kWarning);
}

TEST(LogParser, HostEvents) {
  EXPECT_EQ(Kinds(ParseLine("[ 9.0] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:", TestOptions())),
            (Strings{"rcu_stall"}));
  auto events = ParseLine(
      "[ 9.0] Memory cgroup out of memory: Killed process 4121 (python3) total-vm:9000kB, anon-rss:800kB, "
      "file-rss:0kB",
      TestOptions());
  ASSERT_EQ(Kinds(events), (Strings{"oom_kill"}));
  EXPECT_EQ(events[0].pid, 4121u);
  EXPECT_EQ(events[0].Field("scope"), "Memory cgroup out of memory");
  events = ParseLine("[ 9.0] EDAC MC0: 1 UE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (channel:1)",
                     TestOptions());
  ASSERT_EQ(Kinds(events), (Strings{"mce"}));
  EXPECT_EQ(events[0].severity, EventSeverity::kCritical);
  EXPECT_EQ(Kinds(ParseLine("[ 9.0] thermal thermal_zone2: critical temperature reached (105 C), shutting down",
                            TestOptions())),
            (Strings{"cpu_thermal"}));
}

TEST(LogParser, DriverAndFabricManagerMessages) {
  EXPECT_EQ(Kinds(ParseLine("Failed to initialize NVML: Driver/library version mismatch", TestOptions())),
            (Strings{"driver_mismatch"}));
  EXPECT_EQ(Kinds(ParseLine("[ 4.0] nvidia_uvm: disagrees about version of symbol nvUvmInterfaceRegisterGpu",
                            TestOptions())),
            (Strings{"driver_mismatch"}));
  EXPECT_EQ(Kinds(ParseLine("[ 4.0] NVRM: GPU0 kgspInitRm_IMPL: cannot bootstrap GSP from ucode", TestOptions())),
            (Strings{"gsp_init_failed"}));
  EXPECT_EQ(Kinds(ParseLine("Mar  3 10:00:00 dgx nv-fabricmanager[3321]: Failed to initialize NVSwitch training, "
                            "error: timed out",
                            TestOptions())),
            (Strings{"fabric_manager"}));
}

TEST(LogParser, OrdinaryLinesGiveNothing) {
  for (const char* line : {
           "[    5.331287] nvidia: loading out-of-tree module taints kernel.",
           "[ 5.5] [drm] Initialized nvidia-drm 0.0.0 20160202 for 0000:18:00.0 on minor 1",
           "[ 7.0] mlx5_core 0000:1a:00.0 ibp26s0: Link down",
           "[ 1.7] mce: CPU supports 32 MCE banks",
           "[ 2.0] NMI watchdog: Enabled. Permanently consumes one hw-PMU counter.",
           "[ 1.5] pcieport 0000:15:01.0: AER: enabled with IRQ 44",
           "NVRM: GPU at PCI:0000:01:00: GPU-4e391288-897c-ba5d-6944-dfbea55ebcfa",
           "",
           "\xff\xfe garbage \x80",
       }) {
    EXPECT_TRUE(ParseLine(line, TestOptions()).empty()) << line;
  }
}

TEST(LogParser, GpuIdentityComesFromEarlierLines) {
  auto events = ParseText(
      "NVRM: GPU at PCI:0000:00:05: GPU-efbdfde9-5798-a6e7-4c46-12518fa15375\n"
      "NVRM: GPU Board Serial Number: 1650423013443\n"
      "NVRM: Xid (PCI:0000:00:05): 43, pid=1045242, name=pt_main_thread, Ch 00000008\n"
      "NVRM: Xid (PCI:0000:00:06): 43, pid=1045242, name=pt_main_thread, Ch 00000008\n",
      TestOptions());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].gpu_uuid, "GPU-efbdfde9-5798-a6e7-4c46-12518fa15375");
  EXPECT_EQ(events[0].gpu_serial, "1650423013443");
  EXPECT_EQ(events[1].gpu_uuid, "");  // another GPU
}

}  // namespace
}  // namespace gpudoctor
