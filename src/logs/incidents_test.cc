#include "logs/incidents.h"

#include <gtest/gtest.h>

#include "logs/log_parser.h"
#include "logs/log_reader.h"
#include "logs/log_time.h"

namespace gpudoctor {
namespace {

LogEvent Event(std::string kind, std::string pci, int seconds, std::optional<uint32_t> xid = std::nullopt,
               EventSeverity severity = EventSeverity::kWarning) {
  LogEvent event;
  event.kind = std::move(kind);
  event.pci_bus_id = std::move(pci);
  event.xid = xid;
  event.severity = severity;
  event.time = WallTime{std::chrono::seconds(1'700'000'000 + seconds)};
  event.line_number = static_cast<uint64_t>(seconds + 1);
  return event;
}

TEST(Incidents, AStormIsOneIncidentWithCountAndTimes) {
  std::vector<LogEvent> events;
  for (int i = 0; i < 10000; ++i) events.push_back(Event("xid", "0000:3b:00.0", i / 10, 95, EventSeverity::kCritical));
  auto incidents = GroupIncidents(events);
  ASSERT_EQ(incidents.size(), 1u);
  const Incident& storm = incidents[0];
  EXPECT_EQ(storm.event_count, 10000u);
  EXPECT_EQ(storm.counts.at("xid 95"), 10000u);
  EXPECT_EQ(storm.chain, std::vector<std::string>{"xid 95"});
  EXPECT_EQ(*storm.first_time, *events.front().time);
  EXPECT_EQ(*storm.last_time, *events.back().time);
  EXPECT_LE(storm.examples.size(), 4u);
  EXPECT_EQ(storm.severity, EventSeverity::kCritical);
}

TEST(Incidents, SplitByGpuAndByQuietTime) {
  std::vector<LogEvent> events = {
      Event("xid", "0000:01:00.0", 0, 13), Event("xid", "0000:02:00.0", 1, 31), Event("xid", "0000:01:00.0", 30, 13),
      Event("xid", "0000:01:00.0", 7200, 13),  // two hours later: a new incident
  };
  auto incidents = GroupIncidents(events, std::chrono::minutes(5));
  ASSERT_EQ(incidents.size(), 3u);
  EXPECT_EQ(incidents[0].subject, "0000:01:00.0");
  EXPECT_EQ(incidents[0].event_count, 2u);
  EXPECT_EQ(incidents[1].subject, "0000:02:00.0");
  EXPECT_EQ(incidents[2].event_count, 1u);
}

TEST(Incidents, HostEventsShareTheHostSubject) {
  auto incidents = GroupIncidents({Event("oom_kill", "", 0), Event("cpu_thermal", "", 5)});
  ASSERT_EQ(incidents.size(), 1u);
  EXPECT_EQ(incidents[0].subject, "host");
  EXPECT_EQ(incidents[0].chain, (std::vector<std::string>{"oom_kill", "cpu_thermal"}));
}

TEST(Incidents, PcieErrorLeadsTheGpuLossItCaused) {
  // Corpus 047: AER on root port 00:01.0, then the GPU behind it falls off the bus.
  ReadOptions options;
  auto contents = ReadLogFile(std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/kernel_logs/047.log", options);
  ASSERT_TRUE(contents);
  auto incidents = GroupIncidents(contents->events);
  ASSERT_EQ(incidents.size(), 1u);
  const Incident& incident = incidents[0];
  EXPECT_EQ(incident.subject, "0000:01:00.0");
  EXPECT_EQ(incident.chain, (std::vector<std::string>{"pcie_aer", "xid 79", "gpu_off_bus"}));
  EXPECT_EQ(incident.headline.xid, 79u);
  EXPECT_EQ(incident.severity, EventSeverity::kCritical);
  EXPECT_EQ(incident.event_count, 3u);
}

TEST(Incidents, PcieErrorIsNotBlamedWhenTwoGpusFail) {
  auto incidents = GroupIncidents({Event("pcie_aer", "0000:00:01.0", 0), Event("gpu_off_bus", "0000:01:00.0", 1),
                                   Event("gpu_off_bus", "0000:41:00.0", 2)});
  EXPECT_EQ(incidents.size(), 3u);
}

TEST(Incidents, UptimeGoingBackwardsMeansAReboot) {
  LogEvent a = Event("xid", "0000:01:00.0", 0, 79);
  LogEvent b = a;
  a.time.reset();
  b.time.reset();
  a.uptime_seconds = 5000;
  b.uptime_seconds = 12;
  EXPECT_EQ(GroupIncidents({a, b}).size(), 2u);
}

}  // namespace
}  // namespace gpudoctor
