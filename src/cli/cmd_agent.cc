// `gpudoctor agent`: watches the GPUs continuously. Parses its options,
// reads the config, and runs AgentLoop (src/agent/agent_loop.h) every
// interval, with the HTTP server, the alerts and the kernel-log follower
// around it. The history is a record, not a gate (agent/history_recorder.h).
//
//   gpudoctor agent --simulate examples/healthy-8xh100.toml --interval 1s --db /tmp/h.db
//
// SIGTERM / SIGINT stop it cleanly; SIGHUP reloads its config. Signals reach
// the loop through a self-pipe: the handler only writes one byte.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "agent/agent_loop.h"
#include "agent/agent_state.h"
#include "agent/alert_config.h"
#include "agent/alert_hub.h"
#include "agent/diag_schedule.h"
#include "agent/history_recorder.h"
#include "agent/http_server.h"
#include "agent/kernel_log_follower.h"
#include "agent/store_history_source.h"
#include "cli/commands.h"
#include "cli/config_file.h"
#include "cli/sources.h"
#include "cli/version.h"
#include "common/input_file.h"
#include "common/text.h"
#include "health/detectors/trend_detectors.h"
#include "health/health_config.h"
#include "host/boot_identity.h"
#include "host/command_runner.h"
#include "host/host_env.h"
#include "host/machine_identity.h"

namespace gpudoctor {
namespace {

struct AgentOptions {
  std::string interval = "5s";
  std::string db_path = kDefaultHistoryDatabase;
  std::string listen{kDefaultListenAddress};
  std::string token;
  std::string token_file;
  bool dcgm_names = false;
  std::string dcgm_hostname_label = "Hostname";
  bool alerts_dry_run = false;
  std::string log_path;  // empty: the live kernel log; "none": no log
  bool once = false;
  std::string duration;  // empty: until a signal
  std::string hostname;  // empty: the machine's own
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
// Configuration: the one config file (cli/config_file.h) feeds the rules, detectors and alerts.

// Why a file an option names cannot be opened under the input rule (exit 66), or nothing.
std::optional<std::string> Unreadable(const std::string& path) {
  auto file = InputFile::Open(path);
  if (file) return std::nullopt;
  return file.error().message.substr(path.size() + 2);  // the reason, after "PATH: "
}

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
  auto listen = ParseListenAddress(options.listen, kDefaultHttpPort);
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
    Say(fmt::format("{}: cannot read {}: {}", context.options.config_label, config_path, *why));
    return exit_code::kNoInput;
  }
  auto config = LoadFullConfig(config_path);
  if (!config) {
    Say(config.error().message);
    return exit_code::kDataError;
  }

  // Under --simulate the whole agent keeps the scenario's time: its detectors'
  // windows, the findings' times, alert timing and the freshness of samples.
  auto made = MakeSnapshotSource(context, SnapshotTiming::kScenario);
  if (made.error) {
    Say(made.error->message);
    return made.error->exit_code;
  }
  const Clock& clock = made.clock();
  if (made.scenario_clock) {
    const Duration gap = std::chrono::duration_cast<Duration>(*interval * made.time_scale());
    Say(fmt::format("scenario time runs at {}x: a sample every {} of it", made.time_scale(), FormatDuration(gap)));
    if (gap > config->trends.max_sample_gap) {
      Say(fmt::format("that is more than [detectors] max_sample_gap ({}), so what must hold for a while "
                      "(utilization_stuck, gpu_straggler) never does; sample more often (--interval 1s) or slow "
                      "the scenario (GPUDOCTOR_FAKE_TIME_SCALE)",
                      FormatDuration(config->trends.max_sample_gap)));
    }
  }

  SignalPipe signals;
  if (Status installed = signals.Install(); !installed) {
    Say(installed.error().message);
    return exit_code::kInternal;
  }

  std::unique_ptr<KernelLogFollower> log;
  if (options.log_path != "none") {
    log = std::make_unique<KernelLogFollower>(options.log_path, Say);
    if (Status followed = log->Start(); !followed) {
      Say("not following the kernel log: " + followed.error().message);
      log.reset();
    }
  }

  std::string hostname = options.hostname;
  if (hostname.empty()) {
    char own[256] = {};
    gethostname(own, sizeof own - 1);
    hostname = own;
  }
  AlertHub alerts(clock);
  if (Status configured = alerts.Configure(config->alerts, options.alerts_dry_run, hostname); !configured) {
    Say("alerts: " + configured.error().message);
    return exit_code::kDataError;
  }

  // The history is a record, not a gate: when it cannot be opened or written
  // the agent goes on, reports history_store_failing and keeps trying.
  // The boot, so an Xid that comes back after a reboot is seen to have outlived it.
  SubprocessRunner runner;
  LinuxHostEnv host_env("/", runner);
  std::optional<BootRecord> boot;
  if (auto identity = ReadBootIdentity(host_env)) boot = BootRecord{identity->boot_id, identity->booted_at};
  else Say("reboots are not recorded: " + identity.error().message);
  HistoryRecorder history(OpenSqliteHistory(options.db_path), {.path = options.db_path, .boot = boot});
  AgentState state(clock.Now());
  StoreHistorySource history_source([&history] { return history.store(); });
  HttpServerOptions server_options;
  server_options.listen = *listen;
  server_options.bearer_token = token;
  server_options.dcgm_compatible_metrics = options.dcgm_names;
  server_options.dcgm_hostname_label = options.dcgm_hostname_label;
  server_options.stale_after = std::chrono::duration_cast<Duration>(
      std::max<Duration>(std::chrono::seconds(15), 3 * *interval) * made.time_scale());
  const VersionDescription build = DescribeThisBuild();
  server_options.version = std::string(build.build.version);
  server_options.build_labels = BuildInfoLabels(build);
  server_options.machine = ReadMachineIdentity(host_env);
  HttpServer server(
      {.view = state, .history = &history_source, .alert_counters = [&alerts] { return alerts.Counters(); }},
      server_options, clock);

