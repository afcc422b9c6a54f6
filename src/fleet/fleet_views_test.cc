#include "fleet/fleet_views.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fleet/fleet_json.h"
#include "fleet/fleet_reader.h"
#include "health/checklist.h"
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

// The position of the checklist item titled `title`.
size_t Item(const FleetChecklist& checklist, const std::string& title) {
  auto found = std::find(checklist.titles.begin(), checklist.titles.end(), title);
  EXPECT_NE(found, checklist.titles.end()) << title;
  return found - checklist.titles.begin();
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
  // The Xid is on "No GPU errors in the system log"; gpu_lost, part of it, is on its own item as `check` has it.
  EXPECT_EQ(b.items[Item(checklist, "No GPU errors in the system log")].severity, "critical");
  EXPECT_EQ(b.items[Item(checklist, "No GPU errors in the system log")].summary, "xid_recent gpu 0");
  EXPECT_EQ(b.items[Item(checklist, "nvidia-smi answering")].summary, "gpu_lost gpu 0");
  ASSERT_EQ(b.other.size(), 1u);
  EXPECT_EQ(b.other[0].id, "some_new_rule");
  // These agents export no checklist: what has no finding is not known, never passed.
  const FleetChecklistCell& fans = b.items[Item(checklist, "Fans turning")];
  EXPECT_EQ(fans.checked, std::nullopt);
  EXPECT_EQ(fans.severity, "unknown");
  EXPECT_THAT(fans.summary, ::testing::StartsWith("not known"));
  EXPECT_EQ(b.items[Item(checklist, "No GPU errors in the system log")].checked, true);
  EXPECT_EQ(checklist.hosts_not_answering, 2u);
  EXPECT_EQ(FleetExitStatus(checklist), 2);
}

// Every item of the default checklist in `state`, but the one titled `title` in `other_state` with `reason`.
std::vector<FleetChecklistState> AgentChecklist(const std::string& title = "", const std::string& other_state = "",
                                                const std::string& reason = "") {
  std::vector<FleetChecklistState> states;
  for (const ChecklistEntry& entry : DefaultHealthConfig().checklist) {
    states.push_back({.title = entry.title, .state = entry.title == title ? other_state : "ok",
                      .reason = entry.title == title ? reason : ""});
  }
  return states;
}

TEST_F(FleetViews, AnItemTheAgentDidNotCheckIsNeverPassed) {
  FleetState state;
  state.hosts.push_back({.instance = "a:9847", .hostname = "host-a",
                         .checklist = AgentChecklist("Fans turning", "unchecked", "the GPUs are passively cooled")});
  const std::vector<ChecklistEntry>& entries = DefaultHealthConfig().checklist;
  FleetChecklist checklist = BuildFleetChecklist(state, entries);
  const FleetChecklistRow& a = checklist.rows[0];
  EXPECT_EQ(a.worst, "ok");
  const FleetChecklistCell& fans = a.items[Item(checklist, "Fans turning")];
  EXPECT_EQ(fans.checked, false);
  EXPECT_EQ(fans.severity, "ok");  // as `check --json` has it: severity ok, checked false
  EXPECT_EQ(fans.summary, "not checked: the GPUs are passively cooled");
  const FleetChecklistCell& temperature = a.items[Item(checklist, "GPUs below their temperature limits")];
  EXPECT_EQ(temperature.checked, true);
  EXPECT_EQ(temperature.severity, "ok");
  EXPECT_EQ(temperature.summary, "");

  nlohmann::json json = FleetChecklistJson(checklist);
  const nlohmann::json& items = json["hosts"][0]["items"];
  EXPECT_EQ(items[Item(checklist, "Fans turning")]["checked"], false);
  EXPECT_EQ(items[Item(checklist, "GPUs below their temperature limits")]["checked"], true);

  // An item its agent exports nothing for, and an agent that exports no checklist: not known.
  state.hosts[0].checklist->erase(state.hosts[0].checklist->begin());
  EXPECT_EQ(BuildFleetChecklist(state, entries).rows[0].items[0].checked, std::nullopt);
  state.hosts[0].checklist.reset();
  checklist = BuildFleetChecklist(state, entries);
  for (const FleetChecklistCell& cell : checklist.rows[0].items) EXPECT_EQ(cell.checked, std::nullopt);
  EXPECT_TRUE(FleetChecklistJson(checklist)["hosts"][0]["items"][0]["checked"].is_null());
}

TEST_F(FleetViews, AFindingOnNoItemMakesTheHostAsBadAsCheckSays) {
  FleetState state;
  state.hosts.push_back({.instance = "a:9847", .hostname = "host-a",
                         .findings = {{.id = "memory_high", .severity = "warning", .gpu = "2"}},
                         .checklist = AgentChecklist()});
  FleetChecklist checklist = BuildFleetChecklist(state, DefaultHealthConfig().checklist);
  const FleetChecklistRow& a = checklist.rows[0];
  EXPECT_EQ(a.worst, "warning");
  ASSERT_EQ(a.other.size(), 1u);
  EXPECT_EQ(a.other[0].id, "memory_high");
  for (const FleetChecklistCell& cell : a.items) EXPECT_TRUE(cell.findings.empty());
  EXPECT_EQ(checklist.hosts_warning, 1u);
  EXPECT_EQ(FleetExitStatus(checklist), 1);
}

