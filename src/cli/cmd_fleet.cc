// `gpudoctor fleet`: the fleet views over Prometheus (or a list of agents):
// the weekly checklist for every host, the top offenders, one card's history
// and the card-or-slot verdicts; `--listen` serves the same as a page.
//
//   gpudoctor fleet --prometheus http://prometheus:9090
//   gpudoctor fleet offenders --prometheus http://prometheus:9090 --range 7d
//   gpudoctor fleet gpu 1320621034567 --prometheus http://prometheus:9090
//   gpudoctor fleet --agents agents.txt --json

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <unistd.h>

#include "agent/dashboard_assets.h"
#include "cli/commands.h"
#include "cli/sources.h"
#include "cli/terminal.h"
#include "common/input_file.h"
#include "common/json_text.h"
#include "common/text.h"
#include "fleet/fleet_history.h"
#include "fleet/fleet_json.h"
#include "fleet/fleet_reader.h"
#include "fleet/fleet_views.h"
#include "health/health_config.h"
#include "net/http_access.h"
#include "net/http_transport.h"
#include "redact/secrets.h"

namespace gpudoctor {
namespace {

constexpr int kDefaultFleetPagePort = 9848;

struct FleetOptions {
  std::string prometheus;
  std::string agents_file;
  std::string job = "gpudoctor";
  std::string timeout = "10s";
  std::string token_file;       // sent to Prometheus or the agents
  std::string page_token_file;  // asked of the page's visitors
  std::string range = "7d";
  std::string clean_for = "24h";
  size_t top = 10;
  std::string serial;
  std::string listen;
};

struct Failure {
  int exit_code;
  std::string message;
};

// The token in the file an option names: 66 when it cannot be read, 65 when it is empty.
std::variant<std::string, Failure> ReadTokenOption(const char* option, const std::string& path) {
  InputText text = ReadOptionInput(option, path, kMaxBearerTokenFileBytes);
  if (text.error) return Failure{text.error->exit_code, text.error->message};
  Result<std::string> token = BearerTokenOf(text.text, path);
  if (!token) return Failure{exit_code::kDataError, std::string(option) + ": " + token.error().message};
  return std::move(*token);
}

// Where the fleet's state comes from, resolved once per command.
class FleetSource {
 public:
  // The source, or the exit status and message of why there is none: 64 a
  // --prometheus that is not a URL, 66 an --agents or --token-file that
  // cannot be read, 65 an agents file or token file whose content is wrong.
  static std::variant<std::unique_ptr<FleetSource>, Failure> Open(const FleetOptions& options, Duration timeout) {
    auto source = std::unique_ptr<FleetSource>(new FleetSource());
    source->read_.job = options.job;
    source->read_.timeout = timeout;
    if (!options.token_file.empty()) {
      auto token = ReadTokenOption("--token-file", options.token_file);
      if (Failure* failure = std::get_if<Failure>(&token)) return std::move(*failure);
      source->read_.bearer_token = std::get<std::string>(std::move(token));
    }
    if (!options.prometheus.empty()) {
      auto api = MakeHttpPrometheusApi(options.prometheus, timeout, source->read_.bearer_token);
      if (!api) return Failure{exit_code::kUsage, "--prometheus: " + api.error().message};
      source->api_ = std::move(*api);
      source->description_ = "prometheus " + RedactTextSecrets(options.prometheus);
    } else {
      InputText text = ReadOptionInput("--agents", options.agents_file, 1 << 20);
      if (text.error) return Failure{text.error->exit_code, text.error->message};
      auto urls = ParseAgentsList(text.text, options.agents_file);
      if (!urls) return Failure{exit_code::kDataError, urls.error().message};
      source->agents_ = std::move(*urls);
      source->description_ = fmt::format("{} agents from {}", source->agents_.size(), options.agents_file);
    }
    return source;
  }

  Result<FleetState> Now() {
    read_.at = SystemClock::Instance().Now();
    if (api_) {
      Result<FleetState> state = ReadFleetFromPrometheus(*api_, read_);
      if (state) state->source = description_;
      return state;
    }
    FleetState state = ReadFleetFromAgents(agents_, read_);
    state.source = description_;
    return state;
  }

