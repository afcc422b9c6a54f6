#include "store/event_records.h"

#include <gtest/gtest.h>

#include "store/test_support.h"

namespace gpudoctor {
namespace {

using testing::T0;

TEST(EventRecords, LogEventsComeBackWhole) {
  LogEvent event;
  event.kind = "pcie_aer";
  event.severity = EventSeverity::kWarning;
  event.time = T0() + std::chrono::milliseconds(123);
  event.time_is_utc = true;
  event.time_estimated = true;
  event.uptime_seconds = 35.563936;
  event.host = "gpu-node-7";
  event.pci_bus_id = "0000:00:03.0";
  event.xid = 13;
  event.pid = 4242;
  event.process = "python3";
  event.gpu_uuid = "GPU-1";
  event.gpu_serial = "1650";
  event.message = "AER: Corrected error received";
  event.detail = "aer_severity=Corrected";
  event.fields = {{"aer_severity", "Corrected"}, {"aer_type", "Data Link Layer"}};
  event.raw = "pcieport 0000:00:03.0: AER: Corrected error received \xff";
  event.source = "/dev/kmsg";
  event.line_number = 99;

  auto again = LogEventFromRecord(LogEventToRecord(event));
  ASSERT_TRUE(again.has_value());
  event.raw = "pcieport 0000:00:03.0: AER: Corrected error received \xef\xbf\xbd";  // not UTF-8: replaced
  EXPECT_EQ(again->kind, event.kind);
  EXPECT_EQ(again->severity, event.severity);
  EXPECT_EQ(again->time, event.time);
  EXPECT_EQ(again->time_is_utc, event.time_is_utc);
  EXPECT_EQ(again->time_estimated, event.time_estimated);
  EXPECT_EQ(again->uptime_seconds, event.uptime_seconds);
  EXPECT_EQ(again->host, event.host);
  EXPECT_EQ(again->pci_bus_id, event.pci_bus_id);
  EXPECT_EQ(again->xid, event.xid);
  EXPECT_EQ(again->pid, event.pid);
  EXPECT_EQ(again->process, event.process);
  EXPECT_EQ(again->gpu_uuid, event.gpu_uuid);
  EXPECT_EQ(again->gpu_serial, event.gpu_serial);
  EXPECT_EQ(again->message, event.message);
  EXPECT_EQ(again->detail, event.detail);
  EXPECT_EQ(again->fields, event.fields);
  EXPECT_EQ(again->raw, event.raw);
  EXPECT_EQ(again->source, event.source);
  EXPECT_EQ(again->line_number, event.line_number);
}

TEST(EventRecords, NvmlXidsComeBackWhole) {
  const XidEvent xid{.gpu_index = 6, .xid = 48, .time = T0()};
  EXPECT_EQ(NvmlXidFromRecord(NvmlXidToRecord(xid)), xid);
}

TEST(EventRecords, DamagedRecordsAreRefusedNotGuessed) {
  for (const char* body : {"", "null", "[]", "{", "{\"kind\": 5, \"severity\": \"info\"}",
                           "{\"kind\": \"xid\", \"severity\": \"dreadful\"}"}) {
    EXPECT_FALSE(LogEventFromRecord(body).has_value()) << body;
  }
  for (const char* body : {"{}", "{\"gpu\": -1, \"xid\": 1, \"time_ms\": 0}",
                           "{\"gpu\": 4294967296, \"xid\": 1, \"time_ms\": 0}",
                           "{\"gpu\": 1, \"xid\": 1, \"time_ms\": 9223372036854775807}",
                           "{\"gpu\": 1, \"xid\": \"79\", \"time_ms\": 0}"}) {
    EXPECT_FALSE(NvmlXidFromRecord(body).has_value()) << body;
  }
  // Optional fields of the wrong type are read as absent.
  auto event = LogEventFromRecord(R"({"kind": "xid", "severity": "critical", "xid": 4294967296, "pid": "12"})");
  ASSERT_TRUE(event.has_value());
  EXPECT_FALSE(event->xid.has_value());
  EXPECT_FALSE(event->pid.has_value());
}

}  // namespace
}  // namespace gpudoctor
