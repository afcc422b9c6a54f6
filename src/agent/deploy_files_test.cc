// Checks the files in deploy/ against what the agent really exports, so a
// renamed metric cannot silently break the alert rules or the dashboard.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "agent/alert_config.h"
#include "agent/diag_schedule.h"
#include "agent/http_server.h"
#include "agent/metrics.h"
#include "agent/subprocess.h"
#include "common/text.h"
#include "health/detectors/trend_config.h"
#include "health/health_config.h"

namespace gpudoctor {
namespace {

const std::filesystem::path kDeploy = std::filesystem::path(GPUDOCTOR_SOURCE_DIR) / "deploy";

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Metric names mentioned in a PromQL expression or a file of them.
std::set<std::string> MetricNamesIn(const std::string& text) {
  static const std::regex kName(R"(\b(gpudoctor_[a-z0-9_]+|DCGM_FI_[A-Z0-9_]+)\b)");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kName); it != std::sregex_iterator(); ++it) {
    names.insert((*it)[1]);
  }
  return names;
}

void ExpectAllExported(const std::set<std::string>& names, const std::string& where) {
  const std::vector<std::string_view> exported = MetricFamilyNames();
  for (const std::string& name : names) {
    EXPECT_NE(std::find(exported.begin(), exported.end(), name), exported.end())
        << where << " uses " << name << ", which the agent does not export";
  }
}

TEST(DeployFiles, PrometheusRulesUseExportedMetrics) {
  const std::string rules = ReadFile(kDeploy / "prometheus-rules.yml");
  ASSERT_FALSE(rules.empty());
  std::set<std::string> names = MetricNamesIn(rules);
  EXPECT_GE(names.size(), 15u);
  ExpectAllExported(names, "prometheus-rules.yml");
  ExpectAllExported(MetricNamesIn(ReadFile(kDeploy / "prometheus-rules.test.yml")),
                    "prometheus-rules.test.yml");
}

void CollectExpressions(const nlohmann::json& node, std::vector<std::string>& out) {
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) {
      if ((key == "expr" || key == "definition") && value.is_string())
        out.push_back(value.get<std::string>());
      CollectExpressions(value, out);
    }
  } else if (node.is_array()) {
    for (const auto& item : node) CollectExpressions(item, out);
  }
}

TEST(DeployFiles, GrafanaDashboardIsValidAndUsesExportedMetrics) {
  nlohmann::json dashboard =
      nlohmann::json::parse(ReadFile(kDeploy / "grafana-dashboard.json"), nullptr, false);
  ASSERT_FALSE(dashboard.is_discarded()) << "grafana-dashboard.json is not JSON";
  EXPECT_EQ(dashboard["uid"], "gpudoctor-overview");
  std::vector<std::string> expressions;
  CollectExpressions(dashboard, expressions);
  EXPECT_GE(expressions.size(), 15u);
  std::set<std::string> names;
  for (const std::string& expr : expressions) names.merge(MetricNamesIn(expr));
  ExpectAllExported(names, "grafana-dashboard.json");
  for (const char* needed :
       {"gpudoctor_gpu_temperature_celsius", "gpudoctor_gpu_power_watts", "gpudoctor_gpu_utilization_ratio",
        "gpudoctor_gpu_memory_used_bytes", "gpudoctor_finding"}) {
    EXPECT_TRUE(names.contains(needed)) << needed;
  }
  std::set<int64_t> ids;
  for (const auto& panel : dashboard["panels"]) EXPECT_TRUE(ids.insert(panel["id"].get<int64_t>()).second);
}

// Every part of the agent's config reads `text` (what `gpudoctor agent --config` does).
void ExpectValidConfig(const std::string& text, const std::string& what) {
  Result<HealthConfig> health = ApplyHealthConfig(DefaultHealthConfig(), text, what);
  EXPECT_TRUE(health.ok()) << what << ": " << health.error().message;
  Result<TrendConfig> trends = ParseTrendConfig(text);
  EXPECT_TRUE(trends.ok()) << what << ": " << trends.error().message;
  Result<AlertConfig> alerts = ParseAlertConfig(text);
  EXPECT_TRUE(alerts.ok()) << what << ": " << alerts.error().message;
  Result<DiagScheduleConfig> diag = ParseDiagScheduleConfig(text);
  EXPECT_TRUE(diag.ok()) << what << ": " << diag.error().message;
}

