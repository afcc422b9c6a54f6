#include "assess/recent_history.h"

#include <algorithm>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "assess/agent_history.h"
#include "common/text.h"
#include "store/incident_json.h"
#include "store/sqlite_store.h"

namespace gpudoctor {
namespace {

std::optional<MetricRange> RangeOf(const std::vector<SeriesPoint>& points) {
  if (points.empty()) return std::nullopt;
  MetricRange range{.min = points.front().min,
                    .max = points.front().max,
                    .first = points.front().avg,
                    .last = points.back().avg,
                    .points = points.size()};
  double sum = 0;
  for (const SeriesPoint& point : points) {
    range.min = std::min(range.min, point.min);
    range.max = std::max(range.max, point.max);
    sum += point.avg;
  }
  range.mean = sum / static_cast<double>(points.size());
  return range;
}

std::string Label(const GpuIdentity& gpu) { return fmt::format("GPU {}", gpu.index); }

nlohmann::json RangeToJson(const std::optional<MetricRange>& range) {
  if (!range) return nullptr;
  return {{"min", range->min},     {"mean", range->mean}, {"max", range->max},
          {"first", range->first}, {"last", range->last}, {"points", range->points}};
}

const char* StateName(RecentHistory::State state) {
  switch (state) {
    case RecentHistory::State::kMissing: return "missing";
    case RecentHistory::State::kUnreadable: return "unreadable";
    case RecentHistory::State::kRead: return "read";
  }
  return "unreadable";
}

}  // namespace

std::string HistoryWindowText(const RecentHistory& history) {
  const Duration window = history.until - history.from;
  return window == std::chrono::hours(1) ? "the last hour" : "the last " + FormatDuration(window);
}

bool TemperatureClimbed(const std::optional<MetricRange>& temperature) {
  return temperature && temperature->last - temperature->first >= kTemperatureClimbC;
}

std::string IncidentTimes(const StoredFinding& incident) {
  if (incident.open()) return "open since " + FormatIsoUtc(incident.opened_at);
  return "from " + FormatIsoUtc(incident.opened_at) + " to " + FormatIsoUtc(*incident.resolved_at);
}

Result<RecentHistory> SummarizeHistory(const HistoryStore& store, WallTime from, WallTime until) {
  RecentHistory history;
  history.state = RecentHistory::State::kRead;
  history.from = from;
  history.until = until;

  auto gpus = store.ListGpus();
  if (!gpus) return gpus.error();
  for (const GpuIdentity& gpu : *gpus) {
    GpuHistory summary{.gpu = gpu};
    for (auto [metric, range] : {std::tuple{Metric::kTemperatureC, &summary.temperature_c},
                                 std::tuple{Metric::kUtilizationGpuPercent, &summary.utilization_gpu_percent},
                                 std::tuple{Metric::kMemoryUsedBytes, &summary.memory_used_bytes}}) {
      auto series = store.QuerySeries({.gpu = gpu.uuid.empty() ? std::to_string(gpu.index) : gpu.uuid,
                                       .metric = metric,
                                       .from = from,
                                       .until = until});
      if (!series) return series.error();
      *range = RangeOf(series->points);
    }
    if (summary.temperature_c || summary.utilization_gpu_percent || summary.memory_used_bytes)
      history.gpus.push_back(std::move(summary));
  }
  std::sort(history.gpus.begin(), history.gpus.end(), [](const GpuHistory& a, const GpuHistory& b) {
    return std::tie(a.gpu.index, a.gpu.uuid) < std::tie(b.gpu.index, b.gpu.uuid);
  });

  auto findings = store.QueryFindings({.from = from, .until = until});
  if (!findings) return findings.error();
  history.findings = std::move(*findings);
  return history;
}

RecentHistory ReadRecentHistory(const std::string& database, WallTime now, Duration window) {
  RecentHistory history;
  history.database = database;
  history.from = now - window;
  history.until = now;
  auto unreadable = [&](std::string note) {
    history.state = RecentHistory::State::kUnreadable;
    history.note = std::move(note);
    return history;
  };

  OpenedHistory opened = OpenHistoryReadOnly(database, now);
  if (opened.state != RecentHistory::State::kRead) {
    history.state = opened.state;
    history.note = std::move(opened.note);
    return history;
  }
  auto summary = SummarizeHistory(*opened.store, history.from, history.until);
  if (!summary) return unreadable(database + ": " + summary.error().message);
  summary->database = database;
  return std::move(*summary);
}

std::vector<HistoryEvidence> EvidenceFromHistory(const RecentHistory& history, const HealthConfig& config,
                                                 const std::vector<Finding>& current) {
  std::set<std::string> current_keys;
  for (const Finding& finding : current)
    if (finding.severity == Severity::kWarning || finding.severity == Severity::kCritical)
      current_keys.insert(FindingKey(finding));
  std::vector<HistoryEvidence> evidence;
  for (const GpuHistory& gpu : history.gpus) {
    if (!TemperatureClimbed(gpu.temperature_c)) continue;
    const MetricRange& t = *gpu.temperature_c;
    evidence.push_back({"thermal", fmt::format("history: {} temperature rose from {:.0f} to {:.0f} °C in {} (peak "
                                               "{:.0f} °C)",
                                               Label(gpu.gpu), t.first, t.last, HistoryWindowText(history), t.max)});
  }
  for (const StoredFinding& incident : history.findings) {
    const Finding& finding = incident.finding;
    if (finding.severity != Severity::kWarning && finding.severity != Severity::kCritical) continue;
    if (current_keys.count(incident.key)) continue;
    const std::string_view category = config.Category(finding.id);
    if (category == "unknown") continue;  // log findings: the current log is weighed event by event
    evidence.push_back({std::string(category),
                        fmt::format("history: {} ({}) {}: {}", finding.id, SeverityName(finding.severity),
                                    IncidentTimes(incident), finding.summary)});
  }
  return evidence;
}

nlohmann::json RecentHistoryToJson(const RecentHistory& history) {
  nlohmann::json json = {{"database", history.database},
                         {"status", StateName(history.state)},
                         {"from", FormatIsoUtc(history.from)},
                         {"until", FormatIsoUtc(history.until)}};
  if (!history.note.empty()) json["note"] = history.note;
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuHistory& gpu : history.gpus) {
    gpus.push_back({{"index", gpu.gpu.index},
                    {"uuid", gpu.gpu.uuid.empty() ? nlohmann::json(nullptr) : nlohmann::json(gpu.gpu.uuid)},
                    {"temperature_c", RangeToJson(gpu.temperature_c)},
                    {"utilization_gpu_percent", RangeToJson(gpu.utilization_gpu_percent)},
                    {"memory_used_bytes", RangeToJson(gpu.memory_used_bytes)}});
  }
  json["gpus"] = std::move(gpus);
  nlohmann::json findings = nlohmann::json::array();
  for (const StoredFinding& incident : history.findings) findings.push_back(StoredFindingToJson(incident));
  json["findings"] = std::move(findings);
  return json;
}

}  // namespace gpudoctor
