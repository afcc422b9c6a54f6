// `gpudoctor triage`: the emergency flow for a sick GPU server, in six steps:
// is the host reachable, what the GPUs show now (and did in the last hour,
// when the agent keeps a history), what the logs say, whether NVML answers,
// and then a verdict - the most likely cause, the causes ruled out with the
// evidence against them, restart or hardware service, and the exact next steps.
//
// The cause is the finding category (data/rules.toml) with the most weight
// among the warning and critical findings (critical 3, warning 1); Xids and
// other log events add weight to the categories their catalog tags name. The
// history adds evidence to a cause, never weight (assess/recent_history.h); assess/verdict.h
// decides, this file asks and prints.

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "assess/assessment_json.h"
#include "assess/recent_history.h"
#include "assess/verdict.h"
#include "cli/check_inputs.h"
#include "cli/commands.h"
#include "cli/terminal.h"
#include "common/json_text.h"
#include "common/text.h"
#include "health/catalog_event_grader.h"
#include "health/correlate/correlate.h"
#include "health/finding_json.h"
#include "logs/catalog.h"

namespace gpudoctor {
namespace {

// ---- Step 1: reachability -------------------------------------------------

// True when a TCP handshake to host:port completes or is refused (either way
// the host answered) before the timeout.
Reachability ProbeHost(const std::string& host, int port, std::chrono::milliseconds timeout) {
  Reachability result{host, false, ""};
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &addresses); rc != 0) {
    result.detail = std::string("name not resolved: ") + gai_strerror(rc);
    return result;
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owner(addresses, freeaddrinfo);
  std::string last_error = "no address";
  for (addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int error = connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (error == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int ready = poll(&p, 1, static_cast<int>(timeout.count()));
      socklen_t length = sizeof error;
      if (ready == 1) getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
      else error = ETIMEDOUT;
    }
    close(fd);
    if (error == 0) return {host, true, fmt::format("port {} open", port)};
    if (error == ECONNREFUSED) return {host, true, fmt::format("answered on port {} (connection refused: host is up)", port)};
    last_error = error == ETIMEDOUT ? fmt::format("no answer on port {} within {} ms", port, timeout.count())
                                    : fmt::format("port {}: {}", port, std::strerror(error));
  }
  result.detail = last_error;
  return result;
}

// ---- Step 2: the agent's history of the last hour ------------------------------

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string Label(const GpuIdentity& gpu) { return fmt::format("GPU {}", gpu.index); }

// "66 / 79.5 / 93"
std::string MinMeanMax(const MetricRange& range, double scale = 1) {
  return fmt::format("{:.4g} / {:.4g} / {:.4g}", range.min / scale, range.mean / scale, range.max / scale);
}

void PrintRecentHistory(std::FILE* out, const Style& style, const RecentHistory& history) {
  switch (history.state) {
    case RecentHistory::State::kMissing:
      std::fprintf(out, "   History: none (%s)\n", history.note.c_str());
      return;
    case RecentHistory::State::kUnreadable:
      std::fprintf(out, "   History: not read (%s)\n", history.note.c_str());
      return;
    case RecentHistory::State::kRead: break;
  }
  if (history.gpus.empty()) {
    std::fprintf(out, "   History of %s (%s): no samples\n", HistoryWindowText(history).c_str(), history.database.c_str());
  } else {
    std::fprintf(out, "   History of %s, min / mean / max (%s):\n", HistoryWindowText(history).c_str(),
                 history.database.c_str());
  }
  for (const GpuHistory& gpu : history.gpus) {
    std::vector<std::string> parts;
    if (const auto& t = gpu.temperature_c) {
      parts.push_back("temperature " + MinMeanMax(*t) + " °C");
      if (TemperatureClimbed(t)) parts.back() += ", " + style.Bold(fmt::format("rose {:.0f} -> {:.0f} °C", t->first, t->last));
    }
    if (gpu.utilization_gpu_percent) parts.push_back("utilisation " + MinMeanMax(*gpu.utilization_gpu_percent) + " %");
    if (gpu.memory_used_bytes) parts.push_back("memory used " + MinMeanMax(*gpu.memory_used_bytes, kGiB) + " GiB");
    std::string line;
    for (const std::string& part : parts) line += (line.empty() ? "" : "; ") + part;
    std::fprintf(out, "     %s: %s\n", Label(gpu.gpu).c_str(), line.c_str());
  }
  if (history.findings.empty()) {
    std::fprintf(out, "   No findings were open in %s.\n", HistoryWindowText(history).c_str());
    return;
  }
  std::fprintf(out, "   Findings open in %s:\n", HistoryWindowText(history).c_str());
  for (const StoredFinding& incident : history.findings) {
    const Finding& finding = incident.finding;
    std::fprintf(out, "     %s %s: %s (%s)\n", style.Severity(finding.severity).c_str(), finding.id.c_str(),
                 finding.summary.c_str(), IncidentTimes(incident).c_str());
  }
}

// ---- Steps 5 and 6: the verdict --------------------------------------------

// ---- Output -----------------------------------------------------------------

struct TriageOptions {
  CheckOptions check;
  std::vector<std::string> hosts;
  int port = 22;
  double connect_timeout_s = 3.0;
};

nlohmann::json VerdictToJson(const TriageVerdict& v) {
  nlohmann::json ruled_out = nlohmann::json::array();
  for (const RuledOut& r : v.ruled_out) ruled_out.push_back({{"cause", CauseName(r.cause)}, {"evidence", r.evidence}});
  nlohmann::json scores = nlohmann::json::object();
  for (const auto& [cause, score] : v.scores) scores[std::string(CauseId(cause))] = score;
  nlohmann::json also_seen = nlohmann::json::array(), not_checked = nlohmann::json::array(),
                 not_ruled_out = nlohmann::json::array();
  for (Cause cause : v.also_seen) also_seen.push_back(CauseName(cause));
  for (const NotRuledOut& n : v.not_ruled_out) {
    if (n.why == "nothing to check") not_checked.push_back(CauseName(n.cause));
    not_ruled_out.push_back({{"cause", CauseName(n.cause)}, {"why", n.why}});
  }
  return {{"cause", v.cause ? nlohmann::json(CauseName(*v.cause)) : nlohmann::json("none")},
          {"evidence", v.evidence},
          {"scores", scores},
          {"also_seen", also_seen},
          {"ruled_out", ruled_out},
          {"not_checked", not_checked},
          {"not_ruled_out", not_ruled_out},
          {"restart_advisable", v.restart_advisable},
          {"hardware_service", v.hardware_service},
          {"recommendation", v.recommendation},
          {"next_steps", v.next_steps}};
}

// What step 4 checked: the live driver, the simulated one, or nothing at all.
std::string NvmlStateText(const Snapshot& snapshot) {
  if (snapshot.source.starts_with("nvidia-smi:")) return "not called: judged from captured nvidia-smi output";
  if (snapshot.source.starts_with("simulate:")) return "the simulated NVML answering";
  return "answering";
}

void PrintTriage(std::FILE* out, const Style& style, const CheckRun& run, const std::vector<Reachability>& hosts,
                 const RecentHistory& history, const TriageVerdict& v) {
  std::fprintf(out, "%s  %s  (%s)\n\n", style.Bold("gpudoctor triage").c_str(), run.gathered.snapshot.hostname.c_str(),
               run.gathered.snapshot_description.c_str());
  std::fprintf(out, "%s\n", style.Bold("1. Reachability").c_str());
  if (hosts.empty()) std::fprintf(out, "   skipped: no --host given\n");
  for (const Reachability& h : hosts)
    std::fprintf(out, "   %s %s: %s\n", h.reachable ? "up  " : "DOWN", h.host.c_str(), h.detail.c_str());
  std::fprintf(out, "%s\n", style.Bold("2. Current state").c_str());
  size_t readable = std::count_if(run.gathered.snapshot.gpus.begin(), run.gathered.snapshot.gpus.end(),
                                  [](const GpuSnapshot& g) { return g.access_error == AccessError::kNone; });
  std::fprintf(out, "   %zu GPU(s), %zu readable\n", run.gathered.snapshot.gpus.size(), readable);
  PrintRecentHistory(out, style, history);
  std::fprintf(out, "%s\n", style.Bold("3. Logs").c_str());
  for (const SourceNote& s : run.gathered.sources)
    if (s.source == "kernel log") std::fprintf(out, "   %s (%s)\n", s.status.c_str(), s.detail.c_str());
  std::fprintf(out, "%s\n", style.Bold("4. GPU state through NVML").c_str());
  if (run.gathered.snapshot.driver_error != AccessError::kNone)
    std::fprintf(out, "   %s: %s\n", AccessErrorName(run.gathered.snapshot.driver_error), run.gathered.snapshot.driver_message.c_str());
  else std::fprintf(out, "   %s\n", NvmlStateText(run.gathered.snapshot).c_str());
  const RootIndex roots(run.assessment.findings);
  for (const Finding& f : run.assessment.findings)
    if (f.severity != Severity::kOk && !roots.ToldUnderRoot(f))
      std::fprintf(out, "   %s %s: %s\n", style.Severity(f.severity).c_str(), f.id.c_str(), f.summary.c_str());

  std::fprintf(out, "\n%s\n", style.Bold("5. Verdict").c_str());
  if (!v.cause) {
    std::fprintf(out, "   %s\n", v.recommendation.c_str());
  } else {
    std::fprintf(out, "   Most likely cause: %s\n", style.Bold(std::string(CauseName(*v.cause))).c_str());
    for (const std::string& e : v.evidence) std::fprintf(out, "     - %s\n", e.c_str());
    if (!v.also_seen.empty()) {
      std::string joined;
      for (Cause cause : v.also_seen) joined += (joined.empty() ? "" : ", ") + std::string(CauseName(cause));
      std::fprintf(out, "   Also seen: %s\n", joined.c_str());
    }
  }
  if (!v.ruled_out.empty()) std::fprintf(out, "   Ruled out:\n");
  for (const RuledOut& r : v.ruled_out) {
    std::string joined;
    for (const std::string& e : r.evidence) joined += (joined.empty() ? "" : "; ") + e;
    std::fprintf(out, "     %s: %s\n", std::string(CauseName(r.cause)).c_str(), joined.c_str());
  }
  if (!v.not_ruled_out.empty()) {
    // Grouped by why: "Not ruled out (GPU 3 does not answer): PCIe/bus, GPU memory, power, thermal".
    std::map<std::string, std::string> by_why;
    for (const NotRuledOut& n : v.not_ruled_out) {
      std::string& causes = by_why[n.why];
      causes += (causes.empty() ? "" : ", ") + std::string(CauseName(n.cause));
    }
    for (const auto& [why, causes] : by_why)
      std::fprintf(out, "   %s\n", style.Dim("Not ruled out (" + why + "): " + causes).c_str());
  }
  std::fprintf(out, "\n%s\n   %s\n", style.Bold("6. What to do").c_str(), v.recommendation.c_str());
  int n = 1;
  for (const std::string& step : v.next_steps) std::fprintf(out, "   %d. %s\n", n++, step.c_str());
}

}  // namespace

