#include "assess/verdict.h"

#include <algorithm>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "common/text.h"
#include "health/correlate/correlate.h"

namespace gpudoctor {
namespace {

int Weight(Severity severity) {
  return severity == Severity::kCritical ? 3 : severity == Severity::kWarning ? 1 : 0;
}

// The triage cause a log engine cause tag points at; nullopt for "hardware",
// which says service is needed but not where.
std::optional<Cause> CauseForTag(std::string_view tag) {
  if (tag == "PCIe" || tag == "NVLink") return Cause::kPcie;
  if (tag == "GSP") return Cause::kDriver;
  if (tag == "hardware") return std::nullopt;
  return CauseFromId(tag);
}

// Causes about the GPUs themselves: only evidence on every GPU rules them out.
bool ConcernsTheGpus(Cause cause) {
  return cause == Cause::kPcie || cause == Cause::kMemory || cause == Cause::kPower || cause == Cause::kThermal;
}

bool HasProblem(const std::vector<Finding>& findings, std::string_view id, Severity at_least = Severity::kWarning) {
  return std::any_of(findings.begin(), findings.end(), [&](const Finding& f) {
    return f.id == id && SeverityRank(f.severity) >= SeverityRank(at_least);
  });
}

// Adds a step; one that differs from a step already there only in the GPUs
// it names ("--gpu 3" beside "--gpu 5") becomes one step for all of them.
void AddStep(std::vector<std::string>& steps, const std::string& step) {
  if (step.empty() || std::find(steps.begin(), steps.end(), step) != steps.end()) return;
  static const std::regex kGpus(R"((--gpu |-i )(\d+(?:,\d+)*))");
  std::smatch match;
  if (std::regex_search(step, match, kGpus)) {
    const std::string shape = match.prefix().str() + match[1].str() + "#" + match.suffix().str();
    for (std::string& kept : steps) {
      std::smatch other;
      if (!std::regex_search(kept, other, kGpus) ||
          other.prefix().str() + other[1].str() + "#" + other.suffix().str() != shape)
        continue;
      std::set<int> gpus;
      for (const std::smatch* m : {&match, &other})
        for (std::string_view index : Split((*m)[2].str(), ',')) gpus.insert(ParseInt<int>(index).value_or(0));
      std::string joined;
      for (int gpu : gpus) joined += (joined.empty() ? "" : ",") + std::to_string(gpu);
      kept = other.prefix().str() + other[1].str() + joined + other.suffix().str();
      return;
    }
  }
  steps.push_back(step);
}

// Why GPU evidence does not cover every GPU now; empty when it does.
std::string UnreadGpus(const Snapshot* snapshot) {
  if (snapshot == nullptr) return "no GPU was read";
  if (snapshot->driver_error != AccessError::kNone) return "NVML does not answer";
  std::vector<std::string> unread;
  for (const GpuSnapshot& gpu : snapshot->gpus)
    if (gpu.access_error != AccessError::kNone) unread.push_back(fmt::format("GPU {}", gpu.index));
  if (unread.empty()) return "";
  std::string joined;
  for (const std::string& name : unread) joined += (joined.empty() ? "" : ", ") + name;
  return joined + (unread.size() == 1 ? " does not answer" : " do not answer");
}

}  // namespace

std::string_view CauseId(Cause cause) {
  switch (cause) {
    case Cause::kPcie: return "pcie";
    case Cause::kMemory: return "memory";
    case Cause::kPower: return "power";
    case Cause::kThermal: return "thermal";
    case Cause::kDriver: return "driver";
    case Cause::kApplication: return "application";
    case Cause::kHost: return "host";
    case Cause::kUnknown: return "unknown";
  }
  return "unknown";
}

std::string_view CauseName(Cause cause) {
  switch (cause) {
    case Cause::kPcie: return "PCIe/bus";
    case Cause::kMemory: return "GPU memory";
    default: return CauseId(cause);
  }
}

std::optional<Cause> CauseFromId(std::string_view id) {
  for (Cause cause : kCauses)
    if (CauseId(cause) == id) return cause;
  return std::nullopt;
}

TriageVerdict Diagnose(const DiagnoseInputs& in) {
  const Assessment& assessment = *in.assessment;
  const HealthConfig& config = *in.config;
  const std::vector<Finding>& findings = assessment.findings;
  const RootIndex roots(findings);
  TriageVerdict verdict;
  std::map<Cause, std::vector<std::string>> evidence;
  std::map<Cause, std::vector<const Finding*>> problems;
  std::vector<std::string> hardware_evidence;
  std::vector<const Finding*> log_findings;  // xid_recent, log_errors
  auto category_of = [&](std::string_view rule_id) {
    return CauseFromId(config.Category(rule_id)).value_or(Cause::kUnknown);
  };
  const std::vector<LogEvent>* events = in.inputs ? in.inputs->log_events : nullptr;

  for (const Reachability& h : in.hosts) {
    if (h.reachable) continue;
    verdict.scores[Cause::kHost] += 3;
    evidence[Cause::kHost].push_back(h.host + ": " + h.detail);
  }
  for (const Finding& f : findings) {
    const int weight = Weight(f.severity);
    if (weight == 0) continue;
    const Cause cause = category_of(f.id);
    if (cause == Cause::kUnknown && events) {  // log rules: weighed below by each event's tags
      log_findings.push_back(&f);
      continue;
    }
    verdict.scores[cause] += weight;
    if (!roots.ToldUnderRoot(f)) evidence[cause].push_back(f.id + ": " + f.summary);
    problems[cause].push_back(&f);
  }
  if (events && in.grader && (HasProblem(findings, "xid_recent") || HasProblem(findings, "log_errors"))) {
    // Each distinct event type in the window counts once, for every cause its catalog entry names.
    const WallTime start =
        in.inputs->now - std::chrono::duration_cast<WallTime::duration>(config.thresholds.log_errors.window);
    std::set<std::string> seen;
    for (const LogEvent& event : *events) {
      if (event.severity == EventSeverity::kInfo || (event.time && *event.time < start)) continue;
      std::string key = event.xid ? fmt::format("Xid {}", *event.xid) : event.kind;
      if (!seen.insert(key).second) continue;
      auto grade = event.xid ? in.grader->GradeXid(*event.xid) : in.grader->GradeKind(event.kind);
      const int weight = Weight(grade ? grade->severity : SeverityForEvent(event.severity));
      std::string line = key + (grade && !grade->title.empty() ? " (" + grade->title + ")" : "") +
                         (event.pci_bus_id.empty() ? "" : " on " + event.pci_bus_id);
      bool placed = false;
      for (const std::string& tag : grade ? grade->cause_tags : std::vector<std::string>{}) {
        if (tag == "hardware") hardware_evidence.push_back(line);
        std::optional<Cause> cause = CauseForTag(tag);
        if (!cause) continue;
        verdict.scores[*cause] += weight;
        evidence[*cause].push_back("log: " + line);
        placed = true;
      }
      if (!placed) {
        verdict.scores[Cause::kUnknown] += weight;
        evidence[Cause::kUnknown].push_back("log: " + line);
      }
    }
  }
  for (const HistoryEvidence& e : in.history) evidence[CauseFromId(e.cause).value_or(Cause::kUnknown)].push_back(e.line);

  int best = 0;
  for (Cause cause : kCauses) {
    auto it = verdict.scores.find(cause);
    if (it != verdict.scores.end() && it->second > best) {
      best = it->second;
      verdict.cause = cause;
    }
  }
  const std::string unread = UnreadGpus(in.inputs ? in.inputs->snapshot : nullptr);
  for (Cause cause : kCauses) {
    if (cause == verdict.cause || (cause == Cause::kUnknown && verdict.scores[cause] == 0)) continue;
    if (verdict.scores[cause] > 0) {
      verdict.also_seen.push_back(cause);
      continue;
    }
    if (ConcernsTheGpus(cause) && !unread.empty()) {
      verdict.not_ruled_out.push_back({cause, unread});
      continue;
    }
    RuledOut out{cause, {}};
    for (const Finding& f : findings)
      if (f.severity == Severity::kOk && category_of(f.id) == cause) out.evidence.push_back(f.summary);
    if (out.evidence.empty()) verdict.not_ruled_out.push_back({cause, "nothing to check"});
    else verdict.ruled_out.push_back(std::move(out));
  }
  if (!verdict.cause) {
    verdict.recommendation = "No fault found: every check that could run passed.";
    verdict.next_steps = {"If the problem persists, run `gpudoctor triage` again while it happens, and keep the "
                          "output of `gpudoctor report` for support."};
    return verdict;
  }
  verdict.evidence = evidence[*verdict.cause];

  const Cause c = *verdict.cause;
  const bool failed_part = HasProblem(findings, "fan_failure") || HasProblem(findings, "psu_fault") ||
                           HasProblem(findings, "row_remap_failure") ||
                           HasProblem(findings, "retired_pages", Severity::kCritical);
  // A missing driver needs installing; a mismatched one (updated without a
  // reboot) is exactly what a clean restart fixes.
  const bool no_driver = HasProblem(findings, "driver_unavailable");
  const bool mismatch = HasProblem(findings, "driver_mismatch");
  verdict.hardware_service = c == Cause::kPcie || c == Cause::kPower || failed_part ||
                             (!hardware_evidence.empty() && (c == Cause::kUnknown || c == Cause::kMemory));
  verdict.restart_advisable = !verdict.hardware_service && !no_driver &&
                              (c == Cause::kDriver || c == Cause::kApplication || c == Cause::kMemory ||
                               c == Cause::kHost || c == Cause::kUnknown);
  if (verdict.hardware_service) {
    verdict.recommendation = "Hardware service is needed: a restart will not fix this for good.";
  } else if (c == Cause::kThermal) {
    verdict.recommendation = "Fix the cooling first; a restart does not help an overheating GPU.";
  } else if (no_driver) {
    verdict.recommendation = "Install or repair the NVIDIA driver first: without it nothing on the GPUs can run or "
                             "be judged.";
  } else if (mismatch) {
    verdict.recommendation = "A clean restart is advisable: the loaded kernel module is not the driver the library "
                             "belongs to (an update without a reboot); rebooting loads the installed one.";
  } else if (HasProblem(findings, "nvml_hang")) {
    verdict.recommendation = "A clean restart is advisable: drain the node and reboot it (the driver is stuck, so "
                             "a GPU reset cannot run), then check again.";
  } else {
    verdict.recommendation = "A clean restart is advisable: stop the jobs, reset the GPUs or reboot, then check again.";
  }
  // A finding told under its root cause brings no steps of its own: the root's
  // (fix the room's cooling) replace the per-GPU ones (reseat, RMA).
  for (const Finding* f : problems[c])
    if (!roots.ToldUnderRoot(*f))
      for (const std::string& action : f->actions) AddStep(verdict.next_steps, action);
  const bool from_logs = std::any_of(verdict.evidence.begin(), verdict.evidence.end(),
                                     [](const std::string& e) { return e.starts_with("log: "); });
  if (from_logs)
    for (const Finding* f : log_findings)
      if (!roots.ToldUnderRoot(*f))
        for (const std::string& action : f->actions) AddStep(verdict.next_steps, action);
  if (verdict.next_steps.empty() && c == Cause::kHost && !in.hosts.empty())
    AddStep(verdict.next_steps, "Check the network path and the server's console (BMC) for a host that does not answer.");
  if (verdict.hardware_service || c == Cause::kUnknown)
    AddStep(verdict.next_steps, "Collect a support bundle with `gpudoctor report --redact` and send it to the vendor "
                                "with the evidence above.");
  AddStep(verdict.next_steps, "Run `gpudoctor check` afterwards to confirm the server is healthy.");
  return verdict;
}

}  // namespace gpudoctor
