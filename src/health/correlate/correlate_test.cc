// The correlation step over what the real rules report: one story per incident.
#include "health/correlate/correlate.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>

#include "common/text.h"
#include "health/catalog_event_grader.h"
#include "health/health_test_support.h"
#include "logs/catalog.h"
#include "logs/event_collector.h"

namespace gpudoctor {
namespace {

using namespace testing_support;
using std::chrono::seconds;

// A server whose rules and correlation run as `check` runs them.
struct Server {
  explicit Server(uint32_t gpus) : snapshot(HealthySnapshot(gpus)), host(HealthyHost(gpus)) {}

  void Overheat(uint32_t gpu, uint32_t temperature_c = 92) {
    snapshot.gpus[gpu].temperature_c = Field<uint32_t>::Value(temperature_c);
    snapshot.gpus[gpu].clock_event_reasons =
        Field<uint64_t>::Value(clock_event::kHwThermalSlowdown | clock_event::kSwThermalSlowdown);
  }
  void SetInlet(double celsius) {
    for (Sensor& sensor : host.ipmi_sensors.value())
      if (sensor.name == "Inlet Temp") sensor.value = celsius;
  }
  std::string Bus(uint32_t gpu) const { return snapshot.gpus[gpu].pci_bus_id.value(); }
  void Xid(uint32_t gpu, uint32_t code, WallTime at, std::string_view tail = "") {
    LogEvent event = XidLogEvent(code, Bus(gpu), EventSeverity::kCritical, at);
    event.raw += std::string(tail);
    event.message = event.raw;
    event.line_number = events.size() + 1;
    events.push_back(std::move(event));
  }

  std::vector<Finding> Judge(const HealthConfig& config = DefaultHealthConfig()) const {
    HealthInput input;
    input.snapshot = &snapshot;
    input.host = &host;
    input.log_events = &events;
    input.event_grader = &grader;
    input.now = kNow;
    return Correlate(EvaluateRules(input, config), input, config);
  }

