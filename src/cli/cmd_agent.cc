// `gpudoctor agent`: watches the GPUs continuously. Each cycle collects a
// snapshot (hang-proof probe), the host signals and the new kernel-log
// events, runs the rules and trend detectors, stores samples and findings
// (durably, before any alert), sends alerts for the findings that opened or
// resolved, and publishes the new state to the HTTP server.
//
//   gpudoctor agent --simulate examples/healthy-8xh100.toml --interval 1s --db /tmp/h.db
//
// SIGTERM / SIGINT stop it cleanly; SIGHUP reloads --config. Signals reach
// the loop through a self-pipe: the handler only writes one byte.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "agent/agent_state.h"
#include "agent/alert_config.h"
#include "agent/alert_hub.h"
#include "agent/http_server.h"
#include "agent/store_history_source.h"
#include "cli/commands.h"
#include "cli/sources.h"
#include "common/text.h"
#include "health/catalog_event_grader.h"
#include "health/detectors/trend_detectors.h"
#include "health/health_config.h"
#include "health/rules.h"
#include "host/command_runner.h"
#include "host/host_signals.h"
#include "logs/catalog.h"
#include "logs/follow.h"
#include "store/snapshot_samples.h"
#include "store/sqlite_store.h"

namespace gpudoctor {
namespace {

constexpr auto kMaintainEvery = std::chrono::minutes(1);

struct AgentOptions {
  std::string interval = "5s";
  std::string db_path = kDefaultHistoryDatabase;
  std::string listen{kDefaultListenAddress};
  std::string token;
  std::string token_file;
  bool dcgm_names = false;
  bool alerts_dry_run = false;
  std::string log_path;  // empty: the live kernel log; "none": no log
  bool once = false;
  std::string duration;  // empty: until a signal
};

void Say(const std::string& line) { std::fprintf(stderr, "gpudoctor agent: %s\n", line.c_str()); }

// ---------------------------------------------------------------------------
// Signals, delivered as bytes on a pipe so the loop can wait on them.

int g_signal_write_fd = -1;

extern "C" void WriteSignalByte(int signal_number) {
  const int saved_errno = errno;
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  [[maybe_unused]] ssize_t ignored = write(g_signal_write_fd, &byte, 1);
  errno = saved_errno;
}

class SignalPipe {
 public:
  Status Install() {
    if (pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) return Error{std::string("pipe: ") + std::strerror(errno)};
    g_signal_write_fd = fds_[1];
    struct sigaction action {};
    action.sa_handler = WriteSignalByte;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int signal_number : {SIGTERM, SIGINT, SIGHUP}) sigaction(signal_number, &action, nullptr);
    return {};
  }
  ~SignalPipe() {
    if (fds_[0] < 0) return;
    struct sigaction action {};
    action.sa_handler = SIG_DFL;
    for (int signal_number : {SIGTERM, SIGINT, SIGHUP}) sigaction(signal_number, &action, nullptr);
    g_signal_write_fd = -1;
    close(fds_[0]);
    close(fds_[1]);
  }
  // The next signal received within `timeout`, or 0.
  int Wait(Duration timeout) {
    pollfd fd{.fd = fds_[0], .events = POLLIN, .revents = 0};
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
    if (poll(&fd, 1, static_cast<int>(std::clamp<int64_t>(ms, 0, 60'000))) <= 0) return 0;
    unsigned char byte = 0;
    return read(fds_[0], &byte, 1) == 1 ? byte : 0;
  }

 private:
  int fds_[2] = {-1, -1};
};

// ---------------------------------------------------------------------------
// Configuration: the one --config file feeds the rules, detectors and alerts.

struct AgentConfig {
  HealthConfig health;
  TrendConfig trends;
  AlertConfig alerts;
};

// Why a file an option names cannot be read (exit 66), or nothing.
std::optional<std::string> Unreadable(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) return "is a directory";
  if (access(path.c_str(), R_OK) != 0) return std::strerror(errno);
  return std::nullopt;
}

// Reads `path` once for all three parts, so a reload never mixes two
// versions of the file. Empty `path`: every default.
Result<AgentConfig> LoadAgentConfig(const std::string& path) {
  AgentConfig config{.health = DefaultHealthConfig()};
  if (path.empty()) return config;
  if (auto why = Unreadable(path)) return Error{fmt::format("cannot read config file {}: {}", path, *why)};
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();  // an empty file reads as "": every default
  auto health = ApplyHealthConfig(DefaultHealthConfig(), text.str(), path);
  if (!health) return health.error();
  auto trends = ParseTrendConfig(text.str());
  if (!trends) return Error{path + ": " + trends.error().message};
  auto alerts = ParseAlertConfig(text.str());
  if (!alerts) return Error{path + ": " + alerts.error().message};
  config.health = std::move(*health);
  config.trends = std::move(*trends);
  config.alerts = std::move(*alerts);
  return config;
}

// ---------------------------------------------------------------------------
// The kernel log, followed on its own thread; the loop takes what arrived.

class KernelLogFollower {
 public:
  // `path` empty: the live kernel log, when this machine has a readable one.
  explicit KernelLogFollower(std::string path) : path_(std::move(path)) {}
  ~KernelLogFollower() { Stop(); }

  // Starts following, or returns an error saying why nothing is followed.
  // A file is announced once it is open: lines appended after "following
  // FILE" are never missed.
  Status Start() {
    std::optional<LiveLog> live;
    if (path_.empty()) {
      std::vector<std::string> notes;
      auto found = FindLiveLog(&notes);
      if (!found) return found.error();
      live = *found;
      Say("following " + live->description);
    } else if (std::error_code error; !std::filesystem::exists(path_, error)) {
      Say("waiting for " + path_ + " to appear");
    }
    thread_ = std::thread([this, live] {
      const EventSink sink = [this](LogEvent&& event) {
        std::lock_guard lock(mutex_);
        events_.push_back(std::move(event));
      };
      const StopRequested stop = [this] { return stop_.load(); };
      FollowOptions follow;
      follow.start_at_end = true;
      Status status;
      if (live) {
        status = ReadLiveLog(*live, ReadOptions{}, true, follow, sink, stop);
      } else {
        follow.on_open = [this, announced = false]() mutable {
          if (!std::exchange(announced, true)) Say("following " + path_);
        };
        status = FollowFile(path_, ReadOptions{}, follow, sink, stop);
      }
      if (!status) Say("kernel log: " + status.error().message);
    });
    return {};
  }

  std::vector<LogEvent> TakeEvents() {
    std::lock_guard lock(mutex_);
    return std::exchange(events_, {});
  }

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::string path_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<LogEvent> events_;
};

// ---------------------------------------------------------------------------
// One sampling cycle after another.

class AgentLoop {
 public:
  AgentLoop(SnapshotSource& source, HistoryStore& store, AgentState& state, AlertHub& alerts, AgentConfig config,
            KernelLogFollower* log)
      : source_(source),
        store_(store),
        state_(state),
        alerts_(alerts),
        config_(std::move(config)),
        detectors_(config_.trends),
        log_(log),
        host_env_("/", runner_),
        grader_(LogCatalog::Builtin()) {}

  // The rules read config_ afresh every cycle. The trend detectors keep
  // what they have observed and judge it by the new thresholds from the next
  // cycle on (TrendDetectors::Reconfigure), so a reload neither resolves nor
  // re-opens a finding that still holds.
  void Reconfigure(AgentConfig config) {
    config_ = std::move(config);
    detectors_.Reconfigure(config_.trends);
  }

  void RunCycle() {
    // The snapshot before the last is refilled in place when nothing else
    // holds it any more (the dashboard may, while it answers a request).
    std::shared_ptr<Snapshot> snapshot =
        spare_ && spare_.use_count() == 1 ? std::move(spare_) : std::make_shared<Snapshot>();
    spare_.reset();
    source_.CollectInto(*snapshot);
    const WallTime now = SystemClock::Instance().Now();
    HostSignals host = CollectHostSignals(config_.health.host, host_env_);
    TakeLogEvents(*snapshot, now);

    HealthInput input{.snapshot = snapshot.get(),
                      .previous = previous_.get(),
                      .host = &host,
                      .log_events = log_ ? &recent_events_ : nullptr,
                      .event_grader = &grader_,
                      .now = now};
    std::vector<Finding> findings = EvaluateRules(input, config_.health);
    detectors_.Observe(*snapshot, now);
    for (Finding& finding : detectors_.Evaluate(now)) findings.push_back(std::move(finding));
    std::erase_if(findings, [](const Finding& f) { return f.severity == Severity::kOk; });

    if (Status stored = AppendSnapshot(store_, *snapshot); !stored) Say("storing samples: " + stored.error().message);
    // Durable before alerting: an alert never names an incident a crash could lose.
    auto transitions = store_.UpsertFindings(findings, now);
    if (!transitions) Say("storing findings: " + transitions.error().message);
    alerts_.Submit(transitions ? *transitions : std::vector<FindingTransition>{});

    state_.PublishSnapshot(snapshot);
    auto open = store_.QueryFindings({.from = now, .until = now + std::chrono::milliseconds(1), .open_only = true});
    if (open) state_.SetOpenFindings(std::move(*open));
    spare_ = std::move(previous_);
    previous_ = std::move(snapshot);
    open_findings_ = open ? open->size() : 0;

    if (now - last_maintained_ >= kMaintainEvery || maintain_more_) {
      auto report = store_.Maintain(now);
      if (!report) Say("store maintenance: " + report.error().message);
      maintain_more_ = report && report->more_work;
      last_maintained_ = now;
    }
  }

  size_t open_findings() const { return open_findings_; }
  size_t gpu_count() const { return previous_ ? previous_->gpus.size() : 0; }

 private:
  // Adds the new log events to the window the log rules judge, and counts
  // their Xids against the GPU on that bus.
  void TakeLogEvents(const Snapshot& snapshot, WallTime now) {
    if (!log_) return;
    for (LogEvent& event : log_->TakeEvents()) {
      if (event.xid) {
        auto bus = NormalizePciBusId(event.pci_bus_id);
        for (const GpuSnapshot& gpu : snapshot.gpus) {
          if (bus && gpu.pci_bus_id.has_value() && NormalizePciBusId(gpu.pci_bus_id.value()) == bus)
            state_.RecordXid(gpu.index, *event.xid, now);
        }
      }
      recent_events_.push_back(std::move(event));
    }
    const Duration window = std::max(config_.health.thresholds.xid_recent.window,
                                     config_.health.thresholds.log_errors.window);
    std::erase_if(recent_events_, [&](const LogEvent& e) { return e.time && *e.time < now - window; });
  }

  SnapshotSource& source_;
  HistoryStore& store_;
  AgentState& state_;
  AlertHub& alerts_;
  AgentConfig config_;
  TrendDetectors detectors_;
  KernelLogFollower* log_;
  SubprocessRunner runner_;
  LinuxHostEnv host_env_;
  CatalogEventGrader grader_;
  std::shared_ptr<Snapshot> previous_;
  std::shared_ptr<Snapshot> spare_;  // the one before previous_, for the next cycle to refill
  std::vector<LogEvent> recent_events_;
  WallTime last_maintained_{};
  bool maintain_more_ = false;
  size_t open_findings_ = 0;
};

// ---------------------------------------------------------------------------

int RunAgent(CommandContext& context, const AgentOptions& options) {
  auto interval = ParseDuration(options.interval);
  if (!interval || *interval < std::chrono::seconds(1)) {
    Say("--interval must be a duration of at least 1s (e.g. 5s), not '" + options.interval + "'");
    return exit_code::kUsage;
  }
  std::optional<Duration> duration;
  if (!options.duration.empty()) {
    duration = ParseDuration(options.duration);
    if (!duration) {
      Say("--duration must be a duration (e.g. 60s), not '" + options.duration + "'");
      return exit_code::kUsage;
    }
  }
  auto listen = ParseListenAddress(options.listen);
  if (!listen) {
    Say("--listen: " + listen.error().message);
    return exit_code::kUsage;
  }
  // Read once, at start. Unlike --token, a token in a file does not show in `ps`.
  std::optional<std::string> token;
  if (!options.token.empty()) token = options.token;
  if (!options.token_file.empty()) {
    if (auto why = Unreadable(options.token_file)) {
      Say(fmt::format("--token-file: cannot read {}: {}", options.token_file, *why));
      return exit_code::kNoInput;
    }
    auto read = ReadBearerTokenFile(options.token_file);
    if (!read) {
      Say("--token-file: " + read.error().message);
      return exit_code::kDataError;
    }
    token = std::move(*read);
  }
  const std::string& config_path = context.options.config_path;
  if (auto why = config_path.empty() ? std::nullopt : Unreadable(config_path)) {
    Say(fmt::format("--config: cannot read {}: {}", config_path, *why));
    return exit_code::kNoInput;
  }
  auto config = LoadAgentConfig(config_path);
  if (!config) {
    Say(config.error().message);
    return exit_code::kDataError;
  }

  std::error_code ec;
  const auto db_dir = std::filesystem::path(options.db_path).parent_path();
  if (!db_dir.empty()) std::filesystem::create_directories(db_dir, ec);
  if (ec) {
    Say(fmt::format("cannot create {}: {}", db_dir.string(), ec.message()));
    return exit_code::kCannotCreate;
  }
  SqliteStoreOptions store_options;
  auto store = SqliteHistoryStore::Open(options.db_path, store_options);
  if (!store) {
    Say(fmt::format("cannot open history {}: {}", options.db_path, store.error().message));
    return exit_code::kCannotCreate;
  }

  auto made = MakeSnapshotSource(context, "");
  if (made.error) {
    Say(made.error->message);
    return made.error->exit_code;
  }

  SignalPipe signals;
  if (Status installed = signals.Install(); !installed) {
    Say(installed.error().message);
    return exit_code::kInternal;
  }

  std::unique_ptr<KernelLogFollower> log;
  if (options.log_path != "none") {
    log = std::make_unique<KernelLogFollower>(options.log_path);
    if (Status followed = log->Start(); !followed) {
      Say("not following the kernel log: " + followed.error().message);
      log.reset();
    }
  }

  char hostname[256] = {};
  gethostname(hostname, sizeof hostname - 1);
  AlertHub alerts(SystemClock::Instance());
  if (Status configured = alerts.Configure(config->alerts, options.alerts_dry_run, hostname); !configured) {
    Say("alerts: " + configured.error().message);
    return exit_code::kDataError;
  }

  AgentState state(SystemClock::Instance().Now());
  StoreHistorySource history(**store);
  HttpServerOptions server_options;
  server_options.listen = *listen;
  server_options.bearer_token = token;
  server_options.dcgm_compatible_metrics = options.dcgm_names;
  server_options.stale_after = std::max<Duration>(std::chrono::seconds(15), 3 * *interval);
  server_options.version = GPUDOCTOR_VERSION;
  HttpServer server({.view = state, .history = &history, .alert_counters = [&alerts] { return alerts.Counters(); }},
                    server_options, SystemClock::Instance());

  AgentLoop loop(*made.source, **store, state, alerts, std::move(*config), log.get());
  if (options.once) {
    loop.RunCycle();
    Say(fmt::format("sampled {} GPUs ({}); {} open findings", loop.gpu_count(), made.description,
                    loop.open_findings()));
    alerts.Stop();
    return exit_code::kOk;
  }

  auto port = server.Start();
  if (!port) {
    Say(fmt::format("cannot listen on {}: {}", options.listen, port.error().message));
    return exit_code::kUnavailable;
  }
  Say(fmt::format("sampling {} every {}, history in {}", made.description, FormatDuration(*interval),
                  options.db_path));
  Say(fmt::format("listening on http://{}:{}/", listen->host, *port));

  const auto started = std::chrono::steady_clock::now();
  auto next = started;
  for (;;) {
    if (duration && std::chrono::steady_clock::now() - started >= *duration) break;
    loop.RunCycle();
    next += *interval;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;  // a slow cycle skips samples rather than bursting
    int signal_number = 0;
    while (signal_number == 0 && std::chrono::steady_clock::now() < next) {
      signal_number = signals.Wait(next - std::chrono::steady_clock::now());
    }
    if (signal_number == SIGHUP) {
      // All or nothing: the alert sinks are the last part that can fail.
      auto reloaded = LoadAgentConfig(config_path);
      Status applied = reloaded ? alerts.Configure(reloaded->alerts, options.alerts_dry_run, hostname)
                                : Status(reloaded.error());
      if (!applied) {
        Say("config not reloaded, keeping the old one: " + applied.error().message);
      } else {
        loop.Reconfigure(std::move(*reloaded));
        Say(config_path.empty() ? "config reloaded (no --config: the defaults)"
                                : "config reloaded from " + config_path);
      }
    } else if (signal_number != 0) {
      Say(fmt::format("stopping ({})", strsignal(signal_number)));
      break;
    }
  }
  server.Stop();
  if (log) log->Stop();
  alerts.Stop();
  return exit_code::kOk;
}

}  // namespace

void RegisterAgentCommand(CLI::App& app, CommandContext& context) {
  auto* command = app.add_subcommand("agent", "Watch the GPUs continuously: history, trends, alerts, metrics, dashboard");
  auto options = std::make_shared<AgentOptions>();
  command->add_option("--interval", options->interval, "Time between samples (at least 1s)")->capture_default_str();
  command->add_option("--db", options->db_path, "History database (SQLite); its directory is created")
      ->capture_default_str();
  command->add_option("--listen", options->listen, "HTTP address: HOST:PORT, [IPv6]:PORT or :PORT (port 0: any)")
      ->capture_default_str();
  auto* token = command->add_option("--token", options->token,
                                     "Require 'Authorization: Bearer TOKEN' (not for /healthz); prefer --token-file, "
                                     "as a token on the command line shows in `ps`")
                     ->envname("GPUDOCTOR_TOKEN");
  command->add_option("--token-file", options->token_file,
                      "Read the bearer token from the first line of this file (read once, at start)")
      ->excludes(token);
  command->add_flag("--dcgm-names", options->dcgm_names, "Also serve dcgm-exporter metric names on /metrics");
  command->add_flag("--alerts-dry-run", options->alerts_dry_run, "Log alerts instead of sending them");
  command->add_option("--log", options->log_path,
                      "Kernel log file to follow; default: the live kernel log; 'none': no log");
  command->add_flag("--once", options->once, "Run one sampling cycle and exit (no HTTP server)");
  command->add_option("--duration", options->duration, "Stop after this long (e.g. 60s)");
  command->footer(
      "Serves /metrics (Prometheus), /api/v1/ (JSON), /healthz and a dashboard at /.\n"
      "SIGTERM or SIGINT stop it; SIGHUP reloads --config (rules, [detectors], [alerts]).\n"
      "Exit status: 0 after a clean stop, 64 bad options, 65 bad config or empty token file,\n"
      "66 config or token file missing or unreadable, 69 cannot listen or no NVML,\n"
      "73 the history database cannot be created.");
  command->callback([&context, options] { context.exit_code = RunAgent(context, *options); });
}

}  // namespace gpudoctor
