#include "agent/alert_sinks.h"

#include <fmt/format.h>
#include <syslog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>

#include "store/incident_json.h"
#include "net/http_client.h"
#include "agent/subprocess.h"
#include "redact/secrets.h"
#include "common/text.h"

namespace gpudoctor {
namespace {

// ---- webhook ----

Result<HttpUrl> ParseWebhookUrl(std::string_view url) {
  // Messages show the url without its credentials: they end up in logs.
  Result<HttpUrl> parsed = ParseHttpUrl(url);
  if (!parsed) return Error{"webhook url " + parsed.error().message};
  if (!parsed->user.empty())
    return Error{fmt::format("webhook url '{}': put credentials in a header, not the url", parsed->shown)};
  if (parsed->path.empty() || parsed->path.front() != '/') parsed->path.insert(0, "/");
  return parsed;
}

class WebhookSink final : public AlertSink {
 public:
  WebhookSink(WebhookOptions options, HttpUrl url) : options_(std::move(options)), url_(std::move(url)) {}

  std::string_view kind() const override { return "webhook"; }
  std::string Describe() const override { return "webhook " + RedactTextSecrets(options_.url); }

  Status Deliver(const Alert& alert) override {
    const std::string body = AlertJson(alert);
    Duration backoff = options_.initial_backoff;
    std::string last_error;
    for (int attempt = 1; attempt <= std::max(1, options_.max_attempts); ++attempt) {
      if (attempt > 1) {
        if (!Wait(backoff)) return Error{fmt::format("interrupted; last attempt: {}", last_error)};
        backoff = std::min(backoff * 2, options_.max_backoff);
      }
      bool retry = false;
      last_error = Post(body, retry);
      if (last_error.empty()) return Status::Ok();
      if (!retry) return Error{last_error};
    }
    return Error{fmt::format("gave up after {} attempts: {}", options_.max_attempts, last_error)};
  }

  // Also ends an attempt under way at once: a stuck receiver holds nothing.
  void Interrupt() override {
    std::lock_guard lock(mutex_);
    interrupted_ = true;
    cancel_.store(true);
    wake_.notify_all();
  }

 private:
  // Returns "" on success, else the error; sets `retry` when worth retrying.
  std::string Post(const std::string& body, bool& retry) {
    HttpPost post{
        .origin = url_.origin, .path = url_.path, .body = body, .timeout = options_.timeout, .cancel = &cancel_};
    post.headers.emplace_back("User-Agent", "gpudoctor");
    for (const auto& [name, value] : options_.headers) post.headers.emplace_back(name, value);
    Result<int> status = PostHttp(post);
    if (!status) {
      retry = true;
      return fmt::format("{}: {}", RedactTextSecrets(options_.url), status.error().message);
    }
    if (*status >= 200 && *status < 300) return "";
    retry = *status == 408 || *status == 429 || *status >= 500;
    return fmt::format("{} answered {}", RedactTextSecrets(options_.url), *status);
  }

  bool Wait(Duration delay) {
    if (options_.sleep) return options_.sleep(delay);
    std::unique_lock lock(mutex_);
    return !wake_.wait_for(lock, delay, [&] { return interrupted_; });
  }

  const WebhookOptions options_;
  const HttpUrl url_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool interrupted_ = false;
  std::atomic<bool> cancel_{false};
};

// ---- syslog ----

std::optional<int> FacilityFromName(std::string_view name) {
  static const std::pair<std::string_view, int> kFacilities[] = {
      {"daemon", LOG_DAEMON}, {"user", LOG_USER},     {"local0", LOG_LOCAL0}, {"local1", LOG_LOCAL1},
      {"local2", LOG_LOCAL2}, {"local3", LOG_LOCAL3}, {"local4", LOG_LOCAL4}, {"local5", LOG_LOCAL5},
      {"local6", LOG_LOCAL6}, {"local7", LOG_LOCAL7},
  };
  for (const auto& [facility_name, value] : kFacilities) {
    if (facility_name == name) return value;
  }
  return std::nullopt;
}

int PriorityFor(const Alert& alert) {
  if (ClosesIncident(alert.transition.kind)) return LOG_NOTICE;
  switch (alert.transition.incident.finding.severity) {
    case Severity::kCritical:
      return LOG_CRIT;
    case Severity::kWarning:
      return LOG_WARNING;
    default:
      return LOG_NOTICE;
  }
}

class SyslogSink final : public AlertSink {
 public:
  SyslogSink(SyslogOptions options, int facility) : options_(std::move(options)), facility_(facility) {
    if (!options_.write) {
      // No openlog: its settings are process-wide. The facility travels in
      // each priority; the ident defaults to the program name.
      options_.write = [](int priority, std::string_view message) {
        ::syslog(priority, "%.*s", static_cast<int>(message.size()), message.data());
      };
    }
  }

  std::string_view kind() const override { return "syslog"; }
  std::string Describe() const override { return fmt::format("syslog ({})", options_.facility); }