  Snapshot snapshot;
  HostSignals host;
  std::vector<LogEvent> events;
  CatalogEventGrader grader{LogCatalog::Builtin()};
};

const Finding* Find(const std::vector<Finding>& findings, std::string_view id, std::string_view subject = "",
                    std::optional<uint32_t> gpu = std::nullopt) {
  for (const Finding& finding : findings) {
    if (finding.id != id || (!subject.empty() && finding.subject != subject)) continue;
    if (gpu && (!finding.gpu || finding.gpu->index != gpu)) continue;
    return &finding;
  }
  return nullptr;
}
// A pointer into a temporary would dangle: keep the findings, or ask Has().
const Finding* Find(std::vector<Finding>&& findings, std::string_view id, std::string_view subject = "",
                    std::optional<uint32_t> gpu = std::nullopt) = delete;
bool Has(const std::vector<Finding>& findings, std::string_view id) { return Find(findings, id) != nullptr; }

std::vector<const Finding*> PartOf(const std::vector<Finding>& findings, std::string_view root_key) {
  std::vector<const Finding*> members;
  for (const Finding& finding : findings)
    if (finding.part_of == root_key) members.push_back(&finding);
  return members;
}

// ---- shared_cause: the room's cooling ---------------------------------------

TEST(FacilityCooling, AllGpusHotAtOnceAreOneFacilityFindingWithThePerGpuFindingsAsItsEvidence) {
  Server server(8);
  for (uint32_t gpu = 0; gpu < 8; ++gpu) server.Overheat(gpu);
  std::vector<Finding> findings = server.Judge();

  const Finding* root = Find(findings, "facility_cooling");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->severity, Severity::kCritical);
  EXPECT_FALSE(root->gpu.has_value());
  EXPECT_TRUE(root->part_of.empty());
  EXPECT_NE(root->summary.find("8 of 8 GPUs"), std::string::npos) << root->summary;
  EXPECT_NE(root->cause.find("air conditioning"), std::string::npos);
  // 8 temperature_high and 8 clock_throttle, each part of the root and listed in its evidence.
  std::vector<const Finding*> members = PartOf(findings, "facility_cooling");
  EXPECT_EQ(members.size(), 16u);
  for (const Finding* member : members) {
    EXPECT_TRUE(member->id == "temperature_high" || member->id == "clock_throttle") << member->id;
    EXPECT_TRUE(RootIndex(findings).ToldUnderRoot(*member));
    const std::string line = member->id + " critical: " + member->summary;
    EXPECT_NE(std::find(root->evidence.begin(), root->evidence.end(), line), root->evidence.end()) << line;
  }
  EXPECT_FALSE(RootIndex(findings).ToldUnderRoot(*root));
}

TEST(FacilityCooling, HalfTheGpusHotIsEnoughButAFewAreTheirOwnProblem) {
  Server half(8);
  for (uint32_t gpu = 0; gpu < 4; ++gpu) half.Overheat(gpu);
  EXPECT_TRUE(Has(half.Judge(), "facility_cooling"));

  Server few(8);
  for (uint32_t gpu = 0; gpu < 3; ++gpu) few.Overheat(gpu);
  std::vector<Finding> findings = few.Judge();
  EXPECT_EQ(Find(findings, "facility_cooling"), nullptr);
  for (const Finding& finding : findings) EXPECT_TRUE(finding.part_of.empty()) << finding.id;
}

// A card whose own fan stopped is hot because of its fan: it is no evidence
// against the room, however many of its neighbours are warm.
TEST(FacilityCooling, AGpuWhoseOwnFanStoppedIsNoEvidenceAgainstTheRoom) {
  Server server(4);
  server.Overheat(0);
  server.Overheat(1);
  EXPECT_TRUE(Has(server.Judge(), "facility_cooling"));
  server.snapshot.gpus[1].fan_speeds_percent = Field<std::vector<uint32_t>>::Value({0});
  std::vector<Finding> findings = server.Judge();
  ASSERT_NE(Find(findings, "fan_failure"), nullptr);
  EXPECT_EQ(Find(findings, "facility_cooling"), nullptr);
  for (const Finding& finding : findings) EXPECT_TRUE(finding.part_of.empty()) << finding.id;
}

TEST(FacilityCooling, AnInletOutOfRangeMakesEvenOneHotGpuTheFacilitysAndJoinsIt) {
  Server server(8);
  server.Overheat(5);
  server.SetInlet(31);
  std::vector<Finding> findings = server.Judge();
  const Finding* root = Find(findings, "facility_cooling");
  ASSERT_NE(root, nullptr);
  EXPECT_NE(root->summary.find("1 of 8 GPUs"), std::string::npos) << root->summary;
  EXPECT_NE(root->summary.find("Inlet air at 31"), std::string::npos) << root->summary;
  const Finding* inlet = Find(findings, "inlet_temperature");
  ASSERT_NE(inlet, nullptr);
  EXPECT_EQ(inlet->part_of, "facility_cooling");
}

TEST(FacilityCooling, AnInletOutOfRangeAloneStandsAlone) {
  Server server(8);
  server.SetInlet(31);
  std::vector<Finding> findings = server.Judge();
  EXPECT_EQ(Find(findings, "facility_cooling"), nullptr);
  const Finding* inlet = Find(findings, "inlet_temperature");
  ASSERT_NE(inlet, nullptr);
  EXPECT_EQ(inlet->severity, Severity::kWarning);
  EXPECT_TRUE(inlet->part_of.empty());
}

TEST(FacilityCooling, ThrottlingByThePowerBrakeOnACoolGpuIsNotACoolingProblem) {
  Server server(4);
  for (uint32_t gpu = 0; gpu < 4; ++gpu)
    server.snapshot.gpus[gpu].clock_event_reasons = Field<uint64_t>::Value(clock_event::kHwPowerBrakeSlowdown);
  std::vector<Finding> findings = server.Judge();
  EXPECT_EQ(Find(findings, "facility_cooling"), nullptr);
  EXPECT_EQ(WithId(Problems(findings), "clock_throttle").size(), 4u);
}

TEST(FacilityCooling, ASiteCanRequireMoreGpusOrTurnItOff) {
  Server server(8);
  for (uint32_t gpu = 0; gpu < 4; ++gpu) server.Overheat(gpu);
  EXPECT_FALSE(Has(server.Judge(ConfigWith("[correlations.facility_cooling]\nmin_share = 0.75\n")), "facility_cooling"));
  for (uint32_t gpu = 0; gpu < 8; ++gpu) server.Overheat(gpu);
  EXPECT_FALSE(Has(server.Judge(ConfigWith("[correlations.facility_cooling]\nenabled = false\n")), "facility_cooling"));
}

// ---- event_burst: Xids on many GPUs at one moment ------------------------------

TEST(XidBurst, Xid79OnFourGpusWithinSecondsLeadsWithOneSharedCause) {
  Server server(8);
  for (uint32_t gpu = 0; gpu < 4; ++gpu) server.Xid(gpu, 79, kNow - std::chrono::minutes(10) + seconds(gpu));
  std::vector<Finding> findings = server.Judge();
  const Finding* root = Find(findings, "xid_burst");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->severity, Severity::kCritical);
  EXPECT_NE(root->summary.find("Xid 79 on 4 GPUs within 3s"), std::string::npos) << root->summary;
  EXPECT_NE(root->evidence.front().find("Xid 79 on GPU 0, GPU 1, GPU 2 and GPU 3"), std::string::npos)
      << root->evidence.front();
  EXPECT_EQ(root->newest_event_at, kNow - std::chrono::minutes(10) + seconds(3));
  const std::string key = FindingKey(*root);
  for (uint32_t gpu = 0; gpu < 4; ++gpu) {
    const Finding* xid = Find(findings, "xid_recent", "79", gpu);
    ASSERT_NE(xid, nullptr);
    EXPECT_EQ(xid->part_of, key);
  }
  EXPECT_NE(root->cause.find("something they share"), std::string::npos);
}

