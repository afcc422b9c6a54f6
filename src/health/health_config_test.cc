#include "health/health_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "health/rule_ids.h"
#include "logs/catalog.h"

namespace gpudoctor {
namespace {

using std::chrono::hours;

std::string ReadRepoFile(const std::string& relative) {
  std::ifstream in(std::string(GPUDOCTOR_SOURCE_DIR) + "/" + relative, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(DefaultHealthConfig, HasTheDocumentedDefaults) {
  const HealthConfig& config = DefaultHealthConfig();
  const RuleThresholds& t = config.thresholds;
  EXPECT_EQ(t.temperature_high.warning_c, 75);
  EXPECT_EQ(t.temperature_high.critical_c, 80);
  EXPECT_EQ(t.memory_high.warning_percent, 90);
  EXPECT_EQ(t.inlet_temperature.min_c, 16);
  EXPECT_EQ(t.inlet_temperature.max_c, 25);
  EXPECT_EQ(t.disk_space.warning_free_percent, 10);
  EXPECT_EQ(t.ecc_uncorrectable.volatile_count, 1u);
  EXPECT_EQ(t.retired_pages.critical_count, 60u);
  EXPECT_EQ(t.pcie_replay.warning_per_minute, 8);
  EXPECT_EQ(t.xid_recent.window, hours(24));
  EXPECT_EQ(t.backup_stale.max_age, hours(24));
  EXPECT_EQ(t.process_missing.severity, Severity::kCritical);
  EXPECT_EQ(config.host.disk_paths, std::vector<std::string>{"/"});
  EXPECT_TRUE(config.host.ipmi);
  EXPECT_EQ(config.host.command_timeout, std::chrono::seconds(20));
  EXPECT_EQ(config.checklist.size(), 9u);
  EXPECT_EQ(config.checklist[0].title, "GPUs below their temperature limits");
}

TEST(DefaultHealthConfig, EveryRuleHasCategoryCauseAndActions) {
  const HealthConfig& config = DefaultHealthConfig();
  const std::set<std::string> categories{"thermal", "power",       "pcie", "memory",
                                         "driver",  "application", "host", "unknown"};
  for (std::string_view id : kRuleIds) {
    SCOPED_TRACE(std::string(id));
    ASSERT_TRUE(config.rules.count(id));
    EXPECT_TRUE(config.Enabled(id));
    EXPECT_TRUE(categories.count(std::string(config.Category(id))));
    EXPECT_FALSE(config.RemedyFor(id).cause.empty());
    EXPECT_FALSE(config.RemedyFor(id).actions.empty());
  }
  for (const RuleCase& c : kRuleCases) {
    SCOPED_TRACE(std::string(c.rule_id) + "." + std::string(c.case_name));
    const Remedy& remedy = config.RemedyFor(c.rule_id, c.case_name);
    EXPECT_NE(&remedy, &config.RemedyFor(c.rule_id)) << "case has no text of its own";
    EXPECT_FALSE(remedy.cause.empty());
    EXPECT_FALSE(remedy.actions.empty());
  }
}

TEST(DefaultHealthConfig, EveryThresholdIsSetInTheDataFile) {
  const std::string data = ReadRepoFile("data/rules.toml");
  for (const std::string& key : HealthConfigKeys()) {
    // "[rules.temperature_high] warning_c" -> the table header, then "warning_c =" after it.
    const size_t split = key.find("] ");
    const std::string table = key.substr(0, split + 1), name = key.substr(split + 2);
    const size_t at = data.find("\n" + table + "\n");
    ASSERT_NE(at, std::string::npos) << table;
    const size_t next = data.find("\n[", at + 1);
    EXPECT_NE(data.substr(at, next - at).find("\n" + name + " ="), std::string::npos) << key << " has no default";
  }
}

TEST(DefaultHealthConfig, FindingsDocumentEveryRuleAndKey) {
  const std::string docs = ReadRepoFile("docs/findings.md");
  for (std::string_view id : kRuleIds) EXPECT_NE(docs.find("`" + std::string(id) + "`"), std::string::npos) << id;
  // Trend detectors each have an entry of their own, with a pointer to docs/detectors.md.
  for (std::string_view id : kTrendDetectorIds)
    EXPECT_NE(docs.find("#### `" + std::string(id) + "`"), std::string::npos) << id;
  for (std::string_view id : kAgentFindingIds)
    EXPECT_NE(docs.find("#### `" + std::string(id) + "`"), std::string::npos) << id;
  for (const std::string& key : HealthConfigKeys()) {
    const std::string name = key.substr(key.find("] ") + 2);
    EXPECT_NE(docs.find("`" + name + "`"), std::string::npos) << key;
  }
}

TEST(ApplyHealthConfig, ReplacesOnlyTheKeysItSets) {
  Result<HealthConfig> config = ApplyHealthConfig(DefaultHealthConfig(), R"(
    [host]
    disk_paths = ["/", "/data"]
    processes = ["nvidia-persistenced"]
    [rules.temperature_high]
    warning_c = 70
    [rules.backup_stale]
    max_age = "6h"
    [rules.fan_failure]
    enabled = false
    [rules.gpu_lost]
    actions = ["Call the on-call engineer."]
    [agent]
    listen = "0.0.0.0:9400"   # another module's table is left alone
  )",
                                                  "site.toml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->host.disk_paths, (std::vector<std::string>{"/", "/data"}));
  EXPECT_EQ(config->host.processes, std::vector<std::string>{"nvidia-persistenced"});
  EXPECT_EQ(config->thresholds.temperature_high.warning_c, 70);
  EXPECT_EQ(config->thresholds.temperature_high.critical_c, 80);
  EXPECT_EQ(config->thresholds.backup_stale.max_age, hours(6));
  EXPECT_FALSE(config->Enabled("fan_failure"));
  EXPECT_EQ(config->RemedyFor("gpu_lost").actions, std::vector<std::string>{"Call the on-call engineer."});
  EXPECT_EQ(config->RemedyFor("gpu_lost").cause, DefaultHealthConfig().RemedyFor("gpu_lost").cause);
}

TEST(ApplyHealthConfig, ChecklistIsReplacedWhole) {
  Result<HealthConfig> config = ApplyHealthConfig(DefaultHealthConfig(), R"(
    [[checklist]]
    title = "GPUs cool"
    rules = ["temperature_high", "inlet_temperature"]
  )",
                                                  "site.toml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  ASSERT_EQ(config->checklist.size(), 1u);
  EXPECT_EQ(config->checklist[0].rule_ids.size(), 2u);
}

struct BadConfig {
  std::string text;
  std::string message;  // part of the expected error
};

class ApplyHealthConfigErrors : public ::testing::TestWithParam<BadConfig> {};

TEST_P(ApplyHealthConfigErrors, NameTheProblem) {
  Result<HealthConfig> config = ApplyHealthConfig(DefaultHealthConfig(), GetParam().text, "site.toml");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.error().message.find(GetParam().message), std::string::npos) << config.error().message;
  EXPECT_EQ(config.error().message.rfind("site.toml", 0), 0u) << config.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ApplyHealthConfigErrors,
    ::testing::Values(BadConfig{"[rules.temperature_high]\nwarnig_c = 70\n",
                                "site.toml:2: rules.temperature_high.warnig_c: unknown key"},
                      BadConfig{"[rules.temprature_high]\nwarning_c = 70\n", "rules.temprature_high: unknown rule id"},
                      BadConfig{"[rules.temperature_high]\nwarning_c = \"hot\"\n", "expected a number"},
                      BadConfig{"[rules.xid_recent]\nwindow = \"soon\"\n", "expected a duration"},
                      BadConfig{"[rules.retired_pages]\nwarning_count = -1\n", "expected a whole number >= 0"},
                      BadConfig{"[rules.process_missing]\nseverity = \"bad\"\n", "expected one of"},
                      BadConfig{"[host]\ndisk_paths = \"/\"\n", "host.disk_paths: expected an array of strings"},
                      BadConfig{"[host]\nmystery = 1\n", "host.mystery: unknown key"},
                      BadConfig{"[rules.gpu_lost.someday]\ncause = \"x\"\n", "unknown case"},
                      BadConfig{"[rules.driver_unavailable.no_permission]\nseverity = \"x\"\n",
                                "a case holds only cause and actions"},
                      BadConfig{"[rules.temperature_high]\nwarning_c = 90\n", "warning_c is above critical_c"},
                      BadConfig{"[rules.cuda_incompatible]\nrequired = \"twelve\"\n", "is not a CUDA version"},
                      BadConfig{"[[checklist]]\ntitle = \"x\"\nrules = [\"nope\"]\n", "unknown rule id 'nope'"},
                      BadConfig{"[rules.memory_leak]\nenabled = false\n",
                                "rules.memory_leak: a trend detector, not a rule: its thresholds go in "
                                "[detectors]"},
                      BadConfig{"[[checklist]]\ntitle = \"x\"\nrules = [\"job_stall\"]\n",
                                "'job_stall' is a trend detector of the agent, which `check` does not run"},
                      BadConfig{"[rules\nbroken", "site.toml:1:"},
                      // A category triage does not weigh would leave the finding under no cause.
                      BadConfig{"[rules.fan_failure]\ncategory = \"cooling\"\n",
                                "rules.fan_failure.category: 'cooling' is not a category; expected one of pcie, "
                                "memory, power, thermal, driver, application, host, unknown"},
                      BadConfig{"[correlations.facility_cooling]\ncategory = \"cooling\"\n",
                                "'cooling' is not a category"},
                      BadConfig{"[rules.gpu_lost]\nadvice = \"xid 9999\"\n",
                                "rules.gpu_lost.advice: expected \"xid N\" naming an Xid the catalog lists"},
                      BadConfig{"[rules.gpu_lost.someday]\nadvice = \"xid 79\"\n", "unknown case"}));

// A rule and the Xid that report the same fault say the same thing: one text.
TEST(DefaultHealthConfig, ALostGpuIsAdvisedAsItsXid79) {
  const XidInfo* xid = LogCatalog::Builtin().FindXid(79);
  ASSERT_NE(xid, nullptr);
  EXPECT_EQ(DefaultHealthConfig().RemedyFor("gpu_lost").actions, xid->steps);
  Result<HealthConfig> site =
      ApplyHealthConfig(DefaultHealthConfig(), "[rules.gpu_unreachable]\nadvice = \"xid 79\"\n", "site.toml");
  ASSERT_TRUE(site.ok()) << site.error().message;
  EXPECT_EQ(site->RemedyFor("gpu_unreachable").actions, xid->steps);
}

// A stuck driver hangs every NVML call, a reset included: the advice must not
// say both "nvidia-smi will hang" and "run nvidia-smi -r".
TEST(DefaultHealthConfig, AStuckDriverIsNeverAdvisedANvidiaSmiReset) {
  for (std::string_view id : {"nvml_hang", "driver_hang"})
    for (const std::string& action : DefaultHealthConfig().RemedyFor(id).actions)
      EXPECT_EQ(action.find("nvidia-smi -r"), std::string::npos) << id << ": " << action;
}

TEST(LoadHealthConfigFile, MissingFileIsAnError) {
  Result<HealthConfig> config = LoadHealthConfigFile("/nonexistent/gpudoctor.toml");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.error().message.find("/nonexistent/gpudoctor.toml"), std::string::npos);
}

}  // namespace
}  // namespace gpudoctor
