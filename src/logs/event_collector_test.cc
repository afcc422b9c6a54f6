#include "logs/event_collector.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "logs/incidents.h"

namespace gpudoctor {
namespace {

WallTime At(double seconds) {
  return WallTime{std::chrono::duration_cast<WallTime::duration>(std::chrono::duration<double>(1'700'000'000 + seconds))};
}

LogEvent Xid(uint32_t code, std::string pci, double seconds, uint64_t line) {
  LogEvent event;
  event.kind = "xid";
  event.severity = EventSeverity::kCritical;
  event.xid = code;
  event.pci_bus_id = std::move(pci);
  event.message = "NVRM: Xid (PCI:" + event.pci_bus_id + "): " + std::to_string(code) + ", pid=77";
  event.raw = "[line " + std::to_string(line) + "] " + event.message;
  event.time = At(seconds);
  event.line_number = line;
  return event;
}

uint64_t TotalOccurrences(const std::vector<LogEvent>& events) {
  uint64_t total = 0;
  for (const LogEvent& event : events) total += Occurrences(event);
  return total;
}

TEST(EventCollector, AStormIsAFewEventsThatStillCountEveryLine) {
  EventCollector collector;
  for (int i = 0; i < 100'000; ++i) collector.Add(Xid(95, "0000:3b:00.0", i * 0.001, static_cast<uint64_t>(i + 1)));
  EXPECT_EQ(collector.seen(), 100'000u);
  std::vector<LogEvent> events = collector.Take();
  ASSERT_EQ(events.size(), 4u);  // three as they were, one for the rest
  EXPECT_EQ(TotalOccurrences(events), 100'000u);
  EXPECT_EQ(events[0].line_number, 1u);
  EXPECT_EQ(events[2].line_number, 3u);
  const LogEvent& rest = events[3];
  EXPECT_EQ(rest.repeats, 99'996u);
  EXPECT_EQ(*rest.repeats_from, At(0.003));
  EXPECT_EQ(*rest.time, At(99.999));
  EXPECT_EQ(rest.line_number, 100'000u);  // the last line, quoted as it was
  EXPECT_EQ(rest.raw, "[line 100000] " + rest.message);
}

TEST(EventCollector, InterleavedStormsFoldEachIntoItsOwnRun) {
  // Two GPUs' storms line by line, and a third event now and then: the run of the event before is never the
  // next event's, so each is found by its hash; each storm still folds alone, every line counted.
  EventCollector collector;
  for (int i = 0; i < 3'000; ++i) {
    const double t = i * 0.001;
    const uint64_t line = static_cast<uint64_t>(3 * i + 1);
    collector.Add(Xid(95, "0000:3b:00.0", t, line));
    collector.Add(Xid(95, "0000:5e:00.0", t, line + 1));
    if (i % 100 == 0) collector.Add(Xid(13, "0000:3b:00.0", t, line + 2));
  }
  std::vector<LogEvent> events = collector.Take();
  EXPECT_EQ(TotalOccurrences(events), 6'030u);
  ASSERT_EQ(events.size(), 12u);  // four per storm: three as they were, one for the rest
  for (const char* pci : {"0000:3b:00.0", "0000:5e:00.0"}) {
    const auto last = std::find_if(events.rbegin(), events.rend(),
                                   [&](const LogEvent& e) { return e.pci_bus_id == pci && e.xid == 95u; });
    ASSERT_NE(last, events.rend()) << pci;
    EXPECT_EQ(last->repeats, 2'996u) << pci;
    EXPECT_EQ(*last->time, At(2.999)) << pci;
  }
}

TEST(EventCollector, AStormOfDifferingEventsIsHeldInBoundedMemory) {
  // Each line names its own process, as an Xid 13/31/43 storm of many jobs does: no two events are identical.
  EventCollector collector({.max_events = 1000});
  for (int i = 0; i < 200'000; ++i) {
    LogEvent event = Xid(i % 2 ? 31 : 13, "0000:3b:00.0", 0.001 * i, static_cast<uint64_t>(i + 1));
    event.message += std::to_string(i);
    collector.Add(std::move(event));
  }
  LogEvent other = Xid(79, "0000:86:00.0", 300, 200'001);  // a new kind of trouble is still held as it is
  collector.Add(std::move(other));
  std::vector<LogEvent> events = collector.Take();
  EXPECT_LE(events.size(), 1003u);  // the held ones, one crowd per Xid, and the Xid 79
  EXPECT_EQ(TotalOccurrences(events), 200'001u);
  uint64_t xid13 = 0;
  for (const LogEvent& event : events) {
    if (event.xid == 13u) xid13 += Occurrences(event);
    if (event.repeats > 0) {
      EXPECT_LT(*event.repeats_from, *event.time);
      EXPECT_EQ(*event.time, At(0.001 * (event.xid == 13u ? 199'998 : 199'999)));  // the crowd's newest line
    }
  }
  EXPECT_EQ(xid13, 100'000u);
  EXPECT_EQ(events.back().xid, 79u);
  EXPECT_EQ(events.back().repeats, 0u);
}

TEST(EventCollector, DifferentEventsAndQuietGapsAreNotFolded) {
  EventCollector collector;
  for (int i = 0; i < 10; ++i) {
    collector.Add(Xid(95, "0000:3b:00.0", i * 10.0, static_cast<uint64_t>(2 * i + 1)));  // 10 s apart: no storm
    collector.Add(Xid(95, "0000:5e:00.0", i * 10.0, static_cast<uint64_t>(2 * i + 2)));  // another GPU
  }
  LogEvent other = Xid(95, "0000:3b:00.0", 100.1, 21);
  other.message += " (channel 7)";
  collector.Add(std::move(other));  // another message
  EXPECT_EQ(collector.Take().size(), 21u);
}

TEST(EventCollector, EventsWithoutTimeFoldByCount) {
  EventCollector collector;
  for (int i = 0; i < 50; ++i) {
    LogEvent event = Xid(31, "0000:01:00.0", 0, static_cast<uint64_t>(i + 1));
    event.time.reset();
    collector.Add(std::move(event));
  }
  std::vector<LogEvent> events = collector.Take();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(TotalOccurrences(events), 50u);
  EXPECT_FALSE(events.back().time);
}

TEST(EventCollector, KeepSpanDropsWhatNoWindowCanReach) {
  EventCollector collector({.keep_span = std::chrono::hours(1)});
  // One event a minute for a day, each on its own GPU so none fold.
  for (int minute = 0; minute < 24 * 60; ++minute) {
    char pci[32];
    std::snprintf(pci, sizeof pci, "0000:%02x:00.0", minute % 200);
    collector.Add(Xid(13, pci, minute * 60.0, static_cast<uint64_t>(minute + 1)));
  }
  LogEvent untimed = Xid(13, "0000:01:00.0", 0, 5000);
  untimed.time.reset();
  collector.Add(std::move(untimed));
  std::vector<LogEvent> events = collector.Take();
  // The last hour (61 events, both ends included) and the event without a time.
  ASSERT_EQ(events.size(), 62u);
  EXPECT_EQ(events.front().line_number, 24u * 60 - 60);
  EXPECT_FALSE(events.back().time);
}

TEST(EventCollector, FoldingGoesOnAfterOldEventsAreDropped) {
  EventCollector collector;
  collector.Add(Xid(79, "0000:01:00.0", 0, 1));
  for (int i = 0; i < 5000; ++i) collector.Add(Xid(95, "0000:3b:00.0", 3600 + i * 0.01, static_cast<uint64_t>(i + 2)));
  collector.DropOlderThan(At(60));
  for (int i = 5000; i < 10000; ++i) collector.Add(Xid(95, "0000:3b:00.0", 3600 + i * 0.01, static_cast<uint64_t>(i + 2)));
  const std::vector<LogEvent>& events = collector.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(TotalOccurrences(events), 10'000u);
}

TEST(EventCollector, IncidentsOfFoldedEventsCountEveryLine) {
  EventCollector collector;
  for (int i = 0; i < 10'000; ++i) collector.Add(Xid(95, "0000:3b:00.0", i * 0.01, static_cast<uint64_t>(i + 1)));
  std::vector<Incident> incidents = GroupIncidents(collector.Take());
  ASSERT_EQ(incidents.size(), 1u);
  EXPECT_EQ(incidents[0].event_count, 10'000u);
  EXPECT_EQ(incidents[0].counts.at("xid 95"), 10'000u);
  EXPECT_EQ(*incidents[0].first_time, At(0));
  EXPECT_EQ(*incidents[0].last_time, At(99.99));
}

}  // namespace
}  // namespace gpudoctor