// A storm held as a few events and a count (logs/event_collector.h) tells the
// same story as every line of it.
TEST(XidBurst, AFoldedStormIsJudgedAsEveryLineOfIt) {
  Server server(8);
  const WallTime start = kNow - std::chrono::minutes(30);
  for (int i = 0; i < 20'000; ++i) server.Xid(0, 79, start + std::chrono::milliseconds(50 * i));  // 1000 s of it
  for (uint32_t gpu = 1; gpu < 4; ++gpu) server.Xid(gpu, 79, start + seconds(500) + seconds(gpu));  // in its middle
  const std::vector<Finding> every_line = server.Judge();

  EventCollector collector;
  for (LogEvent& event : server.events) collector.Add(std::move(event));
  server.events = collector.Take();
  ASSERT_LT(server.events.size(), 10u);
  const std::vector<Finding> folded = server.Judge();

  for (const std::vector<Finding>* findings : {&every_line, &folded}) {
    const Finding* root = Find(*findings, "xid_burst");
    ASSERT_NE(root, nullptr);
    EXPECT_NE(root->summary.find("Xid 79 on 3 GPUs within 10s"), std::string::npos) << root->summary;
    const Finding* storm = Find(*findings, "xid_recent", "79", 0);
    ASSERT_NE(storm, nullptr);
    EXPECT_NE(storm->summary.find("(20000 times)"), std::string::npos) << storm->summary;
    EXPECT_TRUE(EvidenceHas(*storm, "first at " + FormatIsoUtc(start))) << fmt::format("{}", fmt::join(storm->evidence, "\n"));
  }
}

TEST(XidBurst, TheSameXidOnSeveralGpusHoursApartIsNoBurst) {
  Server server(8);
  for (uint32_t gpu = 0; gpu < 4; ++gpu) server.Xid(gpu, 79, kNow - std::chrono::hours(1 + gpu));
  std::vector<Finding> findings = server.Judge();
  EXPECT_EQ(Find(findings, "xid_burst"), nullptr);
  EXPECT_EQ(WithId(findings, "xid_recent").size(), 4u);
}

TEST(XidBurst, TwoGpusAreNotManyByDefault) {
  Server server(8);
  server.Xid(0, 79, kNow - seconds(30));
  server.Xid(1, 79, kNow - seconds(29));
  EXPECT_FALSE(Has(server.Judge(), "xid_burst"));
  EXPECT_TRUE(Has(server.Judge(ConfigWith("[correlations.xid_burst]\nmin_gpus = 2\n")), "xid_burst"));
}

TEST(XidBurst, AJobThatCrashedOnAllItsGpusIsToldAsTheApplication) {
  Server server(8);
  for (uint32_t gpu = 0; gpu < 8; ++gpu) server.Xid(gpu, 13, kNow - seconds(60) + std::chrono::milliseconds(200 * gpu));
  const std::vector<Finding> findings = server.Judge();
  const Finding* root = Find(findings, "xid_burst");
  ASSERT_NE(root, nullptr);
  EXPECT_NE(root->cause.find("one multi-GPU job crashed"), std::string::npos) << root->cause;
  // The test its actions name covers the GPUs of the burst.
  std::vector<uint32_t> members;
  for (const Finding* member : PartOf(findings, "xid_burst")) members.push_back(*member->gpu->index);
  std::sort(members.begin(), members.end());
  ASSERT_GE(members.size(), 2u);
  const std::string command = fmt::format("gpudoctor diag memtest --gpu {},", fmt::join(members, ","));
  EXPECT_TRUE(std::any_of(root->actions.begin(), root->actions.end(), [&](const std::string& action) {
    return action.find(command) != std::string::npos;
  })) << command << "\n" << fmt::format("{}", fmt::join(root->actions, "\n"));
}

TEST(XidBurst, NvmlEventsOfOneMomentFormABurstToo) {
  Server server(4);
  std::vector<XidEvent> nvml;
  for (uint32_t gpu = 0; gpu < 4; ++gpu) nvml.push_back({gpu, 79, kNow - seconds(5)});
  HealthInput input;
  input.snapshot = &server.snapshot;
  input.nvml_xid_events = &nvml;
  input.event_grader = &server.grader;
  input.now = kNow;
  std::vector<Finding> findings = Correlate(EvaluateRules(input, DefaultHealthConfig()), input, DefaultHealthConfig());
  const Finding* root = Find(findings, "xid_burst");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(PartOf(findings, "xid_burst").size(), 4u);
}

// ---- named_cause: "caused by previous Xid N" -----------------------------------

// As NVIDIA's drivers print it (open-gpu-kernel-modules issue #1150).
constexpr std::string_view kCausedBy149 = ", Ch 00000001 caused by previous Xid 149";

TEST(NamedCause, Xid45ThatNamesItsCauseIsPartOfThatXidOnTheSameGpu) {
  Server server(8);
  server.Xid(2, 149, kNow - seconds(20));
  for (int line = 0; line < 3; ++line) server.Xid(2, 45, kNow - seconds(19), kCausedBy149);
  std::vector<Finding> findings = server.Judge();
  const Finding* cause = Find(findings, "xid_recent", "149", 2);
  const Finding* follower = Find(findings, "xid_recent", "45", 2);
  ASSERT_NE(cause, nullptr);
  ASSERT_NE(follower, nullptr);
  EXPECT_EQ(follower->part_of, FindingKey(*cause));
  EXPECT_TRUE(cause->part_of.empty());
  EXPECT_NE(std::find(cause->evidence.begin(), cause->evidence.end(),
                      "led to Xid 45 on GPU 2 (3 lines): the driver says it was caused by this Xid"),
            cause->evidence.end());
  EXPECT_TRUE(RootIndex(findings).ToldUnderRoot(*follower));
}

TEST(NamedCause, TheCauseOnAnotherGpuDoesNotCount) {
  Server server(8);
  server.Xid(1, 149, kNow - seconds(20));
  server.Xid(2, 45, kNow - seconds(19), kCausedBy149);
  std::vector<Finding> findings = server.Judge();
  const Finding* follower = Find(findings, "xid_recent", "45", 2);
  ASSERT_NE(follower, nullptr);
  EXPECT_TRUE(follower->part_of.empty());
  // It still leads with the cause the driver names.
  ASSERT_FALSE(follower->actions.empty());
  EXPECT_NE(follower->actions.front().find("Act on Xid 149"), std::string::npos) << follower->actions.front();
  EXPECT_NE(follower->evidence.back().find("no Xid 149 of this GPU"), std::string::npos) << follower->evidence.back();
}

TEST(NamedCause, EveryWordingOfTheCauseIsRead) {
  for (std::string_view tail : {" caused by previous Xid 149", ", caused by previous Xid: 149",
                                " Caused By Previous XID 149"}) {
    Server server(2);
    server.Xid(0, 149, kNow - seconds(20));
    server.Xid(0, 45, kNow - seconds(19), tail);
    std::vector<Finding> findings = server.Judge();
    const Finding* follower = Find(findings, "xid_recent", "45", 0);
    ASSERT_NE(follower, nullptr) << tail;
    EXPECT_EQ(follower->part_of, FindingKey(*Find(findings, "xid_recent", "149", 0))) << tail;
  }
}

TEST(NamedCause, ABurstOfXidsWithTheirFollowersIsOneStoryWithTheBurstOnTop) {
  Server server(4);
  for (uint32_t gpu = 0; gpu < 4; ++gpu) {
    server.Xid(gpu, 149, kNow - seconds(20));
    server.Xid(gpu, 45, kNow - seconds(19), kCausedBy149);
  }
  std::vector<Finding> findings = server.Judge();
  const Finding* root = Find(findings, "xid_burst");
  ASSERT_NE(root, nullptr);
  // Members name the top of their story.
  EXPECT_EQ(PartOf(findings, FindingKey(*root)).size(), 8u);
}

// ---- configuration ----------------------------------------------------------

TEST(CorrelationConfig, TheDefaultsHoldEveryKindInTheOrderTheyRun) {
  const CorrelationConfig& config = DefaultHealthConfig().correlations;
  ASSERT_EQ(config.rules.size(), 5u);
  EXPECT_EQ(config.rules[0].kind, CorrelationKind::kNamedCause);
  EXPECT_EQ(config.rules[1].id, "gpu_lost_with_its_xids");
  EXPECT_TRUE(config.rules[1].any_subject);
  EXPECT_EQ(config.rules[2].id, "xid_escalated");
  EXPECT_EQ(config.rules[3].id, "xid_burst");
  EXPECT_EQ(config.rules[4].id, "facility_cooling");
  EXPECT_EQ(DefaultHealthConfig().Category("facility_cooling"), "thermal");
}

TEST(CorrelationConfig, ASiteCanAddASharedCause) {
  HealthConfig config = ConfigWith(R"(
    [correlations.facility_power]
    kind = "shared_cause"
    title = "Power feed"
    gpu_rules = ["power_capped"]
    symptom = "over their power limit at once"
    category = "power"
  )");
  ASSERT_NE(config.correlations.Find("facility_power"), nullptr);
  EXPECT_EQ(config.Category("facility_power"), "power");
}

TEST(CorrelationConfig, MistakesNameTheKey) {
  auto error_of = [](std::string_view toml) {
    auto config = ApplyHealthConfig(DefaultHealthConfig(), toml, "site.toml");
    return config.ok() ? std::string() : config.error().message;
  };
  EXPECT_EQ(error_of("[correlations.facility_cooling]\nmin_shares = 0.5\n"),
            "site.toml: correlations.facility_cooling.min_shares: unknown key");
  EXPECT_EQ(error_of("[correlations.facility_cooling]\nmin_share = 1.5\n"),
            "site.toml: correlations.facility_cooling.min_share: expected a share above 0 and at most 1");
  EXPECT_EQ(error_of("[correlations.rack]\ngpu_rules = [\"temperature_high\"]\n"),
            "site.toml: correlations.rack.kind: a new correlation needs its kind");
  EXPECT_EQ(error_of("[correlations.temperature_high]\nkind = \"shared_cause\"\n"),
            "site.toml: correlations.temperature_high: 'temperature_high' is the id of a rule, detector or "
            "escalation, not a correlation");
  EXPECT_EQ(error_of("[correlations.xid_named_cause]\ncause_regex = 'caused by Xid'\n"),
            "site.toml: correlations.xid_named_cause.cause_regex: needs a group around the Xid code");
  EXPECT_EQ(error_of("[escalation.xid.abc]\nafter_restarts = 1\n"),
            "site.toml: escalation.xid.abc: expected an Xid code, as in [escalation.xid.79]");
  EXPECT_EQ(error_of("[escalation]\nafter_restart = 1\n"), "site.toml: escalation.after_restart: unknown key");
}

TEST(EscalationConfig, PerXidThresholdsReplaceTheDefaults) {
  HealthConfig config = ConfigWith("[escalation.xid.79]\nafter_restarts = 1\n[escalation.xid.48]\nfatal_count = 0\n");
  const EscalationConfig& escalation = config.escalation;
  EXPECT_EQ(escalation.AfterRestarts(79, true), 1u);
  EXPECT_EQ(escalation.AfterRestarts(74, true), 2u);
  EXPECT_EQ(escalation.AfterRestarts(43, false), 0u);  // not fatal: off unless named
  EXPECT_EQ(escalation.FatalCount(48, true), 0u);
  EXPECT_EQ(escalation.FatalCount(79, true), 5u);
  EXPECT_EQ(escalation.DiagnoseCount(13), 3u);
  EXPECT_EQ(escalation.DiagnoseCount(79), 0u);
  EXPECT_FALSE(escalation.RemedyFor("xid_recurring").actions.empty());
}

}  // namespace
}  // namespace gpudoctor
