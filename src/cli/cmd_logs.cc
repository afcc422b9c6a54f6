// `gpudoctor logs [FILE...|-]`: GPU and host events in kernel and system logs,
// grouped by GPU and incident with their cause and the action to take.
//
//   gpudoctor logs /var/log/kern.log            incidents, grouped by GPU
//   gpudoctor logs --json kern.log.2.gz          one JSON event per line
//   gpudoctor logs --follow                      this machine's live kernel log

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/sources.h"
#include "cli/terminal.h"
#include "common/suggest.h"
#include "common/text.h"
#include "host/command_runner.h"
#include "host/host_signals.h"
#include "logs/bug_report.h"
#include "logs/event_json.h"
#include "logs/follow.h"
#include "logs/incidents.h"
#include "logs/log_reader.h"
#include "logs/log_time.h"
#include "logs/pci_device_names.h"

namespace gpudoctor {
namespace {

struct LogsOptions {
  std::vector<std::string> files;
  bool follow = false;
  std::string since, until;
  bool incidents = false;  // --json: incidents instead of events
  bool events = false;     // human: one line per event
  std::string min_severity = "info";
  std::vector<std::string> kinds;
  int year = 0;
  std::string zone = "local";
  std::string window = "5m";
  std::string catalog_path;
};

std::atomic<bool> g_interrupted{false};

void OnInterrupt(int) { g_interrupted = true; }

// Ctrl-C ends --follow cleanly.
void CatchInterrupts() {
  struct sigaction action {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

Severity ToFindingSeverity(EventSeverity severity) {
  switch (severity) {
    case EventSeverity::kCritical: return Severity::kCritical;
    case EventSeverity::kWarning: return Severity::kWarning;
    case EventSeverity::kInfo: return Severity::kOk;
  }
  return Severity::kOk;
}

std::string SeverityLabel(const Style& style, EventSeverity severity) {
  if (severity == EventSeverity::kInfo) return style.Dim("INFO    ");
  std::string label = style.Severity(ToFindingSeverity(severity));
  return label + std::string(severity == EventSeverity::kWarning ? 1 : 0, ' ');
}

std::optional<int> ParseZone(const std::string& zone) {
  if (zone == "local") return LocalUtcOffsetMinutes(SystemClock::Instance().Now());
  if (zone == "UTC" || zone == "utc" || zone == "Z") return 0;
  if (zone.size() >= 3 && (zone[0] == '+' || zone[0] == '-')) {
    std::string digits;
    for (char c : zone.substr(1)) {
      if (c != ':') digits.push_back(c);
    }
    auto hours = ParseInt<int>(digits.substr(0, 2));
    auto minutes = digits.size() > 2 ? ParseInt<int>(digits.substr(2)) : std::optional<int>(0);
    if (hours && minutes && *hours <= 14 && *minutes < 60) return (zone[0] == '-' ? -1 : 1) * (*hours * 60 + *minutes);
  }
  return std::nullopt;
}

class EventFilter {
 public:
  EventSeverity min_severity = EventSeverity::kInfo;
  std::set<std::string> kinds;
  std::optional<WallTime> since, until;

  // Events the log gives no wall time for are kept: the range cannot exclude them.
  bool Keep(const LogEvent& event) const {
    if (event.severity < min_severity) return false;
    if (!kinds.empty() && !kinds.count(event.kind)) return false;
    if (event.time && since && *event.time < *since) return false;
    if (event.time && until && *event.time > *until) return false;
    return true;
  }
};

// Writes events as JSON lines to standard output, gathered and written a batch at a time: one write through the
// terminal guard per 256 KiB instead of one stdio call per line and one guarded write per 8 KiB (a tenth of
// `logs --json`'s CPU at 10% event lines, docs/benchmarks.md). Flush before anything else is said, and after an
// event that must be seen at once (--follow).
class JsonLineWriter {
 public:
  explicit JsonLineWriter(const LogCatalog& catalog) : catalog_(catalog) {}
  JsonLineWriter(const JsonLineWriter&) = delete;
  JsonLineWriter& operator=(const JsonLineWriter&) = delete;
  ~JsonLineWriter() { Flush(); }

  void Write(const LogEvent& event) {
    if (batch_.capacity() < kBatchBytes) batch_.reserve(kBatchBytes + kBatchBytes / 8);  // a line seldom passes 32 KiB
    AppendLogEventJsonLine(batch_, event, catalog_);
    batch_.push_back('\n');
    if (batch_.size() >= kBatchBytes) Flush();
  }
  void Flush() {
    if (batch_.empty()) return;
    std::fwrite(batch_.data(), 1, batch_.size(), stdout);
    batch_.clear();
  }

 private:
  static constexpr size_t kBatchBytes = 256 * 1024;
  const LogCatalog& catalog_;
  std::string batch_;  // reused: one allocation for the whole log
};

std::string WhenText(const LogEvent& event) {
  if (event.time) return FormatIsoUtc(*event.time);
  if (event.uptime_seconds) return fmt::format("uptime {:.6f}", *event.uptime_seconds);
  return "time unknown";
}

std::string EventLine(const Style& style, const LogEvent& event, const LogCatalog& catalog) {
  std::string line = fmt::format("{}  {}  {}", WhenText(event), SeverityLabel(style, event.severity),
                                 style.Bold(catalog.TitleOf(event)));
  if (!event.pci_bus_id.empty()) line += "  " + event.pci_bus_id;
  if (event.pid) line += fmt::format("  pid {}", *event.pid);
  if (!event.process.empty()) line += " (" + event.process + ")";
  if (!event.detail.empty()) line += "  " + style.Dim(event.detail);
  line += "\n    " + style.Dim(fmt::format("{}:{}", event.source, event.line_number));
  return line;
}

std::string RangeText(const Incident& incident) {
  if (incident.first_time && incident.last_time && *incident.first_time != *incident.last_time) {
    return FormatIsoUtc(*incident.first_time) + " .. " + FormatIsoUtc(*incident.last_time);
  }
  if (incident.first_time) return FormatIsoUtc(*incident.first_time);
  if (incident.first_uptime && incident.last_uptime && *incident.first_uptime != *incident.last_uptime) {
    return fmt::format("uptime {:.3f}s .. {:.3f}s", *incident.first_uptime, *incident.last_uptime);
  }
  if (incident.first_uptime) return fmt::format("uptime {:.3f}s", *incident.first_uptime);
  return fmt::format("lines {}..{}", incident.first_line, incident.last_line);
}

std::string SubjectHeading(const Incident& incident, const PciDeviceNames& devices) {
  if (incident.subject == "host") return "Host" + (incident.host.empty() ? "" : " " + incident.host);
  if (incident.subject == "nvidia driver") return "NVIDIA driver (no GPU named)";
  std::string heading = incident.pci_bus_id.empty() ? "GPU " + incident.subject
                                                    : devices.Name(incident.pci_bus_id, incident.examples);
  if (!incident.gpu_uuid.empty()) heading += "  " + incident.gpu_uuid;
  if (!incident.gpu_serial.empty()) heading += "  serial " + incident.gpu_serial;
  if (!incident.host.empty()) heading += "  on " + incident.host;
  return heading;
}

void PrintIncidents(const Style& style, const std::vector<Incident>& incidents, const LogCatalog& catalog,
                    const PciDeviceNames& devices) {
  // Grouped by subject, each group in the order of its first incident.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const Incident*>> by_subject;
  for (const Incident& incident : incidents) {
    std::string key = incident.subject + "|" + incident.host;
    if (!by_subject.count(key)) order.push_back(key);
    by_subject[key].push_back(&incident);
  }
  for (const std::string& key : order) {
    const auto& group = by_subject[key];
    std::printf("\n%s\n", style.Bold(SubjectHeading(*group.front(), devices)).c_str());
    for (const Incident* incident : group) {
      Advice advice = AdviceFor(incident->headline, catalog);
      std::string chain;
      for (const std::string& label : incident->chain) {
        if (!chain.empty()) chain += " -> ";
        chain += label;
        if (incident->counts.at(label) > 1) chain += fmt::format(" x{}", incident->counts.at(label));
      }
      std::printf("  %s  %s\n", SeverityLabel(style, incident->severity).c_str(), style.Bold(advice.title).c_str());
      std::printf("            %s, %s  (%s)\n",
                  incident->event_count == 1 ? "1 event" : fmt::format("{} events", incident->event_count).c_str(),
                  RangeText(*incident).c_str(), chain.c_str());
      std::printf("            cause:  %s\n", advice.cause.c_str());
      std::printf("            action: %s\n", advice.action.c_str());
      std::printf("            %s\n", style.Dim(incident->headline.raw.substr(0, 200)).c_str());
      std::printf("            %s\n",
                  style.Dim(fmt::format("{}:{}", incident->headline.source, incident->headline.line_number)).c_str());
    }
  }
}

// ", 3 driver errors classified only generically (driver_error)".
std::string GenericDriverNote(const ReadStats& stats) {
  return fmt::format(", {} driver error{} classified only generically (driver_error)", stats.generic_driver_lines,
                     stats.generic_driver_lines == 1 ? "" : "s");
}

void PrintSummary(const std::string& name, const ReadStats& stats) {
  std::string line = fmt::format("{}: {} lines, {} event{}", name, stats.lines, stats.events, stats.events == 1 ? "" : "s");
  if (stats.overlong_lines) line += fmt::format(", {} over-long lines skipped", stats.overlong_lines);
  if (stats.lines_with_nul) line += fmt::format(", {} lines with NUL bytes", stats.lines_with_nul);
  if (stats.invalid_utf8_lines) line += fmt::format(", {} lines not valid UTF-8", stats.invalid_utf8_lines);
  if (stats.generic_driver_lines) line += GenericDriverNote(stats);
  std::fprintf(stderr, "%s\n", line.c_str());
}

// With --json standard output holds events only: the count of driver errors
// classified only generically goes to standard error, and only when there are some.
void PrintJsonSummary(const std::string& name, const ReadStats& stats) {
  if (stats.generic_driver_lines == 0) return;
  std::fprintf(stderr, "gpudoctor logs: %s%s\n", name.c_str(), GenericDriverNote(stats).c_str());
}

PciDeviceNames LivePciDeviceNames() {
  SubprocessRunner runner;
  LinuxHostEnv env("/", runner);
  return PciDeviceNames(ReadPciDevices(env).value_or({}));
}

// Says on standard error what an nvidia-bug-report.sh log held and what was read of it.
void DescribeBugReport(const std::string& file, const BugReportSummary& summary) {
  std::string text = fmt::format("{}: an nvidia-bug-report.sh log", file);
  if (!summary.script_version.empty()) text += " (version " + summary.script_version + ")";
  if (!summary.date.empty()) text += " of " + summary.date;
  text += fmt::format("; read its kernel log sections ({} lines)", summary.kernel_log_lines);
  if (summary.smi_query_lines > 0) text += fmt::format("\n  it holds nvidia-smi -q output: gpudoctor check --from-smi {} judges it", file);
  if (summary.has_debugdump)
    text += "\n  it holds an nvidia-debugdump dump: a binary for NVIDIA support, not decoded here";
  std::fprintf(stderr, "%s\n", text.c_str());
}

// Reads one file named on the command line ("-": standard input) through `sink`;
// an nvidia-bug-report.sh log is read for its kernel log sections only.
Result<ReadStats> ScanNamedLog(const std::string& file, ReadOptions options, const EventSink& sink) {
  options.parse.source = file;
  if (file == "-") return ScanLogFile(file, std::move(options), sink);
  auto opened = InputFile::Open(file);
  if (!opened) return opened.error();
  // A year-less date in a file is dated relative to the file's last change.
  if (!options.parse.prefix.year)
    options.parse.prefix.reference_time = WallTime{std::chrono::seconds{opened->status().st_mtim.tv_sec}};
  auto bug_report = ScanBugReportFile(file, options, sink);
  if (!bug_report) return bug_report.error();
  if (*bug_report) {
    DescribeBugReport(file, (*bug_report)->summary);
    return (*bug_report)->stats;
  }
  return ScanLogFile(std::move(*opened), std::move(options), sink);
}

int RunLogs(const LogsOptions& options, const GlobalOptions& global) {
  const bool json = global.json;
  Style style(global.color, stdout);

  // The catalog: built in, or a replacement file.
  std::shared_ptr<const LineMatcher> matcher = LineMatcher::Builtin();
  if (!options.catalog_path.empty()) {
    InputText text = ReadOptionInput("--catalog", options.catalog_path, kMaxCatalogFileBytes);
    if (text.error) {
      std::fprintf(stderr, "gpudoctor logs: %s\n", text.error->message.c_str());
      return text.error->exit_code;
    }
    auto catalog = LogCatalog::FromToml(text.text, options.catalog_path);
    if (!catalog) {
      std::fprintf(stderr, "gpudoctor logs: %s\n", catalog.error().message.c_str());
      return exit_code::kDataError;
    }
    auto compiled = LineMatcher::Create(std::move(catalog).value());
    if (!compiled) {
      std::fprintf(stderr, "gpudoctor logs: %s: %s\n", options.catalog_path.c_str(), compiled.error().message.c_str());
      return exit_code::kDataError;
    }
    matcher = *compiled;
  }
  const LogCatalog& catalog = matcher->catalog();

  auto zone = ParseZone(options.zone);
  if (!zone) {
    std::fprintf(stderr, "gpudoctor logs: --timezone must be local, UTC or +HH:MM, not %s\n", options.zone.c_str());
    return exit_code::kUsage;
  }
  const WallTime now = SystemClock::Instance().Now();
  EventFilter filter;
  filter.min_severity = EventSeverityFromName(options.min_severity).value_or(EventSeverity::kInfo);
  for (const std::string& kind : options.kinds) {
    if (!catalog.FindKind(kind)) {
      std::vector<std::string> kinds;
      for (const KindInfo& known : catalog.kinds()) kinds.push_back(known.name);
      std::fprintf(stderr, "gpudoctor logs: unknown event kind '%s'.%s (gpudoctor explain lists them)\n", kind.c_str(),
                   DidYouMean(NearestNames(kind, kinds)).c_str());
      return exit_code::kUsage;
    }
    filter.kinds.insert(kind);
  }
  for (auto [text, bound] : {std::pair{&options.since, &filter.since}, std::pair{&options.until, &filter.until}}) {
    if (text->empty()) continue;
    *bound = ParseTimeBound(*text, now, *zone);
    if (!*bound) {
      std::fprintf(stderr, "gpudoctor logs: cannot read time '%s' (use 2024-05-01, 2024-05-01T12:00:00Z or 2h)\n",
                   text->c_str());
      return exit_code::kUsage;
    }
  }
  auto window = ParseDuration(options.window);
  if (!window) {
    std::fprintf(stderr, "gpudoctor logs: --window must be a duration like 5m\n");
    return exit_code::kUsage;
  }
  if (options.follow && options.files.size() > 1) {
    std::fprintf(stderr, "gpudoctor logs: --follow takes at most one file\n");
    return exit_code::kUsage;
  }

  ReadOptions read;
  read.matcher = matcher;
  read.parse.prefix.reference_time = now;
  read.parse.prefix.utc_offset_minutes = *zone;
  if (options.year > 0) read.parse.prefix.year = options.year;

  JsonLineWriter json_lines(catalog);
  auto print_event = [&](const LogEvent& event) {
    if (json) {
      json_lines.Write(event);
      json_lines.Flush();
    } else {
      std::printf("%s\n", EventLine(style, event, catalog).c_str());
    }
    std::fflush(stdout);
  };

  if (options.follow) {
    CatchInterrupts();
    FollowOptions follow;
    auto sink = [&](LogEvent&& event) {
      if (filter.Keep(event)) print_event(event);
    };
    auto stop = [] { return g_interrupted.load(); };
    Status status;
    if (options.files.empty()) {
      std::vector<std::string> notes;
      auto live = FindLiveLog(&notes);
      if (!live) {
        std::fprintf(stderr, "gpudoctor logs: %s\n", live.error().message.c_str());
        return exit_code::kUnavailable;
      }
      std::fprintf(stderr, "Following %s (Ctrl-C to stop)\n", live->description.c_str());
      status = ReadLiveLog(*live, read, /*follow=*/true, follow, sink, stop);
    } else {
      // The file must be there when following starts; only the agent waits for one to appear.
      if (auto file = InputFile::Open(options.files[0]); !file) {
        std::fprintf(stderr, "gpudoctor logs: %s\n", file.error().message.c_str());
        return exit_code::kNoInput;
      }
      std::fprintf(stderr, "Following %s (Ctrl-C to stop)\n", options.files[0].c_str());
      status = FollowFile(options.files[0], read, follow, sink, stop);
    }
    if (!status.ok()) {
      std::fprintf(stderr, "gpudoctor logs: %s\n", status.error().message.c_str());
      return exit_code::kNoInput;
    }
    return exit_code::kOk;
  }

  int exit_status = exit_code::kOk;
  // Events are written, or grouped into incidents, as they are read: memory
  // follows the number of incidents, never the size of the log.
  IncidentGrouper incidents(*window, catalog);
  uint64_t kept = 0;
  auto keep = [&](LogEvent&& event) {
    if (!filter.Keep(event)) return;
    ++kept;
    if (json && !options.incidents) json_lines.Write(event);
    else if (!json && options.events) print_event(event);
    else incidents.Add(event);
  };
  if (options.files.empty()) {
    std::vector<std::string> notes;
    auto live = FindLiveLog(&notes);
    if (!live) {
      std::fprintf(stderr, "gpudoctor logs: %s\n", live.error().message.c_str());
      for (const std::string& note : notes) std::fprintf(stderr, "  %s\n", note.c_str());
      return exit_code::kUnavailable;
    }
    std::fprintf(stderr, "Reading %s\n", live->description.c_str());
    ReadStats stats;
    Status status = ReadLiveLog(*live, read, /*follow=*/false, {}, keep, [] { return false; }, &stats);
    json_lines.Flush();
    if (!status.ok()) {
      std::fprintf(stderr, "gpudoctor logs: %s\n", status.error().message.c_str());
      exit_status = exit_code::kDataError;
    }
    if (!json) PrintSummary(live->path, stats);
    else PrintJsonSummary(live->path, stats);
  }
  // "No events" is said only of a whole read: a file that could not be read is an error, not an empty log.
  bool every_file_read = true;
  for (const std::string& file : options.files) {
    Result<ReadStats> stats = ScanNamedLog(file, read, keep);
    json_lines.Flush();
    if (!stats) {
      std::fprintf(stderr, "gpudoctor logs: %s\n", stats.error().message.c_str());
      exit_status = exit_code::kNoInput;
      every_file_read = false;
      continue;
    }
    if (!stats->error.empty()) {
      std::fprintf(stderr, "gpudoctor logs: %s (events before that point are reported)\n", stats->error.c_str());
      if (exit_status == exit_code::kOk) exit_status = exit_code::kDataError;
    }
    if (!json) PrintSummary(file, *stats);
    else PrintJsonSummary(file, *stats);
  }

  if (json) {
    if (options.incidents) {
      for (const Incident& incident : incidents.Finish()) {
        std::printf("%s\n", JsonLine(IncidentToJson(incident, catalog)).c_str());
      }
    }  // events were written as they were read
  } else if (options.events) {
    // written as they were read
  } else if (kept == 0) {
    if (every_file_read) std::printf("No GPU or host events found.\n");
  } else {
    // This machine's PCI bus names the devices of its own live log; a file
    // may come from another machine, so its lines alone name them.
    const PciDeviceNames devices = options.files.empty() ? LivePciDeviceNames() : PciDeviceNames();
    PrintIncidents(style, incidents.Finish(), catalog, devices);
  }
  return exit_status;
}

}  // namespace

void RegisterLogsCommand(CLI::App& app, CommandContext& context) {
  auto options = std::make_shared<LogsOptions>();
  CLI::App* command = app.add_subcommand(
      "logs", "GPU and host events in kernel and system logs (Xid, fallen off the bus, AER, GSP, hung tasks...)");
  command->add_option("files", options->files,
                      "Log files (dmesg, journalctl, syslog; .gz decoded; - for standard input). "
                      "None: this machine's kernel log (/dev/kmsg, else the journal, else /var/log)");
  command->add_flag("-f,--follow", options->follow, "Keep reading as the log grows (survives rotation)");
  command->add_option("--since", options->since, "Only events at or after: 2024-05-01, 2024-05-01T12:00:00Z, or 2h ago");
  command->add_option("--until", options->until, "Only events at or before (same forms as --since)");
  command->add_flag("--incidents", options->incidents, "With --json: one object per incident instead of per event");
  command->add_flag("--events", options->events, "Human output: one line per event instead of incidents");
  command->add_option("--min-severity", options->min_severity, "Least severity shown: info, warning or critical")
      ->check(CLI::IsMember({"info", "warning", "critical"}))
      ->capture_default_str();
  // One value per --kind, so that "--kind xid FILE" leaves FILE to the files.
  command->add_option("--kind", options->kinds, "Only these event kinds (repeat or comma-separate)")
      ->delimiter(',')
      ->allow_extra_args(false);
  command->add_option("--year", options->year, "Year of syslog dates that give none (default: guessed from the file date)")
      ->check(CLI::Range(1970, 9999));
  command->add_option("--timezone", options->zone,
                      "Zone of timestamps that state none: local (default), UTC or +HH:MM")
      ->capture_default_str();
  command->add_option("--window", options->window, "Events of one GPU this close together form one incident")
      ->capture_default_str();
  command->add_option("--catalog", options->catalog_path, "Event catalog to use instead of the built-in one (TOML)");
  command->footer(
      "Exit codes: 0 read fine (events or not), 64 bad option, 65 a file was only partly readable\n"
      "(truncated .gz) or the catalog is invalid or too large, 66 a file is missing, unreadable or not a\n"
      "regular file (read a pipe as standard input: -), 69 no live kernel log is readable.");
  command->callback([&context, options] { context.exit_code = RunLogs(*options, context.options); });
}

}  // namespace gpudoctor
