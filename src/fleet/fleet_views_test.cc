#include "fleet/fleet_views.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fleet/fleet_reader.h"
#include "health/health_config.h"

namespace gpudoctor {
namespace {

const WallTime kNow = WallTime{std::chrono::seconds(1'800'000'000)};

// Answers the reader's three instant queries from canned series.
class CannedPrometheus final : public PrometheusApi {
 public:
  std::vector<PromSeries> up, samples, known;
  std::vector<std::string> asked;
  Result<std::vector<PromSeries>> Query(std::string_view promql, WallTime) override {
    asked.emplace_back(promql);
    if (promql.starts_with("up{")) return up;
    if (promql.starts_with("last_over_time")) return known;
    return samples;
  }
  Result<std::vector<PromSeries>> QueryRange(std::string_view, WallTime, WallTime, Duration) override {
    return Error{"not used"};
  }
};

PromSeries S(std::map<std::string, std::string> labels, double value) {
  return PromSeries{.labels = std::move(labels), .points = {{kNow, value}}};
}

class FleetViews : public ::testing::Test {
 protected:
  void SetUp() override {
    api_.up = {S({{"instance", "a:9847"}}, 1), S({{"instance", "b:9847"}}, 1), S({{"instance", "c:9847"}}, 0),
               S({{"instance", "d:9847"}}, 1)};
    auto sample = [&](const std::string& instance, const std::string& name,
                      std::map<std::string, std::string> labels, double value) {
      labels["__name__"] = name;
      labels["instance"] = instance;
      api_.samples.push_back(S(std::move(labels), value));
    };
    for (const char* host : {"a", "b", "d"}) {
      const std::string instance = std::string(host) + ":9847";
      sample(instance, "gpudoctor_up", {{"hostname", std::string("host-") + host}}, host == std::string("d") ? 0 : 1);
      sample(instance, "gpudoctor_sample_age_seconds", {}, host == std::string("d") ? 300 : 1);
      sample(instance, "gpudoctor_gpu_info",
             {{"gpu", "0"}, {"serial", std::string("S-") + host}, {"pci_bus_id", "0000:17:00.0"}, {"slot", "3"}}, 1);
      sample(instance, "gpudoctor_gpu_accessible", {{"gpu", "0"}}, 1);
    }
    sample("a:9847", "gpudoctor_finding",
           {{"id", "temperature_high"}, {"severity", "warning"}, {"gpu", "0"}, {"part_of", ""}}, 1);
    sample("b:9847", "gpudoctor_finding", {{"id", "xid_recent"}, {"severity", "critical"}, {"gpu", "0"}}, 1);
    sample("b:9847", "gpudoctor_finding",
           {{"id", "gpu_lost"}, {"severity", "critical"}, {"gpu", "0"}, {"part_of", "xid_recent:0"}}, 1);
    sample("b:9847", "gpudoctor_finding", {{"id", "some_new_rule"}, {"severity", "warning"}}, 1);
    api_.known = {S({{"instance", "c:9847"}, {"hostname", "host-c"}, {"board_serial", "BRD-C"}}, 1)};
  }
  CannedPrometheus api_;
};

TEST_F(FleetViews, ReadsEveryTargetOfTheJob) {
  Result<FleetState> state = ReadFleetFromPrometheus(api_, {.job = "gpu\"doctor", .at = kNow});
  ASSERT_TRUE(state.ok()) << state.error().message;
  EXPECT_EQ(api_.asked[0], "up{job=\"gpu\\\"doctor\"}");  // the job is quoted, not pasted
  ASSERT_EQ(state->hosts.size(), 4u);
  const FleetHost& c = state->hosts[2];
  EXPECT_EQ(c.hostname, "host-c");  // remembered from its last samples
  EXPECT_EQ(c.board_serial, "BRD-C");
  EXPECT_FALSE(c.answering);
  EXPECT_THAT(c.trouble, ::testing::HasSubstr("up == 0"));
  const FleetHost& d = state->hosts[3];
  EXPECT_FALSE(d.answering);
  EXPECT_EQ(d.trouble, "sampling stalled: the latest GPU sample is 5m 0s old");
  ASSERT_EQ(state->hosts[0].gpus.size(), 1u);
  EXPECT_EQ(state->hosts[0].gpus[0].serial, "S-a");
  EXPECT_EQ(state->hosts[0].gpus[0].slot, "3");
  EXPECT_EQ(state->hosts[0].gpus[0].accessible, true);
}

TEST_F(FleetViews, ChecklistPutsSilentHostsFirstThenTheWorst) {
  Result<FleetState> state = ReadFleetFromPrometheus(api_, {.at = kNow});
  ASSERT_TRUE(state.ok());
  FleetChecklist checklist = BuildFleetChecklist(*state, DefaultHealthConfig().checklist);
  ASSERT_EQ(checklist.rows.size(), 4u);
  EXPECT_EQ(checklist.rows[0].hostname, "host-c");
  EXPECT_EQ(checklist.rows[1].hostname, "host-d");
  EXPECT_EQ(checklist.rows[2].hostname, "host-b");
  EXPECT_EQ(checklist.rows[3].hostname, "host-a");
  EXPECT_EQ(checklist.rows[0].items[0].severity, "unknown");
  const FleetChecklistRow& b = checklist.rows[2];
  EXPECT_EQ(b.worst, "critical");
  // The Xid is on "No GPU errors in the system log"; gpu_lost is part of it and not told twice.
  size_t log_item = 0;
  while (checklist.titles[log_item] != "No GPU errors in the system log") ++log_item;
  EXPECT_EQ(b.items[log_item].severity, "critical");
  EXPECT_EQ(b.items[log_item].summary, "xid_recent gpu 0");
  for (const FleetChecklistCell& cell : b.items) EXPECT_THAT(cell.summary, ::testing::Not(::testing::HasSubstr("gpu_lost")));
  ASSERT_EQ(b.other.size(), 1u);
  EXPECT_EQ(b.other[0].id, "some_new_rule");
  EXPECT_EQ(checklist.hosts_not_answering, 2u);
  EXPECT_EQ(FleetExitStatus(checklist), 2);
}

TEST_F(FleetViews, ExitStatusIsLikeCheck) {
  FleetChecklist checklist;
  EXPECT_EQ(FleetExitStatus(checklist), 0);
  checklist.hosts_warning = 1;
  EXPECT_EQ(FleetExitStatus(checklist), 1);
  checklist.hosts_critical = 1;
  EXPECT_EQ(FleetExitStatus(checklist), 2);
}

TEST_F(FleetViews, OffendersRankByOpenFindingsThenErrors) {
  Result<FleetState> state = ReadFleetFromPrometheus(api_, {.at = kNow});
  ASSERT_TRUE(state.ok());
  FleetHistory history{.start = kNow - std::chrono::hours(2), .end = kNow, .step = std::chrono::minutes(1)};
  SlotKey a{.hostname = "host-a", .pci_bus_id = "0000:17:00.0"};
  SlotKey gone{.hostname = "host-z", .pci_bus_id = "0000:3b:00.0"};
  history.placements = {{.serial = "S-z", .slot = gone, .from = kNow - std::chrono::hours(2), .to = kNow - std::chrono::hours(1)}};
  history.episodes = {{.slot = a, .time = kNow - std::chrono::minutes(30), .kind = ErrorKind::kXid, .count = 4},
                      {.slot = gone, .time = kNow - std::chrono::minutes(90), .kind = ErrorKind::kUncorrectableEcc, .count = 2}};
  std::vector<Verdict> verdicts = AttributeErrors(history.placements, history.episodes, kNow);
  Offenders offenders = RankOffenders(*state, &history, verdicts, 10);
  ASSERT_EQ(offenders.gpus.size(), 3u);
  EXPECT_EQ(offenders.gpus[0].hostname, "host-b");  // an open critical finding
  EXPECT_EQ(offenders.gpus[1].hostname, "host-z");  // uncorrectable ECC outranks Xids
  EXPECT_EQ(offenders.gpus[1].serial, "S-z");
  EXPECT_EQ(offenders.gpus[2].errors.xid, 4);
  ASSERT_TRUE(offenders.gpus[1].verdict);
  EXPECT_EQ(offenders.gpus[1].verdict->serial, "S-z");
  EXPECT_EQ(offenders.hosts[0].hostname, "host-c");  // not answering
  EXPECT_EQ(RankOffenders(*state, &history, verdicts, 1).gpus.size(), 1u);
  EXPECT_FALSE(RankOffenders(*state, nullptr, {}, 10).with_history);
}

TEST_F(FleetViews, ACardsHistoryListsItsStaysWithTheirErrors) {
  FleetHistory history{.step = std::chrono::minutes(1)};
  SlotKey one{.hostname = "host-1", .pci_bus_id = "0000:17:00.0"};
  SlotKey two{.hostname = "host-2", .pci_bus_id = "0000:17:00.0"};
  history.placements = {{.serial = "A", .slot = two, .from = kNow - std::chrono::hours(1), .to = kNow},
                        {.serial = "A", .slot = one, .from = kNow - std::chrono::hours(3), .to = kNow - std::chrono::hours(2)},
                        {.serial = "B", .slot = one, .from = kNow - std::chrono::hours(1), .to = kNow}};
  history.episodes = {{.slot = one, .time = kNow - std::chrono::minutes(150), .kind = ErrorKind::kXid, .count = 2},
                      {.slot = one, .time = kNow - std::chrono::minutes(10), .kind = ErrorKind::kXid, .count = 1}};
  std::vector<Verdict> verdicts = AttributeErrors(history.placements, history.episodes, kNow);
  CardHistory card = HistoryOfCard("A", history, verdicts);
  ASSERT_EQ(card.stays.size(), 2u);
  EXPECT_EQ(card.stays[0].placement.slot, one);
  EXPECT_EQ(card.stays[0].errors.xid, 2);  // B's later Xid in the same slot is not A's
  EXPECT_EQ(card.stays[1].errors.xid, 0);
  ASSERT_EQ(card.verdicts.size(), 1u);
  EXPECT_EQ(card.verdicts[0].blame, Blame::kSlot);
}

}  // namespace
}  // namespace gpudoctor
