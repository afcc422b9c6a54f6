#include "store/incident_tracker.h"

#include <gtest/gtest.h>

#include "store/test_support.h"

namespace gpudoctor {
namespace {

using namespace std::chrono_literals;
using testing::MakeFinding;
using testing::T0;
using Kind = FindingTransition::Kind;

std::vector<Kind> Kinds(const std::vector<FindingTransition>& transitions) {
  std::vector<Kind> kinds;
  for (const FindingTransition& t : transitions) kinds.push_back(t.kind);
  return kinds;
}

std::vector<int64_t> Ids(std::span<const StoredFinding> incidents) {
  std::vector<int64_t> ids;
  for (const StoredFinding& incident : incidents) ids.push_back(incident.incident_id);
  return ids;
}

StoredFinding Stored(int64_t id, const Finding& finding, WallTime opened) {
  return {.incident_id = id, .key = FindingKey(finding), .finding = finding, .opened_at = opened, .last_seen = opened};
}

TEST(IncidentTracker, OpensRefreshesChangesSeverityAndResolves) {
  IncidentTracker incidents;
  incidents.Adopt({}, 0, T0());
  const Finding hot = MakeFinding("temperature_high", 0);
  const Finding leak = MakeFinding("memory_leak", 1);

  auto first = incidents.Update(std::vector{hot, leak}, T0());
  EXPECT_EQ(Kinds(first), (std::vector{Kind::kOpened, Kind::kOpened}));
  EXPECT_EQ(Ids(incidents.open()), (std::vector<int64_t>{1, 2}));

  Finding hotter = hot;
  hotter.severity = Severity::kCritical;
  auto second = incidents.Update(std::vector{hotter}, T0() + 5s);
  EXPECT_EQ(Kinds(second), (std::vector{Kind::kSeverityChanged, Kind::kResolved}));
  EXPECT_EQ(second[1].incident.incident_id, 2);
  EXPECT_EQ(second[1].incident.resolved_at, T0() + 5s);
  ASSERT_EQ(incidents.open().size(), 1u);
  EXPECT_EQ(incidents.open()[0].last_seen, T0() + 5s);
  EXPECT_EQ(incidents.open()[0].opened_at, T0());
  // The store records the resolved incident before the open one.
  EXPECT_EQ(Ids(incidents.Touched()), (std::vector<int64_t>{2, 1}));

  auto third = incidents.Update(std::vector{hotter}, T0() + 10s);
  EXPECT_TRUE(third.empty());
  EXPECT_EQ(Ids(incidents.Touched()), (std::vector<int64_t>{1}));
}

TEST(IncidentTracker, ContinuesTheStoresIdsAndItsOpenIncidents) {
  const Finding hot = MakeFinding("temperature_high", 0);
  IncidentTracker incidents;
  incidents.Adopt({Stored(41, hot, T0())}, 57, T0() + 1h);
  EXPECT_TRUE(incidents.Touched().empty());

  // Still there after the restart: the same incident, nothing to alert.
  EXPECT_TRUE(incidents.Update(std::vector{hot}, T0() + 1h).empty());
  EXPECT_EQ(Ids(incidents.open()), (std::vector<int64_t>{41}));
  auto opened = incidents.Update(std::vector{hot, MakeFinding("memory_leak", 1)}, T0() + 2h);
  ASSERT_EQ(opened.size(), 1u);
  EXPECT_EQ(opened[0].incident.incident_id, 58);
}

TEST(IncidentTracker, IncidentsOpenedBeforeTheStoreWasReachableAreNumberedAfterItsIds) {
  const Finding hot = MakeFinding("temperature_high", 0);
  const Finding leak = MakeFinding("memory_leak", 1);
  const Finding fan = MakeFinding("fan_failure", 2);
  const Finding stale = MakeFinding("pcie_replay", 3);
  IncidentTracker incidents;
  auto opened = incidents.Update(std::vector{hot, leak, fan}, T0());
  EXPECT_EQ(Ids(incidents.open()), (std::vector<int64_t>{-1, -2, -3}));  // provisional
  ASSERT_EQ(opened.size(), 3u);
  EXPECT_LT(opened[0].incident.incident_id, 0);
  incidents.Update(std::vector{hot, leak}, T0() + 5s);  // fan (-3) resolved while no store was reachable

  // The store held `hot` open from before the restart, and `stale`, which is gone now.
  auto adoption = incidents.Adopt({Stored(10, hot, T0() - 1h), Stored(12, stale, T0() - 1h)}, 20, T0() + 10s);
  EXPECT_EQ(adoption.renumbered, (std::vector<std::pair<int64_t, int64_t>>{{-3, 22}, {-2, 21}, {-1, 10}}));
  ASSERT_EQ(adoption.resolved.size(), 1u);
  EXPECT_EQ(adoption.resolved[0].incident.incident_id, 12);
  EXPECT_EQ(adoption.resolved[0].incident.resolved_at, T0() + 10s);
  EXPECT_EQ(Ids(incidents.open()), (std::vector<int64_t>{10, 21}));
  EXPECT_EQ(incidents.open()[0].opened_at, T0() - 1h);  // the older opening wins
  EXPECT_EQ(Ids(incidents.Touched()), (std::vector<int64_t>{12, 10, 21}));

  auto later = incidents.Update(std::vector{hot, leak, stale}, T0() + 15s);
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0].incident.incident_id, 23);
}

