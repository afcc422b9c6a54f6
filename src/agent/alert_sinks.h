// The alert sinks: a webhook (JSON POST), syslog (which journald also
// collects), and an exec hook (a program run with argv, no shell).
//
//   Result<std::unique_ptr<AlertSink>> hook = MakeWebhookSink({.url = "http://alerts:8080/gpu"});
//   std::unique_ptr<AlertSink> log = MakeSyslogSink({});
//   Result<std::unique_ptr<AlertSink>> page = MakeExecSink({.argv = {"/usr/local/bin/page"}});
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent/alerts.h"
#include "common/result.h"

namespace gpudoctor {

// ---- webhook ----

struct WebhookOptions {
  std::string url;                             // http://host[:port]/path or https://...
  std::map<std::string, std::string> headers;  // e.g. {"Authorization", "Bearer ..."}
  Duration timeout = std::chrono::seconds(5);  // per attempt, the whole exchange: connect to the answer's last byte
  int max_attempts = 4;
  Duration initial_backoff = std::chrono::seconds(1);  // doubles after each failure
  Duration max_backoff = std::chrono::seconds(30);
  // Waits between attempts; returns false when interrupted. Tests inject one.
  std::function<bool(Duration)> sleep;
};

// A 2xx answer is success. Connection errors, timeouts, 408, 429 and 5xx are
// retried with exponential backoff; other answers fail at once (the receiver
// will not change its mind).
Result<std::unique_ptr<AlertSink>> MakeWebhookSink(WebhookOptions options);

// ---- syslog ----

struct SyslogOptions {
  std::string facility = "daemon";  // daemon, user, local0 ... local7
  // Writes one message at a priority (LOG_CRIT, ...). Default: syslog(3).
  std::function<void(int priority, std::string_view message)> write;
};

// Opened critical findings go out at LOG_CRIT, warnings at LOG_WARNING,
// unknown at LOG_NOTICE; resolutions at LOG_NOTICE. Fails for an unknown
// facility name.
Result<std::unique_ptr<AlertSink>> MakeSyslogSink(SyslogOptions options);

// ---- exec hook ----

struct ExecHookOptions {
  std::vector<std::string> argv;  // argv[0]: absolute path
  Duration timeout = std::chrono::seconds(10);
};

// Runs the program once per alert, with the alert as JSON on stdin and as
// environment variables (GPUDOCTOR_EVENT, GPUDOCTOR_FINDING_ID,
// GPUDOCTOR_SEVERITY, ...; see docs/agent.md) plus PATH. Exit status 0 is
// success. Not retried: a hook's side effects may not be repeatable.
Result<std::unique_ptr<AlertSink>> MakeExecSink(ExecHookOptions options);

// The environment an exec hook receives for `alert`.
std::vector<std::string> ExecHookEnvironment(const Alert& alert);

}  // namespace gpudoctor