  // Scheduled diagnostics: `gpudoctor diag` as a child, with the options that chose these GPUs.
  const GlobalOptions& global = context.options;
  std::vector<std::string> diag_command = {context.executable_path};
  if (!global.nvml_library.empty()) diag_command.insert(diag_command.end(), {"--nvml-lib", global.nvml_library});
  if (!global.simulate.empty()) diag_command.insert(diag_command.end(), {"--simulate", global.simulate});
  ChildDiagLauncher diag_launcher(diag_command, options.db_path);
  DiagScheduler diag_scheduler(config->diag, diag_launcher, SystemClock::Instance().Now(), Say);
  if (config->diag.kind != DiagScheduleConfig::Kind::kOff && !options.once) {
    Say(fmt::format("diag --level {} scheduled {} on idle GPUs", config->diag.level,
                    DescribeDiagSchedule(config->diag)));
  }

  AgentLoop loop({.source = *made.source,
                  .history = history,
                  .state = state,
                  .alerts = alerts,
                  .log = log.get(),
                  .host = host_env,
                  .clock = clock,
                  .note = Say,
                  .hostname = options.hostname,
                  .diag = options.once ? nullptr : &diag_scheduler},
                 std::move(*config));
  if (options.once) {
    loop.RunCycle();
    Say(fmt::format("sampled {} GPUs ({}); {} open findings", loop.gpu_count(), made.description,
                    loop.open_findings()));
    alerts.Stop();
    // One cycle is all there is: its record must be stored, or the run failed.
    if (history.Flush(clock.Now()) > 0 || !history.health().ok) {
      Say(fmt::format("the history {} was not written: {}", options.db_path, history.health().last_error));
      return exit_code::kCannotCreate;
    }
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
      auto reloaded = LoadFullConfig(config_path);
      Status applied = reloaded ? alerts.Configure(reloaded->alerts, options.alerts_dry_run, hostname)
                                : Status(reloaded.error());
      if (!applied) {
        Say("config not reloaded, keeping the old one: " + applied.error().message);
      } else {
        loop.Reconfigure(std::move(*reloaded));
        Say(config_path.empty() ? "config reloaded (no config file: the defaults)"
                                : "config reloaded from " + config_path);
      }
    } else if (signal_number != 0) {
      Say(fmt::format("stopping ({})", strsignal(signal_number)));
      break;
    }
  }
  server.Stop();
  diag_launcher.Stop();  // a scheduled run under way is interrupted: its GPUs are freed
  if (log) log->Stop();
  alerts.Stop();
  if (size_t unwritten = history.Flush(clock.Now()); unwritten > 0) {
    Say(fmt::format("{} writes could not be stored in {}: {}", unwritten, options.db_path,
                    history.health().last_error));
  }
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
  command->add_option("--dcgm-hostname-label", options->dcgm_hostname_label,
                      "The host label of the dcgm-exporter names: Hostname (released dcgm-exporter) or hostname "
                      "(its main branch)")
      ->check(CLI::IsMember({"Hostname", "hostname"}))
      ->capture_default_str();
  command->add_flag("--alerts-dry-run", options->alerts_dry_run, "Log alerts instead of sending them");
  command->add_option("--log", options->log_path,
                      "Kernel log file to follow; default: the live kernel log; 'none': no log");
  command->add_flag("--once", options->once, "Run one sampling cycle and exit (no HTTP server)");
  command->add_option("--duration", options->duration, "Stop after this long (e.g. 60s)");
  command->add_option("--hostname", options->hostname,
                      "Name this host reports in metrics, alerts and the fleet view; default: the machine's "
                      "own (gethostname), which may be short where the fleet knows the FQDN");
  command->footer(
      "Serves /metrics (Prometheus), /api/v1/ (JSON), /healthz and a dashboard at /.\n"
      "SIGTERM or SIGINT stop it; SIGHUP reloads the config file (rules, [detectors], [alerts], [diag]).\n"
      "[diag] schedule = \"daily 03:00\" (or \"24h\"), level = 1 runs `gpudoctor diag --level N` on the idle\n"
      "GPUs (no compute process), one run at a time, its results kept in the history (docs/agent.md).\n"
      "The history (--db) is a record, not a gate: when it cannot be opened or written, sampling,\n"
      "findings, alerts and metrics go on, history_store_failing is reported and writes wait in memory.\n"
      "Exit status: 0 after a clean stop, 64 bad options, 65 bad config or empty token file,\n"
      "66 config or token file missing or unreadable, 69 cannot listen or no NVML,\n"
      "73 with --once, when the cycle could not be stored in the history.");
  command->callback([&context, options] { context.exit_code = RunAgent(context, *options); });
}

}  // namespace gpudoctor