  // Null history with agents: they keep no fleet-wide record.
  Result<std::optional<FleetHistory>> History(Duration range) {
    if (!api_) return std::optional<FleetHistory>();
    const WallTime now = SystemClock::Instance().Now();
    Result<FleetHistory> history = ReadFleetHistory(*api_, {.job = read_.job, .start = now - range, .end = now});
    if (!history) return history.error();
    return std::optional<FleetHistory>(std::move(*history));
  }

  bool has_history() const { return api_ != nullptr; }
  const std::string& description() const { return description_; }

 private:
  FleetSource() = default;
  std::unique_ptr<PrometheusApi> api_;
  std::vector<std::string> agents_;
  FleetReadOptions read_;
  std::string description_;
};

// ---------------------------------------------------------------------------
// Text.

// One item's mark: passed only when checked and ok.
std::string Mark(const FleetChecklistCell& cell) {
  if (cell.severity == "critical") return "C";
  if (cell.severity == "warning") return "W";
  if (!cell.checked) return "?";
  if (!*cell.checked) return "-";
  return cell.severity == "unknown" ? "U" : ".";
}

// "3 hosts: a, b, c", naming at most five.
std::string HostsText(const std::vector<std::string>& names) {
  constexpr size_t kNamed = 5;
  std::vector<std::string> named(names.begin(), names.begin() + std::min(names.size(), kNamed));
  std::string text = fmt::format("{} host{}: {}", names.size(), names.size() == 1 ? "" : "s", fmt::join(named, ", "));
  if (names.size() > kNamed) text += fmt::format(" and {} more", names.size() - kNamed);
  return text;
}

// The items answering hosts did not check, or whose state is not known: one
// line for each item and reason, naming the hosts.
void PrintNotChecked(const Style& style, const FleetChecklist& checklist) {
  std::map<std::pair<size_t, std::string>, std::vector<std::string>> hosts;
  for (const FleetChecklistRow& row : checklist.rows) {
    if (!row.answering) continue;  // the row says why
    for (size_t i = 0; i < row.items.size(); ++i) {
      const FleetChecklistCell& cell = row.items[i];
      if (cell.checked != true) hosts[{i, cell.summary}].push_back(row.hostname);
    }
  }
  if (hosts.empty()) return;
  std::printf("\n%s\n", style.Bold("Not checked, or not known").c_str());
  for (const auto& [item, names] : hosts) {
    std::printf("  %zu %s: %s, on %s\n", item.first + 1, checklist.titles[item.first].c_str(), item.second.c_str(),
                HostsText(names).c_str());
  }
}

void PrintChecklist(const Style& style, const FleetChecklist& checklist, const std::string& source) {
  const size_t well = checklist.rows.size() - checklist.hosts_not_answering - checklist.hosts_critical -
                      checklist.hosts_warning;
  std::printf("%s\n\n", style
                            .Bold(fmt::format("Fleet: {} hosts: {} not answering, {} critical, {} warning, {} well",
                                              checklist.rows.size(), checklist.hosts_not_answering,
                                              checklist.hosts_critical, checklist.hosts_warning, well))
                            .c_str());
  size_t width = 4;
  for (const FleetChecklistRow& row : checklist.rows) width = std::max(width, row.hostname.size());
  std::string marks_header;
  for (size_t i = 0; i < checklist.titles.size(); ++i) marks_header += fmt::format("{} ", i + 1);
  std::printf("  %-*s  %-9s  %s  %s\n", static_cast<int>(width), "HOST", "STATE", marks_header.c_str(), "WHY");
  for (const FleetChecklistRow& row : checklist.rows) {
    std::string marks;
    for (size_t i = 0; i < row.items.size(); ++i) {
      marks += Mark(row.items[i]) + std::string(std::to_string(i + 1).size(), ' ');
    }
    std::string why;
    if (!row.answering) {
      why = row.trouble;
    } else {
      // The problems; what was not checked is listed below the table.
      std::vector<std::string> parts;
      for (size_t i = 0; i < row.items.size(); ++i) {
        const FleetChecklistCell& cell = row.items[i];
        if (cell.checked == true && !cell.summary.empty()) parts.push_back(checklist.titles[i] + ": " + cell.summary);
      }
      for (const FleetFinding& f : row.other) parts.push_back(f.id + (f.gpu.empty() ? "" : " gpu " + f.gpu));
      why = fmt::format("{}", fmt::join(parts, "; "));
    }
    const std::string state = !row.answering ? "NO ANSWER" : ToUpper(row.worst);
    std::string shown_state = fmt::format("{:<9}", state);
    if (!row.answering || row.worst != "ok") shown_state = style.Bold(shown_state);
    std::printf("  %-*s  %s  %s  %s\n", static_cast<int>(width), row.hostname.c_str(), shown_state.c_str(),
                marks.c_str(), why.c_str());
  }
  std::printf("\nItems:");
  for (size_t i = 0; i < checklist.titles.size(); ++i) std::printf(" %zu %s%s", i + 1, checklist.titles[i].c_str(),
                                                                     i + 1 < checklist.titles.size() ? "," : "");
  std::printf("\n%s\n", style
                            .Dim("C critical, W warning, U unknown, - not checked, ? not known (the host does not "
                                 "answer, or its agent does not say), . checked and ok; from " + source)
                            .c_str());
  PrintNotChecked(style, checklist);
}

std::string ErrorsText(const ErrorCounts& e) {
  std::vector<std::string> parts;
  if (e.fell_off_bus > 0) parts.push_back(fmt::format("off the bus in {:g} steps", e.fell_off_bus));
  if (e.uncorrectable_ecc > 0) parts.push_back(fmt::format("{:g} uncorrectable ECC", e.uncorrectable_ecc));
  if (e.row_remap > 0) parts.push_back(fmt::format("{:g} rows remapped", e.row_remap));
  if (e.xid > 0) parts.push_back(fmt::format("{:g} Xid", e.xid));
  if (e.pcie_replays > 0) parts.push_back(fmt::format("{:g} PCIe replays", e.pcie_replays));
  return parts.empty() ? "no errors" : fmt::format("{}", fmt::join(parts, ", "));
}

void PrintVerdict(const Verdict& v, const char* indent) {
  std::printf("%s%s (%.0f%%): %s\n", indent, ToUpper(BlameName(v.blame)).c_str(), v.confidence * 100,
              v.summary.c_str());
  for (const std::string& line : v.evidence) std::printf("%s  - %s\n", indent, line.c_str());
  if (v.proposal) {
    std::printf("%s  swap: move %s from %s to %s, and %s from there into %s\n", indent, v.proposal->serial.c_str(),
                v.proposal->from.Describe().c_str(), v.proposal->to.Describe().c_str(), v.proposal->partner.c_str(),
                v.proposal->from.Describe().c_str());
  }
}

void PrintOffenders(const Style& style, const Offenders& offenders, const std::string& range) {
  std::printf("%s\n", style.Bold(offenders.with_history ? "Top GPUs (open findings, errors over the last " + range + ")"
                                                        : "Top GPUs (open findings; errors over a range need --prometheus)")
                          .c_str());
  if (offenders.gpus.empty()) std::printf("  none: no GPU has an open finding or an error\n");
  for (const GpuOffender& g : offenders.gpus) {
    std::string open = g.open_findings.empty() ? "" : fmt::format(" open: {}", fmt::join(g.open_findings, ", "));
    std::printf("  %s %s gpu %s serial %s: %s%s\n", g.hostname.c_str(), g.pci_bus_id.empty() ? "-" : g.pci_bus_id.c_str(),
                g.gpu.empty() ? "-" : g.gpu.c_str(), g.serial.empty() ? "-" : g.serial.c_str(),
                ErrorsText(g.errors).c_str(), open.c_str());
    if (g.verdict) PrintVerdict(*g.verdict, "    ");
  }
  std::printf("\n%s\n", style.Bold("Top hosts").c_str());
  if (offenders.hosts.empty()) std::printf("  none\n");
  for (const HostOffender& h : offenders.hosts) {
    std::printf("  %s: %s%zu critical, %zu warning open; %zu GPUs with errors: %s\n", h.hostname.c_str(),
                h.answering ? "" : "NOT ANSWERING; ", h.open_critical, h.open_warning, h.gpus_with_errors,
                ErrorsText(h.errors).c_str());
  }
}

// ---------------------------------------------------------------------------
// The page: fleet.html from the dashboard's files, and the views as JSON.

class FleetPage {
 public:
  FleetPage(FleetSource& source, const FleetOptions& options, Duration range, Duration clean_for,
            const std::vector<ChecklistEntry>& checklist)
      : source_(source), options_(options), range_(range), clean_for_(clean_for), checklist_(checklist) {}

