// What the agent's history says about the last hour, for `gpudoctor triage`
// step 2 (cli/cmd_triage.cc prints it): per GPU the lowest, mean and highest temperature, utilisation and
// memory used, and the findings open at any time in the hour.
//
//   RecentHistory history = ReadRecentHistory("/var/lib/gpudoctor/history.db", now);
//   if (history.state == RecentHistory::State::kRead) ...
//   for (const HistoryEvidence& e : EvidenceFromHistory(history, config, findings)) ...  // for the verdict
//
// A missing file is no error (no agent has recorded on this machine), and an
// unreadable or damaged one only a note: triage goes on without history.
#pragma once

#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "health/agent_record.h"
#include "health/health_config.h"
#include "store/history_store.h"

namespace gpudoctor {

inline constexpr Duration kTriageHistoryWindow = std::chrono::hours(1);

// A metric over the window; `first` and `last` are the oldest and newest
// points, which tell a climb from a spike.
struct MetricRange {
  double min = 0;
  double mean = 0;
  double max = 0;
  double first = 0;
  double last = 0;
  size_t points = 0;
};

struct GpuHistory {
  GpuIdentity gpu;
  std::optional<MetricRange> temperature_c;  // nullopt: no reading in the window
  std::optional<MetricRange> utilization_gpu_percent;
  std::optional<MetricRange> memory_used_bytes;
};

struct RecentHistory {
  using State = AgentRecord::State;  // kMissing, kUnreadable, kRead
  State state = State::kMissing;
  std::string database;
  std::string note;  // why there is no history (kMissing, kUnreadable)
  WallTime from;
  WallTime until;
  std::vector<GpuHistory> gpus;         // GPUs with samples in the window, by index
  std::vector<StoredFinding> findings;  // incidents open at any time in the window, newest first
};

// Reads [now - window, now) of the history file, opened read-only.
RecentHistory ReadRecentHistory(const std::string& database, WallTime now, Duration window = kTriageHistoryWindow);

// The GPUs and findings of [from, until) in `store`.
Result<RecentHistory> SummarizeHistory(const HistoryStore& store, WallTime from, WallTime until);

// A line of evidence the history adds to one triage cause, e.g. "thermal" for
// a temperature that climbed over the window.
struct HistoryEvidence {
  std::string cause;  // a finding category (data/rules.toml)
  std::string line;   // "history: ..."
};

// A GPU temperature that rose at least this much from the window's first
// reading to its last counts as a climb.
inline constexpr double kTemperatureClimbC = 5;

// Temperature climbs (thermal), and the warning and critical findings of the
// window under their rule's category, except those `current` still reports
// (the verdict names them already). Adds no weight: history supports a cause
// that the current state points at, it does not make one.
std::vector<HistoryEvidence> EvidenceFromHistory(const RecentHistory& history, const HealthConfig& config,
                                                 const std::vector<Finding>& current);

// {"database", "status": "read" | "missing" | "unreadable", "note", "from", "until",
//  "gpus": [{"index", "uuid", "temperature_c": {"min", "mean", "max", "first", "last", "points"} | null,
//            "utilization_gpu_percent": ..., "memory_used_bytes": ...}],
//  "findings": [the agent's incident form, docs/agent.md]}
nlohmann::json RecentHistoryToJson(const RecentHistory& history);

// The step 2 lines, indented to sit under the step's title.
// "the last hour", or "the last 30m" for another window.
std::string HistoryWindowText(const RecentHistory& history);
// The window's temperature rose by kTemperatureClimbC or more from its first reading to its last.
bool TemperatureClimbed(const std::optional<MetricRange>& temperature);
// "open since 2024-05-01T12:00:00.000Z", or "from ... to ...".
std::string IncidentTimes(const StoredFinding& incident);

}  // namespace gpudoctor
