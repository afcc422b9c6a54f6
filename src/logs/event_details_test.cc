// Decoding what Xid and SXid lines say beyond their code, and joining the
// lines of one kernel record. Real lines come from the corpus files in
// testdata/kernel_logs (their sources are named there); lines built from a
// driver's format string are marked as such.
#include "logs/event_details.h"

#include <gtest/gtest.h>

#include "logs/log_parser.h"

namespace gpudoctor {
namespace {

const LogEvent* Find(const std::vector<LogEvent>& events, std::string_view kind) {
  for (const LogEvent& event : events)
    if (event.kind == kind) return &event;
  return nullptr;
}

LogEvent XidEvent(uint32_t xid, std::string message) {
  LogEvent event;
  event.kind = "xid";
  event.xid = xid;
  event.severity = LogCatalog::Builtin().SeverityOf("xid", xid);
  event.message = std::move(message);
  return event;
}

TEST(EventDetails, NvLink5SubcodeOfALinkDownNamesThePeer) {
  // testdata/kernel_logs/nvlink5_xid_decode.log
  LogEvent event = XidEvent(149, "NVRM: Xid (PCI:0009:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 "
                                 "(0x021425c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)");
  DecodeEventDetails(LogCatalog::Builtin(), event);
  EXPECT_EQ(event.Field("link"), "01");
  EXPECT_EQ(event.Field("subcode"), "33");
  EXPECT_EQ(event.Field("resolution"), "RESET_GPU, then INVESTIGATE_PEER_DEVICE");
  EXPECT_NE(event.Field("action").find("other end of the link"), std::string_view::npos);
  EXPECT_EQ(event.severity, EventSeverity::kCritical);
}

TEST(EventDetails, NvLink5NonfatalIsAWarningWhateverTheCatalogSays) {
  LogEvent event = XidEvent(144, "NVRM: Xid (PCI:0000:01:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0 "
                                 "(0x00000001 0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)");
  ASSERT_EQ(event.severity, EventSeverity::kCritical);
  DecodeEventDetails(LogCatalog::Builtin(), event);
  EXPECT_EQ(event.severity, EventSeverity::kWarning);
  EXPECT_EQ(event.Field("error_status"), "0x00000008");
  EXPECT_EQ(event.Field("resolution"), "IGNORE, then CONTACT_SUPPORT");
}

TEST(EventDetails, NvLink5LineOfAnOlderDriverGivesItsWord) {
  // Drivers before R575 print "XC 1 i 2" and one bracketed word (format seen in public parser tests).
  LogEvent event = XidEvent(149, "NVRM: Xid (PCI:0000:00:1e): 149, NETIR_LINK_EVT Fatal XC 1 i 2 Link 01 [0x0000000a]");
  DecodeEventDetails(LogCatalog::Builtin(), event);
  EXPECT_EQ(event.Field("intrinfo"), "0x0000000a");
  EXPECT_EQ(event.Field("subcode"), "0");
  EXPECT_EQ(event.Field("error_status"), "");
}

TEST(EventDetails, Xid74RegistersAreDecodedBitByBit) {
  LogEvent event = XidEvent(74, "NVRM: Xid (PCI:0000:b9:00): 74, pid=<unknown>, name=<unknown>, NVLink: fatal error "
                                "detected on link 6(0x200020, 0x0, 0x0, 0x0, 0x100000, 0x0, 0x0)");
  DecodeEventDetails(LogCatalog::Builtin(), event);
  EXPECT_EQ(event.Field("link"), "6");
  std::string_view meaning = event.Field("meaning");
  EXPECT_NE(meaning.find("register 0 bit 5: an ECC or parity error"), std::string_view::npos) << meaning;
  EXPECT_NE(meaning.find("register 0 bit 21: marginal signal integrity"), std::string_view::npos) << meaning;
  EXPECT_NE(meaning.find("register 4 bit 20: corrected ECC errors passed a threshold"), std::string_view::npos);
  EXPECT_EQ(event.severity, EventSeverity::kCritical);
}

TEST(EventDetails, Xid74ThresholdBitsAloneAreAWarningNotAnOutage) {
  LogEvent event = XidEvent(74, "NVLink: fatal error detected on link 3(0x0, 0x0, 0x0, 0x0, 0x800000, 0x0, 0x0)");
  DecodeEventDetails(LogCatalog::Builtin(), event);
  EXPECT_EQ(event.severity, EventSeverity::kWarning);
}

TEST(EventDetails, Xid74BitsOutsideTheTableAreUnexpected) {
  LogEvent event = XidEvent(74, "NVLink: fatal error detected on link 3(0x0, 0x0, 0x0, 0x1, 0x0, 0x0, 0x0)");
  DecodeEventDetails(LogCatalog::Builtin(), event);
  EXPECT_EQ(event.Field("meaning"), "register 3 has unexpected bits set");
  EXPECT_EQ(event.severity, EventSeverity::kCritical);
}

TEST(EventDetails, Xid154NoneIsInformation) {
  LogEvent event = XidEvent(154, "NVRM: Xid (PCI:0000:0b:00): 154, GPU recovery action changed from 0x1 (GPU Reset "
                                 "Required) to 0x0 (None)");
  DecodeEventDetails(LogCatalog::Builtin(), event);
  EXPECT_EQ(event.Field("recovery"), "none");
  EXPECT_EQ(event.severity, EventSeverity::kInfo);
}

TEST(EventDetails, Xid154DrainAndResetIsNotMistakenForAReset) {
  // The wording of NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET, as in public parser tests.
  LogEvent event = XidEvent(154, "NVRM: Xid (PCI:0000:00:1e): 154, GPU recovery action changed from 0x0 (None) to 0x1 "
                                 "(Drain and Reset)");
  DecodeEventDetails(LogCatalog::Builtin(), event);
  EXPECT_EQ(event.Field("recovery"), "drain_and_reset");
}

TEST(EventDetails, SxidWithoutAWordTakesTheCatalogSeverity) {
  // A cable-module SXid: "Module %d boot failure" carries no severity word (NVSwitch driver format).
  auto events = ParseLine("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12022, Module 3 boot failure");
  const LogEvent* sxid = Find(events, "nvswitch_sxid");
  ASSERT_NE(sxid, nullptr);
  EXPECT_EQ(sxid->Field("cable_module"), "3");
  EXPECT_EQ(sxid->severity, LogCatalog::Builtin().FindSxid(12022)->severity);
  EXPECT_EQ(LogCatalog::Builtin().TitleOf(*sxid), "SXid 12022: Egress input double-bit ECC error");
}

TEST(EventDetails, GspFormsOfTheCurrentDriver) {
  // Format strings of the 595 driver (kernel_gsp.c, kernel_gsp_gb100.c); no public capture found yet.
  auto heartbeat = ParseLine("NVRM: GPU1 _kgspRpcRecvPoll: GSP RM heartbeat timed out");
  ASSERT_NE(Find(heartbeat, "gsp_timeout"), nullptr);
  EXPECT_EQ(Find(heartbeat, "gsp_timeout")->Field("heartbeat"), "GSP RM");
  auto fatal = ParseLine("NVRM: GPU0 kgspServiceFatalHwError_GB100: NV_PGSP_FALCON_IRQSTAT_FATAL_ERROR TKE Watchdog "
                         "Timeout pending (mask: 0x400)");
  ASSERT_NE(Find(fatal, "gsp_error"), nullptr);
  EXPECT_EQ(Find(fatal, "gsp_error")->Field("gsp_fatal_error"), "TKE Watchdog Timeout");
  // CrashCat reports a GSP watchdog without an Xid (crashcat_report_v1_libos3.c).
  auto watchdog = ParseLine("NVRM: GPU0 GSP task watchdog timeout @ pc:0x13ebd80, partition:2#0, task:3");
  ASSERT_NE(Find(watchdog, "gsp_timeout"), nullptr);
  EXPECT_EQ(Find(watchdog, "gsp_timeout")->Field("gsp_pc"), "0x13ebd80");
}

TEST(EventDetails, IndentedContinuationJoinsTheXidMessage) {
  // testdata/kernel_logs/continued_lines.log
  auto events = ParseText(
      "[605633.376794] NVRM: Xid (PCI:0000:06:00): 120, GSP task exception: store access page fault (cause:0xf) @ "
      "pc:0x13ebd80, partition:2#0, task:3\n"
      "[605633.376800] NVRM:     Reported by libos partition:2#4 kernel v3.1 [0] @ ts:1770232285\n");
  const LogEvent* xid = Find(events, "xid");
  ASSERT_NE(xid, nullptr);
  EXPECT_NE(xid->message.find("task:3 Reported by libos partition:2#4"), std::string::npos) << xid->message;
  EXPECT_EQ(xid->raw.find('\n') != std::string::npos, true);
}

TEST(EventDetails, AnUnindentedNvrmLineOfItsOwnIsNotAContinuation) {
  auto events = ParseText(
      "[ 1.0] NVRM: Xid (PCI:0000:01:00): 13, Graphics SM Warp Exception on (GPC 1, TPC 0): Out Of Range Address\n"
      "[ 1.0] NVRM: Xid (PCI:0000:01:00): 13, Graphics Exception: ESR 0x504648=0x102000e\n");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].line_number, 2u);
}

TEST(EventDetails, KmsgEscapedLineBreaksAreUnfolded) {
  // /dev/kmsg escapes a record's line breaks as \x0a (Documentation/ABI/testing/dev-kmsg); the
  // record is the one of testdata/kernel_logs/continued_lines.log, line 1.
  auto events = ParseLine(
      "4,812,9424670,-;NVRM: API mismatch: the client has the version 535.54.03, but\\x0aNVRM: this kernel module has "
      "the version 530.30.02.  Please\\x0aNVRM: make sure that this kernel module and all NVIDIA driver\\x0aNVRM: "
      "components have the same version.");
  const LogEvent* mismatch = Find(events, "driver_mismatch");
  ASSERT_NE(mismatch, nullptr);
  EXPECT_EQ(mismatch->Field("kernel_version"), "530.30.02");
  EXPECT_EQ(mismatch->message.find("\\x0a"), std::string::npos);
}

}  // namespace
}  // namespace gpudoctor
