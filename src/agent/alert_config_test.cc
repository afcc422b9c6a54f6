#include "agent/alert_config.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gpudoctor