void RegisterTriageCommand(CLI::App& app, CommandContext& context) {
  auto* command = app.add_subcommand("triage", "Emergency flow for a sick GPU server: find the cause and what to do");
  auto options = std::make_shared<TriageOptions>();
  AddCheckInputOptions(command, options->check);
  command->add_option("--host", options->hosts, "A host to test for reachability (TCP connect); repeatable");
  command->add_option("--port", options->port, "TCP port for the reachability test")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  command->add_option("--connect-timeout", options->connect_timeout_s, "Seconds to wait for each host")
      ->check(CLI::Range(0.05, 60.0))
      ->capture_default_str();
  command->footer(
      "Steps: 1 reachability of --host, 2 the current snapshot, plus the last hour of the agent's history\n"
      "(--db) when it exists, 3 the kernel log of the last --since, 4 GPU state through NVML (hang-protected),\n"
      "5-6 the verdict and next steps.\n"
      "Exit status like `check`: 0 ok, 1 warning, 2 critical, 3 unknown; 64/65/66 for bad input.");
  command->callback([&context, options] {
    std::vector<Reachability> hosts;
    for (const std::string& host : options->hosts)
      hosts.push_back(ProbeHost(host, options->port,
                                std::chrono::milliseconds(static_cast<int64_t>(options->connect_timeout_s * 1000))));
    CheckRun run = RunChecks(context, options->check);
    if (run.error) {
      std::fprintf(stderr, "gpudoctor triage: %s\n", run.error->message.c_str());
      context.exit_code = run.error->exit_code;
      return;
    }
    const RecentHistory history =
        ReadRecentHistory(AgentHistoryPath(context, options->check), SystemClock::Instance().Now());
    CatalogEventGrader grader(LogCatalog::Builtin());
    const AssessInputs inputs = run.gathered.Inputs();
    const TriageVerdict verdict = Diagnose({.assessment = &run.assessment,
                                            .inputs = &inputs,
                                            .config = &run.config,
                                            .grader = &grader,
                                            .hosts = hosts,
                                            .history = EvidenceFromHistory(history, run.config, run.assessment.findings)});
    Severity worst = run.assessment.worst;
    if (std::any_of(hosts.begin(), hosts.end(), [](const Reachability& h) { return !h.reachable; }))
      worst = Severity::kCritical;
    if (context.options.json) {
      nlohmann::json reach = nlohmann::json::array();
      for (const Reachability& h : hosts)
        reach.push_back({{"host", h.host}, {"reachable", h.reachable}, {"detail", h.detail}});
      nlohmann::json json;
      json["status"] = SeverityName(worst);
      json["hostname"] = run.gathered.snapshot.hostname;
      json["reachability"] = reach;
      json["history"] = RecentHistoryToJson(history);
      json["verdict"] = VerdictToJson(verdict);
      json["findings"] = FindingsToJson(run.assessment.findings);
      json["not_checked"] = NotCheckedToJson(run.assessment.unchecked);
      json["gpus"] = GpuVerdictsToJson(run.assessment,
                                       run.gathered.diagnostics ? &*run.gathered.diagnostics : nullptr);
      std::printf("%s\n", ToJsonText(json, 2).c_str());
    } else {
      PrintTriage(stdout, Style(context.options.color, stdout), run, hosts, history, verdict);
    }
    context.exit_code = ExitStatusFor(worst);
  });
}

}  // namespace gpudoctor