  Status Deliver(const Alert& alert) override {
    std::string message = "finding " + AlertLine(alert);
    const Finding& f = alert.transition.incident.finding;
    if (!ClosesIncident(alert.transition.kind) && !f.cause.empty()) {
      message += " | cause: " + f.cause;
    }
    if (!ClosesIncident(alert.transition.kind) && !f.actions.empty()) {
      message += " | action: " + f.actions.front();
    }
    std::replace(message.begin(), message.end(), '\n', ' ');
    options_.write(facility_ | PriorityFor(alert), message);
    return Status::Ok();
  }

 private:
  SyslogOptions options_;
  const int facility_;
};

// ---- exec ----

class ExecSink final : public AlertSink {
 public:
  explicit ExecSink(ExecHookOptions options) : options_(std::move(options)) {}

  std::string_view kind() const override { return "exec"; }
  std::string Describe() const override { return "exec " + options_.argv.front(); }

  Status Deliver(const Alert& alert) override {
    Result<ProcessOutcome> outcome = RunProcess({.argv = options_.argv,
                                                 .env = ExecHookEnvironment(alert),
                                                 .stdin_data = AlertJson(alert) + "\n",
                                                 .timeout = options_.timeout});
    if (!outcome) return outcome.error();
    if (outcome->Succeeded()) return Status::Ok();
    std::string message = fmt::format("{}: {}", options_.argv.front(), outcome->Describe(options_.timeout));
    if (std::string_view output = Trim(outcome->output); !output.empty()) {
      message += fmt::format(": {}", output);
    }
    return Error{message};
  }

 private:
  const ExecHookOptions options_;
};

}  // namespace

Result<std::unique_ptr<AlertSink>> MakeWebhookSink(WebhookOptions options) {
  Result<HttpUrl> url = ParseWebhookUrl(options.url);
  if (!url) return url.error();
  if (options.timeout <= Duration::zero()) return Error{"webhook timeout must be positive"};
  if (Status client = LoadHttpClient(); !client) return client.error();
  return std::unique_ptr<AlertSink>(std::make_unique<WebhookSink>(std::move(options), std::move(*url)));
}

Result<std::unique_ptr<AlertSink>> MakeSyslogSink(SyslogOptions options) {
  std::optional<int> facility = FacilityFromName(options.facility);
  if (!facility) return Error{fmt::format("unknown syslog facility '{}'", options.facility)};
  return std::unique_ptr<AlertSink>(std::make_unique<SyslogSink>(std::move(options), *facility));
}

Result<std::unique_ptr<AlertSink>> MakeExecSink(ExecHookOptions options) {
  if (options.argv.empty() || options.argv.front().empty() || options.argv.front().front() != '/') {
    return Error{"exec hook: argv[0] must be the program's absolute path"};
  }
  if (options.timeout <= Duration::zero()) return Error{"exec hook timeout must be positive"};
  return std::unique_ptr<AlertSink>(std::make_unique<ExecSink>(std::move(options)));
}

std::vector<std::string> ExecHookEnvironment(const Alert& alert) {
  const FindingTransition& t = alert.transition;
  const StoredFinding& incident = t.incident;
  const Finding& f = incident.finding;
  // A NUL would end the variable early; newlines are fine in the environment.
  auto var = [](std::string_view name, std::string_view value) {
    std::string text = fmt::format("{}={}", name, value);
    text.erase(std::remove(text.begin(), text.end(), '\0'), text.end());
    return text;
  };
  std::vector<std::string> env = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      var("GPUDOCTOR_EVENT", TransitionName(t.kind)),
      var("GPUDOCTOR_FINDING_ID", f.id),
      var("GPUDOCTOR_FINDING_KEY", incident.key),
      var("GPUDOCTOR_SEVERITY", SeverityName(f.severity)),
      var("GPUDOCTOR_SUMMARY", f.summary),
      var("GPUDOCTOR_CAUSE", f.cause),
      var("GPUDOCTOR_HOSTNAME", alert.hostname),
      var("GPUDOCTOR_TIME", FormatIsoUtc(TransitionTime(t))),
      var("GPUDOCTOR_OPENED_AT", FormatIsoUtc(incident.opened_at)),
      var("GPUDOCTOR_SUPPRESSED", std::to_string(alert.suppressed)),
  };
  if (f.gpu) {
    if (f.gpu->index) env.push_back(var("GPUDOCTOR_GPU_INDEX", std::to_string(*f.gpu->index)));
    env.push_back(var("GPUDOCTOR_GPU_UUID", f.gpu->uuid));
    env.push_back(var("GPUDOCTOR_GPU_PCI_BUS_ID", f.gpu->pci_bus_id));
    env.push_back(var("GPUDOCTOR_GPU_SERIAL", f.gpu->serial));
  }
  if (!f.subject.empty()) env.push_back(var("GPUDOCTOR_FINDING_SUBJECT", f.subject));
  return env;
}

}  // namespace gpudoctor
