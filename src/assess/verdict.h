// Triage's verdict over an assessment: the most likely cause among the
// findings (weighed by severity, and the log's events by their catalog's
// cause tags), the causes ruled out and with what, the causes that could not
// be ruled out and why, whether a restart or hardware service is needed, and
// the next steps. `gpudoctor triage` renders it (cli/cmd_triage.cc).
//
// A cause is ruled out only by evidence that covers every GPU it could
// concern: while a GPU does not answer (lost, hung) or NVML does not, "all 7
// GPUs below 75 °C" says nothing about the eighth.
//
//   TriageVerdict verdict = Diagnose({.assessment = &a, .inputs = &in, .config = &c, .grader = &g});
//   if (!verdict.cause) ... "No fault found" ...
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "assess/assessment.h"
#include "assess/recent_history.h"
#include "health/event_grader.h"
#include "health/health_config.h"

namespace gpudoctor {

// The causes triage names: a rule's category (data/rules.toml) is one of these.
enum class Cause { kPcie, kMemory, kPower, kThermal, kDriver, kApplication, kHost, kUnknown };
inline constexpr Cause kCauses[] = {Cause::kPcie,   Cause::kMemory,      Cause::kPower, Cause::kThermal,
                                    Cause::kDriver, Cause::kApplication, Cause::kHost,  Cause::kUnknown};

std::string_view CauseId(Cause cause);    // "pcie": a rule's category
std::string_view CauseName(Cause cause);  // "PCIe/bus": what an operator reads
std::optional<Cause> CauseFromId(std::string_view id);

// A host triage tried to reach (step 1).
struct Reachability {
  std::string host;
  bool reachable = false;
  std::string detail;  // "port 22 open", "no answer on port 22 within 3000 ms"
};

struct RuledOut {
  Cause cause;
  std::vector<std::string> evidence;
};

struct NotRuledOut {
  Cause cause;
  std::string why;  // "nothing to check", "GPU 3 does not answer"
};

struct TriageVerdict {
  std::optional<Cause> cause;  // nullopt: nothing is wrong
  std::vector<std::string> evidence;
  std::map<Cause, int> scores;
  std::vector<Cause> also_seen;  // other causes with some weight
  std::vector<RuledOut> ruled_out;
  std::vector<NotRuledOut> not_ruled_out;
  bool restart_advisable = false;
  bool hardware_service = false;
  std::string recommendation;
  std::vector<std::string> next_steps;
};

struct DiagnoseInputs {
  const Assessment* assessment = nullptr;
  const AssessInputs* inputs = nullptr;  // the snapshot and log events behind it
  const HealthConfig* config = nullptr;
  const EventGrader* grader = nullptr;
  std::vector<Reachability> hosts;
  std::vector<HistoryEvidence> history;  // what the agent's last hour adds to a cause
};

TriageVerdict Diagnose(const DiagnoseInputs& in);

}  // namespace gpudoctor