  HttpResponse Handle(const HttpRequest& request) {
    HttpResponse response;
    response.SetHeader("X-Content-Type-Options", "nosniff");
    response.SetHeader("Cache-Control", "no-store");
    if (request.method != "GET" && request.method != "HEAD") {
      response.status = 405;
      response.SetBody("only GET\n", "text/plain; charset=utf-8");
      return response;
    }
    std::string path = request.path == "/" ? "/fleet.html" : request.path;
    if (path.starts_with("/api/v1/fleet/")) return Api(path.substr(14), request);
    const DashboardAsset* asset = FindDashboardAsset(path);
    if (!asset || path == "/index.html") {
      response.status = 404;
      response.SetBody("not found\n", "text/plain; charset=utf-8");
      return response;
    }
    response.SetStaticBody(asset->body, std::string(asset->content_type));
    return response;
  }

 private:
  HttpResponse Api(const std::string& view, const HttpRequest& request) {
    std::lock_guard lock(mutex_);  // one query of the fleet at a time
    HttpResponse response;
    nlohmann::json body;
    int status = 200;
    Result<FleetState> state = source_.Now();
    if (!state) {
      status = 502;
      body = {{"error", state.error().message}};
    } else if (view == "checklist") {
      body = FleetChecklistJson(BuildFleetChecklist(*state, checklist_));
      body["source"] = state->source;
    } else if (view == "offenders" || view == "attribution" || view == "gpu") {
      Result<std::optional<FleetHistory>> history = source_.History(range_);
      if (!history) {
        status = 502;
        body = {{"error", history.error().message}};
      } else {
        std::vector<Verdict> verdicts;
        if (*history) verdicts = AttributeErrors((*history)->placements, (*history)->episodes, state->at,
                                                 {.clean_for = clean_for_});
        if (view == "offenders") {
          body = OffendersJson(RankOffenders(*state, history->has_value() ? &**history : nullptr, verdicts,
                                             options_.top));
        } else if (view == "attribution") {
          body = {{"verdicts", nlohmann::json::array()}};
          for (const Verdict& v : verdicts) body["verdicts"].push_back(VerdictJson(v));
        } else if (!*history) {
          status = 400;
          body = {{"error", "a card's history needs --prometheus"}};
        } else {
          body = CardHistoryJson(HistoryOfCard(std::string(request.Query("serial").value_or("")), **history, verdicts));
        }
        body["range"] = options_.range;
      }
    } else {
      status = 404;
      body = {{"error", "unknown view " + view}};
    }
    response.status = status;
    response.SetBody(ToJsonText(body), "application/json");
    return response;
  }

