#include "agent/alert_config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <span>

#include "common/text.h"

namespace gpudoctor {
namespace {

// The keys each table may hold; ParseAlertConfig rejects any other.
constexpr std::string_view kAlertsKeys[] = {"dry_run", "min_interval", "group_wait", "webhook", "syslog", "exec"};
constexpr std::string_view kWebhookKeys[] = {"url", "timeout", "attempts", "backoff", "max_backoff", "headers"};
constexpr std::string_view kSyslogKeys[] = {"enabled", "facility"};
constexpr std::string_view kExecKeys[] = {"argv", "timeout"};

// The keys of the sink table `name`; empty for a plain [alerts] setting.
std::span<const std::string_view> SinkKeys(std::string_view name) {
  if (name == "webhook") return kWebhookKeys;
  if (name == "syslog") return kSyslogKeys;
  if (name == "exec") return kExecKeys;
  return {};
}

// Reads typed values out of one TOML table, collecting the first error with
// the full key path ("alerts.webhook[1].timeout").
class TableReader {
 public:
  TableReader(const toml::table& table, std::string path) : table_(table), path_(std::move(path)) {}

  std::string Key(std::string_view key) const { return fmt::format("{}.{}", path_, key); }

  // Rejects keys outside `known`, so a typo is an error rather than a default.
  Status OnlyKeys(std::span<const std::string_view> known) const {
    for (const auto& [key, value] : table_) {
      if (std::find(known.begin(), known.end(), key.str()) == known.end()) {
        return Error{fmt::format("{}: unknown setting", Key(key.str()))};
      }
    }
    return Status::Ok();
  }

  Status Bool(std::string_view key, bool& out) const {
    const toml::node* node = table_.get(key);
    if (!node) return Status::Ok();
    if (!node->is_boolean()) return Error{fmt::format("{}: expected true or false", Key(key))};
    out = node->as_boolean()->get();
    return Status::Ok();
  }

  Status String(std::string_view key, std::string& out, bool required = false) const {
    const toml::node* node = table_.get(key);
    if (!node) return required ? Status(Error{fmt::format("{}: required", Key(key))}) : Status::Ok();
    if (!node->is_string()) return Error{fmt::format("{}: expected a string", Key(key))};
    out = node->as_string()->get();
    return Status::Ok();
  }

  // A duration written as "90s", "5m", "250ms", or a number of seconds.
  Status Time(std::string_view key, Duration& out) const {
    const toml::node* node = table_.get(key);
    if (!node) return Status::Ok();
    std::optional<Duration> value;
    if (node->is_string()) value = ParseDuration(node->as_string()->get());
    if (node->is_integer()) value = std::chrono::seconds(node->as_integer()->get());
    if (!value || *value < Duration::zero()) {
      return Error{fmt::format("{}: expected a duration such as \"30s\" or \"5m\"", Key(key))};
    }
    out = *value;
    return Status::Ok();
  }

  Status Int(std::string_view key, int& out, int min, int max) const {
    const toml::node* node = table_.get(key);
    if (!node) return Status::Ok();
    if (!node->is_integer() || node->as_integer()->get() < min || node->as_integer()->get() > max) {
      return Error{fmt::format("{}: expected a whole number from {} to {}", Key(key), min, max)};
    }
    out = static_cast<int>(node->as_integer()->get());
    return Status::Ok();
  }

  Status Strings(std::string_view key, std::vector<std::string>& out, bool required) const {
    const toml::node* node = table_.get(key);
    if (!node) return required ? Status(Error{fmt::format("{}: required", Key(key))}) : Status::Ok();
    const toml::array* array = node->as_array();
    if (!array) return Error{fmt::format("{}: expected an array of strings", Key(key))};
    out.clear();
    for (const toml::node& item : *array) {
      if (!item.is_string()) return Error{fmt::format("{}: expected an array of strings", Key(key))};
      out.push_back(item.as_string()->get());
    }
    return Status::Ok();
  }

  Status StringMap(std::string_view key, std::map<std::string, std::string>& out) const {
    const toml::node* node = table_.get(key);
    if (!node) return Status::Ok();
    const toml::table* table = node->as_table();
    if (!table) return Error{fmt::format("{}: expected a table of strings", Key(key))};
    for (const auto& [name, value] : *table) {
      if (!value.is_string()) return Error{fmt::format("{}.{}: expected a string", Key(key), name.str())};
      out[std::string(name.str())] = value.as_string()->get();
    }
    return Status::Ok();
  }

  // Tables given once ([alerts.syslog]) or repeated ([[alerts.webhook]]).
  Result<std::vector<const toml::table*>> Tables(std::string_view key) const {
    std::vector<const toml::table*> out;
    const toml::node* node = table_.get(key);
    if (!node) return out;
    if (const toml::table* one = node->as_table()) {
      out.push_back(one);
      return out;
    }
    if (const toml::array* many = node->as_array()) {
      for (const toml::node& item : *many) {
        if (!item.is_table()) return Error{fmt::format("{}: expected tables", Key(key))};
        out.push_back(item.as_table());
      }
      return out;
    }
    return Error{fmt::format("{}: expected a table", Key(key))};
  }