TEST(IncidentTracker, SeveralFindingsWithOneKeyAreOneIncidentAtTheWorstSeverity) {
  IncidentTracker incidents;
  incidents.Adopt({}, 0, T0());
  Finding warning = MakeFinding("xid_recent", 0);
  Finding critical = warning;
  critical.severity = Severity::kCritical;
  auto opened = incidents.Update(std::vector{warning, critical}, T0());
  ASSERT_EQ(opened.size(), 1u);
  EXPECT_EQ(opened[0].incident.finding.severity, Severity::kCritical);
}

// ---- Acknowledgements (gpudoctor ack) -------------------------------------------

TEST(IncidentTrackerAck, AnAcknowledgedIncidentResolvesAndStaysQuietWhileItsFindingStaysAsItWas) {
  IncidentTracker incidents;
  incidents.Adopt({}, 0, T0());
  Finding xid = MakeFinding("xid_recent", 3, Severity::kCritical);
  xid.newest_event_at = T0() - 1min;
  incidents.Update(std::vector{xid}, T0());
  const int64_t id = incidents.open().at(0).incident_id;

  auto acked = incidents.Acknowledge(id, T0() + 10s);
  ASSERT_EQ(Kinds(acked), std::vector{Kind::kAcknowledged});
  EXPECT_EQ(acked[0].incident.resolved_at, T0() + 10s);
  EXPECT_TRUE(incidents.open().empty());
  EXPECT_EQ(incidents.Touched().size(), 1u);  // the store records the resolution
  // The same Xid, still in the rule's window: nothing new.
  for (int cycle = 1; cycle <= 3; ++cycle) EXPECT_TRUE(incidents.Update(std::vector{xid}, T0() + cycle * 5s).empty());
  EXPECT_TRUE(incidents.open().empty());

  // A newer Xid is the fault returning: a new incident.
  xid.newest_event_at = T0() + 1min;
  auto back = incidents.Update(std::vector{xid}, T0() + 2min);
  ASSERT_EQ(Kinds(back), std::vector{Kind::kOpened});
  EXPECT_GT(back[0].incident.incident_id, id);
}

TEST(IncidentTrackerAck, AStateFindingOpensAgainWhenItGetsWorseOrReturnsAfterClearing) {
  IncidentTracker incidents;
  incidents.Adopt({}, 0, T0());
  Finding hot = MakeFinding("temperature_high", 0, Severity::kWarning);
  incidents.Update(std::vector{hot}, T0());
  incidents.Acknowledge(incidents.open().at(0).incident_id, T0() + 1s);
  EXPECT_TRUE(incidents.Update(std::vector{hot}, T0() + 5s).empty());

  Finding hotter = hot;
  hotter.severity = Severity::kCritical;
  EXPECT_EQ(Kinds(incidents.Update(std::vector{hotter}, T0() + 10s)), std::vector{Kind::kOpened});

  incidents.Acknowledge(incidents.open().at(0).incident_id, T0() + 11s);
  EXPECT_TRUE(incidents.Update(std::vector{hotter}, T0() + 15s).empty());
  EXPECT_TRUE(incidents.Update(std::vector<Finding>{}, T0() + 20s).empty());  // cleared: the ack is spent
  EXPECT_EQ(Kinds(incidents.Update(std::vector{hotter}, T0() + 25s)), std::vector{Kind::kOpened});
}

TEST(IncidentTrackerAck, AcknowledgingARootResolvesTheFindingsThatArePartOfIt) {
  IncidentTracker incidents;
  incidents.Adopt({}, 0, T0());
  Finding root = MakeFinding("facility_cooling", std::nullopt, Severity::kCritical);
  std::vector<Finding> findings{root};
  for (uint32_t gpu = 0; gpu < 3; ++gpu) {
    Finding member = MakeFinding("temperature_high", gpu, Severity::kCritical);
    member.part_of = "facility_cooling";
    findings.push_back(member);
  }
  Finding other = MakeFinding("disk_space", std::nullopt);
  findings.push_back(other);
  incidents.Update(findings, T0());
  const int64_t root_id = incidents.open().at(0).incident_id;

  auto acked = incidents.Acknowledge(root_id, T0() + 1s);
  EXPECT_EQ(acked.size(), 4u);
  ASSERT_EQ(incidents.open().size(), 1u);
  EXPECT_EQ(incidents.open()[0].finding.id, "disk_space");
  EXPECT_TRUE(incidents.Update(findings, T0() + 5s).empty());
}

TEST(IncidentTrackerAck, AnIdThatIsNotOpenChangesNothing) {
  IncidentTracker incidents;
  incidents.Adopt({}, 0, T0());
  incidents.Update(std::vector{MakeFinding("disk_space", std::nullopt)}, T0());
  EXPECT_TRUE(incidents.Acknowledge(99, T0()).empty());
  EXPECT_EQ(incidents.open().size(), 1u);
}

TEST(IncidentTrackerAck, ARestoredAcknowledgementKeepsTheFindingQuietAfterARestart) {
  IncidentTracker incidents;
  incidents.Adopt({}, 5, T0());
  Finding xid = MakeFinding("xid_recent", 1, Severity::kCritical);
  xid.newest_event_at = T0() - 1h;
  incidents.RestoreAcknowledgement(FindingKey(xid), Severity::kCritical, T0() - 30min);
  EXPECT_TRUE(incidents.Update(std::vector{xid}, T0()).empty());
}

}  // namespace
}  // namespace gpudoctor
