// The [alerts] section of the agent's config file, and the sinks it names.
//
//   [alerts]
//   dry_run = false
//   min_interval = "5m"              # per finding
//   group_wait = "15s"               # a new finding waits for a root cause
//
//   [[alerts.webhook]]
//   url = "http://alerts.example:8080/gpudoctor"
//   timeout = "5s"
//   attempts = 4
//   backoff = "1s"
//   headers = { Authorization = "Bearer s3cret" }
//
//   [alerts.syslog]
//   facility = "daemon"
//
//   [[alerts.exec]]
//   argv = ["/usr/local/bin/page-oncall", "--team", "gpu"]
//   timeout = "10s"
//
//   Result<AlertConfig> config = ParseAlertConfig(file_text);
//   Result<std::vector<std::unique_ptr<AlertSink>>> sinks = MakeAlertSinks(*config);
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/alert_sinks.h"
#include "agent/alerts.h"
#include "common/result.h"

namespace gpudoctor {

struct AlertConfig {
  bool dry_run = false;
  Duration min_interval = std::chrono::minutes(5);
  // A new finding waits this long for a root cause to take it in (AlertGrouper).
  Duration group_wait = std::chrono::seconds(15);
  std::vector<WebhookOptions> webhooks;
  std::optional<SyslogOptions> syslog;
  std::vector<ExecHookOptions> exec_hooks;
};

// Reads the [alerts] table of a TOML document; other tables are ignored and
// a document without [alerts] gives the defaults (no sinks). Errors name the
// offending key.
Result<AlertConfig> ParseAlertConfig(std::string_view toml_text);

Result<std::vector<std::unique_ptr<AlertSink>>> MakeAlertSinks(const AlertConfig& config);

// Every setting ParseAlertConfig reads, by its path ("alerts.webhook.url");
// any other key is an error, so the list is complete. Tests walk it to check
// that each setting that can hold a secret is masked (src/redact/secrets.h).
std::vector<std::string> AlertConfigKeys();

}  // namespace gpudoctor