 private:
  const toml::table& table_;
  std::string path_;
};

#define GPUDOCTOR_TRY(expr)                  \
  do {                                       \
    if (Status status_ = (expr); !status_) { \
      return status_.error();                \
    }                                        \
  } while (false)

Result<AlertConfig> ReadAlerts(const toml::table& alerts) {
  AlertConfig config;
  TableReader reader(alerts, "alerts");
  GPUDOCTOR_TRY(reader.OnlyKeys(kAlertsKeys));
  GPUDOCTOR_TRY(reader.Bool("dry_run", config.dry_run));
  GPUDOCTOR_TRY(reader.Time("min_interval", config.min_interval));
  GPUDOCTOR_TRY(reader.Time("group_wait", config.group_wait));

  Result<std::vector<const toml::table*>> webhooks = reader.Tables("webhook");
  if (!webhooks) return webhooks.error();
  for (size_t i = 0; i < webhooks->size(); ++i) {
    TableReader w(*(*webhooks)[i], fmt::format("alerts.webhook[{}]", i));
    WebhookOptions options;
    GPUDOCTOR_TRY(w.OnlyKeys(kWebhookKeys));
    GPUDOCTOR_TRY(w.String("url", options.url, /*required=*/true));
    GPUDOCTOR_TRY(w.Time("timeout", options.timeout));
    GPUDOCTOR_TRY(w.Int("attempts", options.max_attempts, 1, 20));
    GPUDOCTOR_TRY(w.Time("backoff", options.initial_backoff));
    GPUDOCTOR_TRY(w.Time("max_backoff", options.max_backoff));
    GPUDOCTOR_TRY(w.StringMap("headers", options.headers));
    config.webhooks.push_back(std::move(options));
  }

  Result<std::vector<const toml::table*>> syslogs = reader.Tables("syslog");
  if (!syslogs) return syslogs.error();
  if (syslogs->size() > 1) return Error{"alerts.syslog: give it once"};
  if (!syslogs->empty()) {
    TableReader s(*syslogs->front(), "alerts.syslog");
    GPUDOCTOR_TRY(s.OnlyKeys(kSyslogKeys));
    bool enabled = true;
    GPUDOCTOR_TRY(s.Bool("enabled", enabled));
    SyslogOptions options;
    GPUDOCTOR_TRY(s.String("facility", options.facility));
    if (enabled) config.syslog = std::move(options);
  }

  Result<std::vector<const toml::table*>> hooks = reader.Tables("exec");
  if (!hooks) return hooks.error();
  for (size_t i = 0; i < hooks->size(); ++i) {
    TableReader h(*(*hooks)[i], fmt::format("alerts.exec[{}]", i));
    ExecHookOptions options;
    GPUDOCTOR_TRY(h.OnlyKeys(kExecKeys));
    GPUDOCTOR_TRY(h.Strings("argv", options.argv, /*required=*/true));
    GPUDOCTOR_TRY(h.Time("timeout", options.timeout));
    config.exec_hooks.push_back(std::move(options));
  }
  return config;
}

#undef GPUDOCTOR_TRY

}  // namespace

Result<AlertConfig> ParseAlertConfig(std::string_view toml_text) {
#if TOML_EXCEPTIONS
  toml::table root;
  try {
    root = toml::parse(toml_text);
  } catch (const toml::parse_error& error) {
    return Error{fmt::format("config line {}: {}", error.source().begin.line, error.description())};
  }
#else
  toml::parse_result parsed = toml::parse(toml_text);
  if (!parsed) {
    return Error{
        fmt::format("config line {}: {}", parsed.error().source().begin.line, parsed.error().description())};
  }
  const toml::table& root = parsed.table();
#endif
  const toml::node* alerts = root.get("alerts");
  if (!alerts) return AlertConfig{};
  if (!alerts->is_table()) return Error{"alerts: expected a table"};
  return ReadAlerts(*alerts->as_table());
}

std::vector<std::string> AlertConfigKeys() {
  std::vector<std::string> keys;
  for (std::string_view key : kAlertsKeys) {
    std::span<const std::string_view> sink_keys = SinkKeys(key);
    if (sink_keys.empty()) keys.push_back(fmt::format("alerts.{}", key));
    for (std::string_view sink_key : sink_keys) keys.push_back(fmt::format("alerts.{}.{}", key, sink_key));
  }
  return keys;
}

Result<std::vector<std::unique_ptr<AlertSink>>> MakeAlertSinks(const AlertConfig& config) {
  std::vector<std::unique_ptr<AlertSink>> sinks;
  for (const WebhookOptions& options : config.webhooks) {
    Result<std::unique_ptr<AlertSink>> sink = MakeWebhookSink(options);
    if (!sink) return sink.error();
    sinks.push_back(std::move(*sink));
  }
  if (config.syslog) {
    Result<std::unique_ptr<AlertSink>> sink = MakeSyslogSink(*config.syslog);
    if (!sink) return sink.error();
    sinks.push_back(std::move(*sink));
  }
  for (const ExecHookOptions& options : config.exec_hooks) {
    Result<std::unique_ptr<AlertSink>> sink = MakeExecSink(options);
    if (!sink) return sink.error();
    sinks.push_back(std::move(*sink));
  }
  return sinks;
}

}  // namespace gpudoctor