  FleetSource& source_;
  const FleetOptions& options_;
  Duration range_;
  Duration clean_for_;
  const std::vector<ChecklistEntry>& checklist_;
  std::mutex mutex_;
};

int g_stop_write_fd = -1;
extern "C" void StopFleetPage(int) {
  const char byte = 1;
  [[maybe_unused]] ssize_t ignored = write(g_stop_write_fd, &byte, 1);
}

int ServePage(FleetSource& source, const FleetOptions& options, Duration range, Duration clean_for,
              const std::vector<ChecklistEntry>& checklist) {
  auto listen = ParseListenAddress(options.listen, kDefaultFleetPagePort);
  if (!listen) {
    std::fprintf(stderr, "gpudoctor fleet: --listen: %s\n", listen.error().message.c_str());
    return exit_code::kUsage;
  }
  // The page shows every host's findings: beyond this machine, only to those with the token.
  std::optional<std::string> page_token;
  if (!options.page_token_file.empty()) {
    auto token = ReadTokenOption("--page-token-file", options.page_token_file);
    if (const Failure* failure = std::get_if<Failure>(&token)) {
      std::fprintf(stderr, "gpudoctor fleet: %s\n", failure->message.c_str());
      return failure->exit_code;
    }
    page_token = std::get<std::string>(std::move(token));
  } else if (!IsLoopbackHost(listen->host)) {
    std::fprintf(stderr,
                 "gpudoctor fleet: --listen %s: the page shows every host's findings; to serve it beyond this "
                 "machine give --page-token-file (visitors then send \"Authorization: Bearer TOKEN\"), or listen "
                 "on localhost (127.0.0.1:%d) and reach it through an SSH tunnel\n",
                 options.listen.c_str(), listen->port);
    return exit_code::kUsage;
  }
  const HttpAccess access(page_token, *listen);
  FleetPage page(source, options, range, clean_for, checklist);
  HttpTransport transport(*listen, HttpLimits{}, [&page, &access](const HttpRequest& r) {
    // The page's own files are public; its views of the fleet need the token.
    const bool public_path = !r.path.starts_with("/api/");
    if (std::optional<HttpResponse> refused = access.Refusal(r, public_path)) return *refused;
    return page.Handle(r);
  });
  auto port = transport.Start();
  if (!port) {
    std::fprintf(stderr, "gpudoctor fleet: cannot listen on %s: %s\n", options.listen.c_str(),
                 port.error().message.c_str());
    return exit_code::kUnavailable;
  }
  std::fprintf(stderr, "gpudoctor fleet: serving the fleet view of %s on http://%s:%d/\n",
               source.description().c_str(), listen->host.c_str(), *port);
  int fds[2];
  if (pipe(fds) != 0) return exit_code::kInternal;
  g_stop_write_fd = fds[1];
  struct sigaction action {};
  action.sa_handler = StopFleetPage;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  char byte;
  while (read(fds[0], &byte, 1) < 0 && errno == EINTR) {
  }
  transport.Stop();
  std::fprintf(stderr, "gpudoctor fleet: stopped\n");
  return exit_code::kOk;
}

// ---------------------------------------------------------------------------

std::optional<Failure> Validate(const FleetOptions& options) {
  if (options.prometheus.empty() == options.agents_file.empty()) {
    return Failure{exit_code::kUsage, "give --prometheus URL or --agents FILE (one of them)"};
  }
  return std::nullopt;
}

int Run(CommandContext& context, const FleetOptions& options, const std::string& view) {
  if (auto failure = Validate(options)) {
    std::fprintf(stderr, "gpudoctor fleet: %s\n", failure->message.c_str());
    return failure->exit_code;
  }
  auto timeout = ParseDuration(options.timeout);
  auto range = ParseDuration(options.range);
  auto clean_for = ParseDuration(options.clean_for);
  for (auto [name, value] : {std::pair{"--timeout", timeout}, std::pair{"--range", range},
                             std::pair{"--clean-for", clean_for}}) {
    if (!value || *value <= Duration::zero()) {
      std::fprintf(stderr, "gpudoctor fleet: %s: not a duration (e.g. 30s, 10m, 7d)\n", name);
      return exit_code::kUsage;
    }
  }
  HealthConfig config = DefaultHealthConfig();
  if (!context.options.config_path.empty()) {
    auto file = InputFile::Open(context.options.config_path);
    auto text = file ? file->ReadAll(kMaxConfigFileBytes) : Result<std::string>(file.error());
    if (!text) {
      std::fprintf(stderr, "gpudoctor fleet: %s\n", text.error().message.c_str());
      return exit_code::kNoInput;
    }
    auto applied = ApplyHealthConfig(config, *text, context.options.config_path);
    if (!applied) {
      std::fprintf(stderr, "gpudoctor fleet: %s\n", applied.error().message.c_str());
      return exit_code::kDataError;
    }
    config = std::move(*applied);
  }
  auto opened = FleetSource::Open(options, *timeout);
  if (const Failure* failure = std::get_if<Failure>(&opened)) {
    std::fprintf(stderr, "gpudoctor fleet: %s\n", failure->message.c_str());
    return failure->exit_code;
  }
  auto& source = std::get<std::unique_ptr<FleetSource>>(opened);
  if (!options.listen.empty()) return ServePage(*source, options, *range, *clean_for, config.checklist);

  const Style style(context.options.color, stdout);
  Result<FleetState> state = source->Now();
  if (!state) {
    std::fprintf(stderr, "gpudoctor fleet: %s\n", state.error().message.c_str());
    return exit_code::kUnavailable;
  }
  FleetChecklist checklist = BuildFleetChecklist(*state, config.checklist);
  const int status = FleetExitStatus(checklist);
  if (view == "checklist") {
    if (context.options.json) {
      nlohmann::json body = FleetChecklistJson(checklist);
      body["source"] = state->source;
      std::printf("%s\n", ToJsonText(body, 2).c_str());
    } else {
      PrintChecklist(style, checklist, state->source);
    }
    return status;
  }
  if (view != "offenders" && !source->has_history()) {
    std::fprintf(stderr, "gpudoctor fleet %s: needs --prometheus: agents keep no fleet-wide history\n", view.c_str());
    return exit_code::kUsage;
  }
  Result<std::optional<FleetHistory>> history = source->History(*range);
  if (!history) {
    std::fprintf(stderr, "gpudoctor fleet: %s\n", history.error().message.c_str());
    return exit_code::kUnavailable;
  }
  std::vector<Verdict> verdicts;
  if (*history) {
    verdicts = AttributeErrors((*history)->placements, (*history)->episodes, state->at, {.clean_for = *clean_for});
  }
  if (view == "offenders") {
    Offenders offenders = RankOffenders(*state, history->has_value() ? &**history : nullptr, verdicts, options.top);
    if (context.options.json) std::printf("%s\n", ToJsonText(OffendersJson(offenders), 2).c_str());
    else PrintOffenders(style, offenders, options.range);
    return status;
  }
  if (view == "attribution") {
    if (context.options.json) {
      nlohmann::json body = {{"range", options.range}, {"verdicts", nlohmann::json::array()}};
      for (const Verdict& v : verdicts) body["verdicts"].push_back(VerdictJson(v));
      std::printf("%s\n", ToJsonText(body, 2).c_str());
    } else {
      std::printf("%s\n", style.Bold("Card or slot, over the last " + options.range).c_str());
      if (verdicts.empty()) std::printf("  no GPU errors to attribute\n");
      for (const Verdict& v : verdicts) PrintVerdict(v, "  ");
    }
    return status;
  }
  CardHistory card = HistoryOfCard(options.serial, **history, verdicts);
  if (context.options.json) {
    std::printf("%s\n", ToJsonText(CardHistoryJson(card), 2).c_str());
  } else {
    std::printf("%s\n", style.Bold("Card " + options.serial + " over the last " + options.range).c_str());
    if (card.stays.empty()) std::printf("  never seen in this range (is the serial right?)\n");
    for (const CardStay& stay : card.stays) {
      std::printf("  %s to %s  %s  %s\n", FormatIsoUtc(stay.placement.from).c_str(),
                  FormatIsoUtc(stay.placement.to).c_str(), stay.placement.slot.Describe().c_str(),
                  ErrorsText(stay.errors).c_str());
    }
    for (const Verdict& v : card.verdicts) PrintVerdict(v, "  ");
  }
  return card.stays.empty() ? exit_code::kNoInput : status;
}

void AddSourceOptions(CLI::App* command, FleetOptions& options) {
  command->add_option("--prometheus", options.prometheus,
                      "Prometheus HTTP API base URL (also Thanos, Mimir, VictoriaMetrics), e.g. http://prometheus:9090");
  command->add_option("--agents", options.agents_file,
                      "File of agent URLs, one per line (http://gpu01:9847), for sites without Prometheus");
  command->add_option("--job", options.job, "Prometheus scrape job of the agents")->capture_default_str();
  command->add_option("--timeout", options.timeout, "Deadline of each query or scrape")->capture_default_str();
  command->add_option("--token-file", options.token_file,
                      "Bearer token sent to Prometheus or the agents (first line of the file). For basic "
                      "authentication put user:password@ in the URL");
}

}  // namespace

void RegisterFleetCommand(CLI::App& app, CommandContext& context) {
  auto options = std::make_shared<FleetOptions>();
  auto* fleet = app.add_subcommand("fleet", "Every host at once, from Prometheus or the agents: checklist, offenders, "
                                            "card or slot");
  AddSourceOptions(fleet, *options);
  fleet->add_option("--listen", options->listen,
                    "Serve the fleet views as a page and JSON (/api/v1/fleet/...) on HOST:PORT instead of printing "
                    "(a loopback address such as 127.0.0.1:9848, unless --page-token-file is given)");
  fleet->add_option("--page-token-file", options->page_token_file,
                    "With --listen: the bearer token the page's views require (first line of the file); needed "
                    "to listen beyond localhost");
  fleet->add_option("--range", options->range, "Time range of errors and history (offenders, attribution, gpu)")
      ->capture_default_str();
  fleet->add_option("--clean-for", options->clean_for,
                    "How long a moved card or its old slot must run clean to count as clean")
      ->capture_default_str();
  fleet->add_option("--top", options->top, "How many GPUs and hosts `offenders` lists")->capture_default_str();
  fleet->fallthrough();
  fleet->footer(
      "Views (default: the checklist):\n"
      "  gpudoctor fleet                 the weekly checklist for every host, hosts not answering first\n"
      "  gpudoctor fleet offenders       GPUs and hosts by open findings and errors over --range\n"
      "  gpudoctor fleet attribution     card or slot: where errors followed a serial, or stayed in a slot\n"
      "  gpudoctor fleet gpu SERIAL      one card's slots and errors across hosts over --range\n"
      "Prometheus must scrape the agents' /metrics under --job (deploy/prometheus.yml); attribution and a\n"
      "card's history need Prometheus, as agents keep no fleet-wide record. See docs/fleet.md.\n"
      "Exit status (like check): 0 every host well, 1 warnings, 2 a critical finding or a host not answering;\n"
      "64 bad command line (a --prometheus that is not a URL, --listen beyond localhost without\n"
      "--page-token-file), 65 bad --config or a malformed line in --agents, 66 --agents or a token file\n"
      "unreadable, 69 Prometheus unreachable or a query failed; `gpu SERIAL` exits 66 when the card was\n"
      "never seen in --range.");
  fleet->callback([&context, options, fleet] {
    if (fleet->get_subcommands().empty()) context.exit_code = Run(context, *options, "checklist");
  });
  for (auto [name, help] : {std::pair{"offenders", "GPUs and hosts by open findings, Xids and error rates over --range"},
                            std::pair{"attribution", "Card or slot: the verdict for every GPU with errors in --range"}}) {
    auto* view = fleet->add_subcommand(name, help);
    view->fallthrough();
    view->callback([&context, options, view_name = std::string(name)] {
      context.exit_code = Run(context, *options, view_name);
    });
  }
  auto* gpu = fleet->add_subcommand("gpu", "One card's history across hosts and slots, and its card-or-slot verdict");
  gpu->add_option("serial", options->serial, "The card's serial number (nvidia-smi -q: Serial Number)")->required();
  gpu->fallthrough();
  gpu->callback([&context, options] { context.exit_code = Run(context, *options, "gpu"); });
}

}  // namespace gpudoctor
