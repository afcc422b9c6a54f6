#include "agent/alert_config.h"

#include <gtest/gtest.h>

#include <map>

#include "redact/secrets.h"

namespace gpudoctor {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

TEST(AlertConfig, ReadsEverySink) {
  Result<AlertConfig> config = ParseAlertConfig(R"(
[agent]
interval = "5s"  # other tables are not ours

[alerts]
dry_run = true
min_interval = "10m"

[[alerts.webhook]]
url = "http://alerts.example:8080/gpudoctor"
timeout = "3s"
attempts = 6
backoff = "500ms"
max_backoff = "1m"
headers = { Authorization = "Bearer s3cret", "X-Team" = "ml" }

[[alerts.webhook]]
url = "https://hooks.example/b"

[alerts.syslog]
facility = "local2"

[[alerts.exec]]
argv = ["/usr/local/bin/page-oncall", "--team", "gpu"]
timeout = 20
)");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_TRUE(config->dry_run);
  EXPECT_EQ(config->min_interval, minutes(10));
  ASSERT_EQ(config->webhooks.size(), 2u);
  EXPECT_EQ(config->webhooks[0].url, "http://alerts.example:8080/gpudoctor");
  EXPECT_EQ(config->webhooks[0].timeout, seconds(3));
  EXPECT_EQ(config->webhooks[0].max_attempts, 6);
  EXPECT_EQ(config->webhooks[0].initial_backoff, milliseconds(500));
  EXPECT_EQ(config->webhooks[0].max_backoff, minutes(1));
  EXPECT_EQ(config->webhooks[0].headers.at("Authorization"), "Bearer s3cret");
  EXPECT_EQ(config->webhooks[0].headers.at("X-Team"), "ml");
  EXPECT_EQ(config->webhooks[1].max_attempts, 4);  // default
  ASSERT_TRUE(config->syslog.has_value());
  EXPECT_EQ(config->syslog->facility, "local2");
  ASSERT_EQ(config->exec_hooks.size(), 1u);
  EXPECT_EQ(config->exec_hooks[0].argv,
            (std::vector<std::string>{"/usr/local/bin/page-oncall", "--team", "gpu"}));
  EXPECT_EQ(config->exec_hooks[0].timeout, seconds(20));

  Result<std::vector<std::unique_ptr<AlertSink>>> sinks = MakeAlertSinks(*config);
  ASSERT_TRUE(sinks.ok()) << sinks.error().message;
  ASSERT_EQ(sinks->size(), 4u);
  EXPECT_EQ((*sinks)[0]->kind(), "webhook");
  EXPECT_EQ((*sinks)[2]->kind(), "syslog");
  EXPECT_EQ((*sinks)[3]->kind(), "exec");
}

TEST(AlertConfig, DefaultsWithoutAnAlertsTable) {
  Result<AlertConfig> config = ParseAlertConfig("[agent]\ninterval = \"1s\"\n");
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(config->dry_run);
  EXPECT_EQ(config->min_interval, minutes(5));
  EXPECT_TRUE(config->webhooks.empty());
  EXPECT_FALSE(config->syslog.has_value());
  EXPECT_TRUE(MakeAlertSinks(*config)->empty());
}

TEST(AlertConfig, SyslogCanBeSwitchedOff) {
  Result<AlertConfig> config = ParseAlertConfig("[alerts.syslog]\nenabled = false\n");
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(config->syslog.has_value());
}

TEST(AlertConfig, ErrorsNameTheKey) {
  struct Case {
    const char* toml;
    const char* error;
  };
  for (const Case& c : std::vector<Case>{
           {"[alerts]\nmin_interval = \"soon\"\n", "alerts.min_interval"},
           {"[alerts]\ndry_run = \"yes\"\n", "alerts.dry_run"},
           {"[alerts]\nwebhooks = []\n", "alerts.webhooks: unknown setting"},
           {"[[alerts.webhook]]\ntimeout = \"1s\"\n", "alerts.webhook[0].url: required"},
           {"[[alerts.webhook]]\nurl = \"http://a/b\"\natempts = 3\n",
            "alerts.webhook[0].atempts: unknown setting"},
           {"[[alerts.webhook]]\nurl = \"http://a/b\"\nattempts = 0\n", "alerts.webhook[0].attempts"},
           {"[[alerts.webhook]]\nurl = \"http://a/b\"\nheaders = { X = 1 }\n", "alerts.webhook[0].headers.X"},
           {"[[alerts.exec]]\nargv = \"/bin/page\"\n", "alerts.exec[0].argv"},
           {"[[alerts.exec]]\nargv = [\"/bin/page\", 3]\n", "alerts.exec[0].argv"},
           {"alerts = 3\n", "alerts: expected a table"},
           {"[alerts\n", "config line 1"},
       }) {
    Result<AlertConfig> config = ParseAlertConfig(c.toml);
    ASSERT_FALSE(config.ok()) << c.toml;
    EXPECT_NE(config.error().message.find(c.error), std::string::npos) << config.error().message;
  }
}

TEST(AlertConfig, SinkErrorsSurfaceWhenBuilding) {
  Result<AlertConfig> config = ParseAlertConfig("[[alerts.webhook]]\nurl = \"alerts.example/hook\"\n");
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(MakeAlertSinks(*config).ok());
  config = ParseAlertConfig("[[alerts.exec]]\nargv = [\"page-oncall\"]\n");
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(MakeAlertSinks(*config).ok());
  config = ParseAlertConfig("[alerts.syslog]\nfacility = \"kern\"\n");
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(MakeAlertSinks(*config).ok());
}


// A value for every [alerts] setting: a distinctive secret wherever the setting
// takes free text, a valid typed value elsewhere. A setting added to the parser
// fails here until it is listed; if it can hold a secret, it also needs a line
// in kConfigSecrets (src/redact/secrets.h).
const std::map<std::string, std::string>& SettingValues() {
  static const std::map<std::string, std::string> values = {
      {"alerts.dry_run", "true"},
      {"alerts.min_interval", "\"7m\""},
      {"alerts.group_wait", "\"25s\""},
      {"alerts.webhook.url", "\"https://alerts.example:8443/hook/Zq8-SECRET-1?key=Zq8-SECRET-2#Zq8-SECRET-3\""},
      {"alerts.webhook.timeout", "\"7s\""},
      {"alerts.webhook.attempts", "17"},
      {"alerts.webhook.backoff", "\"3s\""},
      {"alerts.webhook.max_backoff", "\"70s\""},
      {"alerts.webhook.headers", "{ Authorization = \"Bearer Zq8-SECRET-4\", X-Team = \"Zq8-SECRET-5\" }"},
      {"alerts.syslog.enabled", "true"},
      {"alerts.syslog.facility", "\"local3\""},
      {"alerts.exec.argv", "[\"/usr/local/bin/page-oncall\", \"--team\", \"Zq8-SECRET-6\"]"},
      {"alerts.exec.timeout", "\"13s\""},
  };
  return values;
}

// A config that sets every setting, each table under its own header.
std::string ConfigWithEverySetting() {
  std::string config, table;
  for (const std::string& key : AlertConfigKeys()) {
    const size_t dot = key.rfind('.');
    if (key.substr(0, dot) != table) config += "[" + (table = key.substr(0, dot)) + "]\n";
    auto value = SettingValues().find(key);
    config += key.substr(dot + 1) + " = " + (value == SettingValues().end() ? "\"unlisted\"" : value->second) + "\n";
  }
  return config;
}

TEST(AlertConfig, ASupportBundleShowsEverySettingButNoSecret) {
  for (const std::string& key : AlertConfigKeys()) EXPECT_TRUE(SettingValues().contains(key)) << key << " has no test value";
  const std::string config = ConfigWithEverySetting();
  Result<AlertConfig> parsed = ParseAlertConfig(config);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message << "\n" << config;
  ASSERT_TRUE(MakeAlertSinks(*parsed).ok()) << config;

  const std::string redacted = RedactConfigSecrets(config);
  EXPECT_EQ(redacted.find("Zq8-SECRET"), std::string::npos) << redacted;
  for (const auto& [key, value] : SettingValues()) {
    if (value.find("Zq8-SECRET") != std::string::npos) continue;
    std::string shown = key.substr(key.rfind('.') + 1) + " = " + value;  // re-emitted with single quotes
    std::replace(shown.begin(), shown.end(), '"', '\'');
    EXPECT_NE(redacted.find(shown), std::string::npos) << shown << " not in\n" << redacted;
  }
  for (const char* kept : {"alerts.example:8443", "Authorization", "X-Team", "'/usr/local/bin/page-oncall'"})
    EXPECT_NE(redacted.find(kept), std::string::npos) << kept << " not in\n" << redacted;
}

}  // namespace
}  // namespace gpudoctor