// The package's /etc/gpudoctor/config.toml sets nothing as shipped, and each example it shows is valid
// once uncommented: lines "#key = ..." and "#[table]" (a "# " line is prose).
TEST(DeployFiles, ShippedConfigSetsNothingAndItsExamplesAreValid) {
  const std::string shipped = ReadFile(kDeploy / "config.toml");
  ASSERT_FALSE(shipped.empty());
  std::string uncommented;
  size_t examples = 0;
  std::istringstream lines(shipped);
  for (std::string line; std::getline(lines, line);) {
    ASSERT_TRUE(line.empty() || line[0] == '#') << "config.toml sets something: " << line;
    if (line.size() >= 2 && line[1] != ' ' && line[1] != '#') {
      uncommented += line.substr(1) + "\n";
      ++examples;
    }
  }
  EXPECT_GE(examples, 20u);
  ExpectValidConfig(shipped, "config.toml");
  ExpectValidConfig(uncommented, "config.toml, uncommented");
  // Uncommented, the examples hold the defaults, so uncommenting one changes nothing.
  Result<HealthConfig> health = ApplyHealthConfig(DefaultHealthConfig(), uncommented, "uncommented");
  ASSERT_TRUE(health.ok());
  for (const char* rule : {"temperature_high", "gpu_count_mismatch", "cuda_incompatible"})
    EXPECT_EQ(RuleThresholdValues(*health, rule), RuleThresholdValues(DefaultHealthConfig(), rule)) << rule;
}

TEST(DeployFiles, SystemdUnitIsHardenedAndRestarts) {
  const std::string unit = ReadFile(kDeploy / "gpudoctor-agent.service");
  for (const char* directive :
       {"Restart=always", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
        "DynamicUser=yes", "StateDirectory=gpudoctor", "CapabilityBoundingSet=CAP_SYSLOG",
        "DevicePolicy=closed", "ProtectKernelModules=yes", "RestrictNamespaces=yes",
        "SystemCallFilter=@system-service", "MemoryDenyWriteExecute=yes",
        "ExecReload=/bin/kill -HUP $MAINPID"}) {
    EXPECT_NE(unit.find(std::string("\n") + directive + "\n"), std::string::npos) << directive;
  }
  // Listens where the docs say, and only locally by default.
  EXPECT_NE(unit.find(fmt::format("--listen {}", kDefaultListenAddress)), std::string::npos);
  // Reading /dev/kmsg is how Xids are seen: the unit must not hide it.
  EXPECT_EQ(unit.find("ProtectKernelLogs=yes"), std::string::npos);
  // Runs the packaged program, and starts with no config file: it names none, the agent reads the default.
  EXPECT_NE(unit.find("\nExecStart=/usr/bin/gpudoctor agent "), std::string::npos);
  EXPECT_EQ(unit.find("--config"), std::string::npos);
  EXPECT_EQ(unit.find("agent.toml"), std::string::npos);
  EXPECT_NE(unit.find("\nRestartPreventExitStatus=64 65 66\n"), std::string::npos);
}

TEST(DeployFiles, SystemdAcceptsTheUnit) {
  if (::access("/usr/bin/systemd-analyze", X_OK) != 0) GTEST_SKIP() << "systemd-analyze is not installed";
  // verify insists that ExecStart exists; check a copy that runs /bin/true.
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("unit_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string unit = ReadFile(kDeploy / "gpudoctor-agent.service");
  unit = std::regex_replace(unit, std::regex("/usr/bin/gpudoctor"), "/bin/true");
  std::ofstream(dir / "gpudoctor-agent.service") << unit;
  Result<ProcessOutcome> verify =
      // The man page Documentation= names is installed by the package, not here: scripts/package-check.sh
      // verifies the installed unit with it.
      RunProcess({.argv = {"/usr/bin/systemd-analyze", "verify", "--man=no",
                           (dir / "gpudoctor-agent.service").string()},
                  .env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
                  .timeout = std::chrono::seconds(60)});
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(verify.ok()) << verify.error().message;
  EXPECT_TRUE(verify->Succeeded()) << verify->output;
  EXPECT_EQ(Trim(verify->output), "") << "systemd-analyze verify complains";
}

}  // namespace
}  // namespace gpudoctor