TEST_F(FleetViews, FindingsFallOnTheItemsCheckPutsThemOn) {
  FleetState state;
  state.hosts.push_back({.instance = "a:9847", .hostname = "host-a",
                         .findings = {{.id = "nvlink_fabric", .severity = "critical", .gpu = "1"},
                                      {.id = "xid_recent", .severity = "warning", .gpu = "1", .subject = "74"},
                                      {.id = "temperature_high", .severity = "warning", .gpu = "1",
                                       .part_of = "facility_cooling"},
                                      {.id = "facility_cooling", .severity = "critical"}},
                         .checklist = AgentChecklist()});
  const std::vector<ChecklistEntry>& entries = DefaultHealthConfig().checklist;
  FleetChecklist checklist = BuildFleetChecklist(state, entries);
  const FleetChecklistRow& a = checklist.rows[0];

  // The host's own checklist over the same findings.
  std::vector<Finding> findings;
  for (const FleetFinding& f : state.hosts[0].findings) {
    findings.push_back({.id = f.id, .severity = *SeverityFromName(f.severity)});
  }
  Checklist on_host = BuildChecklist(findings, entries);
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(a.items[i].severity, on_host.items[i].checked ? SeverityName(on_host.items[i].severity) : "ok")
        << entries[i].title;
    EXPECT_EQ(a.items[i].findings.size(), on_host.items[i].findings.size()) << entries[i].title;
  }
  const FleetChecklistCell& log = a.items[Item(checklist, "No GPU errors in the system log")];
  EXPECT_EQ(log.severity, "warning");
  EXPECT_EQ(log.summary, "xid_recent gpu 1 (74)");
  EXPECT_EQ(a.items[Item(checklist, "GPUs below their temperature limits")].summary, "temperature_high gpu 1");
  ASSERT_EQ(a.other.size(), 2u);  // temperature_high is told under facility_cooling
  EXPECT_EQ(a.other[0].id, "nvlink_fabric");
  EXPECT_EQ(a.other[1].id, "facility_cooling");
  EXPECT_EQ(a.worst, "critical");
}

TEST_F(FleetViews, ASiteItemForTheNvLinkFabricIsAColumnAsOnTheHost) {
  std::vector<ChecklistEntry> entries = DefaultHealthConfig().checklist;
  entries.push_back({.title = "NVLink fabric registered", .rule_ids = {"nvlink_fabric"}});
  FleetState state;
  std::vector<FleetChecklistState> agent = AgentChecklist();
  agent.push_back({.title = "NVLink fabric registered", .state = "critical"});
  state.hosts.push_back({.instance = "a:9847", .hostname = "host-a",
                         .findings = {{.id = "nvlink_fabric", .severity = "critical", .gpu = "1"}},
                         .checklist = agent});
  agent.back() = {.title = "NVLink fabric registered", .state = "unchecked", .reason = "no NVSwitch"};
  state.hosts.push_back({.instance = "b:9847", .hostname = "host-b", .checklist = agent});
  FleetChecklist checklist = BuildFleetChecklist(state, entries);
  ASSERT_EQ(checklist.titles.back(), "NVLink fabric registered");
  const FleetChecklistCell& a = checklist.rows[0].items.back();
  EXPECT_EQ(checklist.rows[0].hostname, "host-a");
  EXPECT_EQ(a.checked, true);
  EXPECT_EQ(a.severity, "critical");
  EXPECT_EQ(a.summary, "nvlink_fabric gpu 1");
  EXPECT_TRUE(checklist.rows[0].other.empty());
  const Checklist on_host = BuildChecklist({{.id = "nvlink_fabric", .severity = Severity::kCritical}}, entries);
  ASSERT_EQ(on_host.items.back().findings.size(), 1u);
  EXPECT_TRUE(on_host.other_findings.empty());
  const FleetChecklistCell& b = checklist.rows[1].items.back();
  EXPECT_EQ(b.checked, false);
  EXPECT_EQ(b.summary, "not checked: no NVSwitch");
}

TEST_F(FleetViews, ReadsTheAgentsChecklist) {
  api_.samples.push_back(S({{"__name__", "gpudoctor_checklist_item"}, {"instance", "a:9847"}, {"item", "Fans turning"},
                            {"state", "unchecked"}, {"reason", "no fans"}},
                           1));
  Result<FleetState> state = ReadFleetFromPrometheus(api_, {.at = kNow});
  ASSERT_TRUE(state.ok());
  EXPECT_THAT(api_.asked[1], ::testing::HasSubstr("checklist_item"));
  ASSERT_TRUE(state->hosts[0].checklist);
  EXPECT_EQ(*state->hosts[0].checklist,
            (std::vector<FleetChecklistState>{{.title = "Fans turning", .state = "unchecked", .reason = "no fans"}}));
  EXPECT_FALSE(state->hosts[1].checklist);  // an agent that exports none
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
