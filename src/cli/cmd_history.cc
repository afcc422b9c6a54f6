// `gpudoctor history`: what the agent recorded: a metric of a GPU over time,
// or the findings that were open, from the SQLite history (read-only).
//
//   gpudoctor history                                   GPUs in the file, open findings
//   gpudoctor history --gpu 0 --metric temperature_c --since 6h
//   gpudoctor history --findings --since 7d --json
//
// Exit codes: 66 the file cannot be opened (missing, unreadable, not a regular
// file), 65 it is not a gpudoctor history or cannot be read where it lies,
// 64 bad arguments (unknown metric or GPU, unreadable time).

#include <time.h>

#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/terminal.h"
#include "cli/time_option.h"
#include "common/input_file.h"
#include "common/json_text.h"
#include "common/suggest.h"
#include "common/text.h"
#include "health/finding_json.h"
#include "store/sqlite_store.h"

namespace gpudoctor {
namespace {

struct HistoryOptions {
  std::string database = kDefaultHistoryDatabase;
  std::string gpu;
  std::string metric;
  std::string since = "1h";
  std::string until = "now";
  std::string resolution = "auto";
  bool findings = false;
  bool open_only = false;
};

// "auto" leaves `resolution` empty; false for an unknown name.
bool ParseResolution(std::string_view text, std::optional<Resolution>& resolution) {
  resolution.reset();
  if (text == "auto") return true;
  for (Resolution r : {Resolution::kRaw, Resolution::kMinute, Resolution::kHour}) {
    if (text == ResolutionName(r)) {
      resolution = r;
      return true;
    }
  }
  return false;
}

// A value as people read it, in its metric's unit: "17.6 GiB", "312.5 W",
// "67 °C", "98 %", "1410 MHz", "3 errors".
std::string WithUnit(double value, std::string_view unit) {
  if (unit == "B") {
    static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    size_t i = 0;
    double scaled = value;
    while (std::abs(scaled) >= 1024 && i + 1 < std::size(kUnits)) {
      scaled /= 1024;
      ++i;
    }
    return i == 0 ? fmt::format("{:.0f} B", value) : fmt::format("{:.2f} {}", scaled, kUnits[i]);
  }
  const double rounded = std::round(value * 10) / 10;
  const std::string number =
      rounded == std::round(rounded) ? fmt::format("{:.0f}", rounded) : fmt::format("{:.1f}", rounded);
  return number + " " + std::string(unit);
}

// What was done about each incident (gpudoctor ack, reboots), by incident id.
using RemediationsByIncident = std::map<int64_t, std::vector<Remediation>>;

nlohmann::json RemediationToJson(const Remediation& remediation) {
  return {{"id", remediation.id},
          {"kind", RemediationKindName(remediation.kind)},
          {"at", FormatIsoUtc(remediation.at)},
          {"by", remediation.actor},
          {"note", remediation.note},
          {"gpu_reset", remediation.gpu_reset}};
}

nlohmann::json IncidentToJson(const StoredFinding& incident, const RemediationsByIncident& remediations) {
  nlohmann::json json = FindingToJson(incident.finding);
  json["incident_id"] = incident.incident_id;
  json["state"] = incident.open() ? "open" : "resolved";
  json["opened_at"] = FormatIsoUtc(incident.opened_at);
  json["last_seen"] = FormatIsoUtc(incident.last_seen);
  json["resolved_at"] = incident.resolved_at ? nlohmann::json(FormatIsoUtc(*incident.resolved_at)) : nullptr;
  nlohmann::json done = nlohmann::json::array();
  if (auto it = remediations.find(incident.incident_id); it != remediations.end())
    for (const Remediation& remediation : it->second) done.push_back(RemediationToJson(remediation));
  json["remediations"] = std::move(done);
  return json;
}

nlohmann::json GpuToJson(const GpuIdentity& gpu) {
  return {{"index", gpu.index}, {"uuid", gpu.uuid.empty() ? nlohmann::json(nullptr) : nlohmann::json(gpu.uuid)}};
}

class HistoryCommand {
 public:
  HistoryCommand(const HistoryOptions& options, const GlobalOptions& global)
      : options_(options), global_(global), style_(global.color, stdout) {}

  int Run() {
    const WallTime now = SystemClock::Instance().Now();
    auto from = ParseWhen(options_.since, now);
    auto until = ParseWhen(options_.until, now);
    if (!from) return Fail(exit_code::kUsage, "--since: expected \"now\", a duration like 6h, or 2024-05-01T12:00:00Z");
    if (!until) return Fail(exit_code::kUsage, "--until: expected \"now\", a duration like 6h, or 2024-05-01T12:00:00Z");
    if (*from >= *until) return Fail(exit_code::kUsage, "--since must be before --until");
    from_ = *from;
    until_ = *until;

    if (auto file = InputFile::Open(options_.database); !file)
      return Fail(exit_code::kNoInput, "--db: " + file.error().message);
    SqliteStoreOptions store_options;
    store_options.read_only = true;
    auto store = SqliteHistoryStore::Open(options_.database, store_options);
    if (!store) return Fail(exit_code::kDataError, store.error().message);
    store_ = std::move(*store);

    if (options_.findings) return Findings(options_.open_only, /*whole_history=*/false);
    if (!options_.metric.empty()) return Series();
    return Overview();
  }

 private:
  int Fail(int code, const std::string& message) {
    std::fprintf(stderr, "gpudoctor history: %s\n", message.c_str());
    return code;
  }

  // Every remediation in the file: a few per incident at most, kept 90 days.
  Result<RemediationsByIncident> Remediations() const {
    auto all = store_->QueryRemediations({.from = WallTime{}, .until = WallTime::max()});
    if (!all) return all.error();
    RemediationsByIncident by_incident;
    for (Remediation& remediation : *all) by_incident[remediation.incident_id].push_back(std::move(remediation));
    return by_incident;
  }

  int Findings(bool open_only, bool whole_history) {
    auto incidents = store_->QueryFindings({.from = from_, .until = until_, .gpu = options_.gpu, .open_only = open_only});
    if (!incidents) return Fail(exit_code::kDataError, incidents.error().message);
    auto remediations = Remediations();
    if (!remediations) return Fail(exit_code::kDataError, remediations.error().message);
    if (global_.json) {
      nlohmann::json list = nlohmann::json::array();
      for (const StoredFinding& incident : *incidents) list.push_back(IncidentToJson(incident, *remediations));
      Print({{"from", FormatIsoUtc(from_)}, {"until", FormatIsoUtc(until_)}, {"findings", list}});
      return exit_code::kOk;
    }
    if (incidents->empty()) {
      if (whole_history) std::printf("None.\n");
      else std::printf("No findings between %s and %s.\n", FormatIsoUtc(from_).c_str(), FormatIsoUtc(until_).c_str());
      return exit_code::kOk;
    }
    std::printf("%s\n", style_.Bold(fmt::format("{:>6}  {:<8}  {:<8}  {:<22}  {:<5}  {:<24}  {:<24}  {}", "ID", "STATE",
                                                "SEVERITY", "RULE", "GPU", "OPENED", "RESOLVED", "SUMMARY"))
                            .c_str());
    for (const StoredFinding& incident : *incidents) {
      const Finding& finding = incident.finding;
      const std::string gpu = finding.gpu && finding.gpu->index ? std::to_string(*finding.gpu->index) : "-";
      const std::string severity = fmt::format("{:<8}", SeverityName(finding.severity));
      std::printf("%6lld  %-8s  %s  %-22s  %-5s  %-24s  %-24s  %s\n", static_cast<long long>(incident.incident_id),
                  incident.open() ? "open" : "resolved",
                  style_.color() ? style_.Severity(finding.severity).c_str() : severity.c_str(), finding.id.c_str(),
                  gpu.c_str(), FormatIsoUtc(incident.opened_at).c_str(),
                  incident.resolved_at ? FormatIsoUtc(*incident.resolved_at).c_str() : "-", finding.summary.c_str());
      if (!finding.part_of.empty()) std::printf("%6s  part of %s\n", "", finding.part_of.c_str());
      if (auto it = remediations->find(incident.incident_id); it != remediations->end()) {
        for (const Remediation& remediation : it->second)
          std::printf("%6s  %s: %s\n", "", FormatIsoUtc(remediation.at).c_str(), DescribeRemediation(remediation).c_str());
      }
    }
    return exit_code::kOk;
  }

  int Series() {
    auto metric = MetricFromName(options_.metric);
    if (!metric) {
      std::vector<std::string> names;
      for (const MetricInfo& info : kMetrics) names.emplace_back(info.name);
      return Fail(exit_code::kUsage, "unknown metric '" + options_.metric + "'." +
                                         DidYouMean(NearestNames(options_.metric, names)) +
                                         " The metrics: " + QuotedList(names, "and"));
    }
    std::optional<Resolution> resolution;
    if (!ParseResolution(options_.resolution, resolution))
      return Fail(exit_code::kUsage, "--resolution: expected auto, raw, 1m or 1h");
    auto gpus = SelectedGpus();
    if (!gpus) return Fail(exit_code::kUsage, gpus.error().message);

    nlohmann::json series_list = nlohmann::json::array();
    for (const GpuIdentity& gpu : *gpus) {
      auto series = store_->QuerySeries({.gpu = gpu.uuid.empty() ? std::to_string(gpu.index) : gpu.uuid,
                                         .metric = *metric,
                                         .from = from_,
                                         .until = until_,
                                         .resolution = resolution});
      if (!series) return Fail(exit_code::kDataError, series.error().message);
      if (global_.json) {
        nlohmann::json points = nlohmann::json::array();
        for (const SeriesPoint& p : series->points)
          points.push_back({{"t", FormatIsoUtc(p.time)}, {"min", p.min}, {"avg", p.avg}, {"max", p.max}});
        series_list.push_back(
            {{"gpu", GpuToJson(series->gpu)}, {"resolution", ResolutionName(series->resolution)}, {"points", points}});
        continue;
      }
      std::printf("%s\n", style_.Bold(fmt::format("GPU {}{} {} ({}, {} points)", gpu.index,
                                                  gpu.uuid.empty() ? "" : " " + gpu.uuid, options_.metric,
                                                  ResolutionName(series->resolution), series->points.size()))
                              .c_str());
      const bool raw = series->resolution == Resolution::kRaw;
      const std::string_view unit = kMetrics[MetricSlot(*metric)].unit;
      std::printf("  %-24s  %s\n", "TIME", raw ? "VALUE" : "MIN           AVG           MAX");
      for (const SeriesPoint& p : series->points) {
        if (raw) std::printf("  %-24s  %s\n", FormatIsoUtc(p.time).c_str(), WithUnit(p.avg, unit).c_str());
        else
          std::printf("  %-24s  %-12s  %-12s  %s\n", FormatIsoUtc(p.time).c_str(), WithUnit(p.min, unit).c_str(),
                      WithUnit(p.avg, unit).c_str(), WithUnit(p.max, unit).c_str());
      }
    }
    if (global_.json) {
      const MetricInfo& info = kMetrics[MetricSlot(*metric)];
      Print({{"metric", info.name},
             {"unit", info.unit},
             {"from", FormatIsoUtc(from_)},
             {"until", FormatIsoUtc(until_)},
             {"series", series_list}});
    }
    return exit_code::kOk;
  }

  int Overview() {
    auto gpus = SelectedGpus();
    if (!gpus) return Fail(exit_code::kUsage, gpus.error().message);
    if (global_.json) {
      nlohmann::json list = nlohmann::json::array();
      for (const GpuIdentity& gpu : *gpus) list.push_back(GpuToJson(gpu));
      auto open = store_->QueryFindings({.from = WallTime{}, .until = WallTime::max(), .gpu = options_.gpu, .open_only = true});
      if (!open) return Fail(exit_code::kDataError, open.error().message);
      nlohmann::json findings = nlohmann::json::array();
      auto remediations = Remediations();
      if (!remediations) return Fail(exit_code::kDataError, remediations.error().message);
      for (const StoredFinding& incident : *open) findings.push_back(IncidentToJson(incident, *remediations));
      nlohmann::json metrics = nlohmann::json::array();
      for (const MetricInfo& info : kMetrics) metrics.push_back({{"name", info.name}, {"unit", info.unit}});
      Print({{"gpus", list}, {"open_findings", findings}, {"metrics", metrics}});
      return exit_code::kOk;
    }
    std::printf("%s\n", style_.Bold(fmt::format("{} GPU(s) in {}", gpus->size(), options_.database)).c_str());
    for (const GpuIdentity& gpu : *gpus)
      std::printf("  GPU %u  %s\n", gpu.index, gpu.uuid.empty() ? "(no UUID)" : gpu.uuid.c_str());
    std::printf("Metrics (--metric):");
    for (const MetricInfo& info : kMetrics) std::printf(" %s", std::string(info.name).c_str());
    std::printf("\n\n");
    from_ = WallTime{};
    until_ = WallTime::max();
    std::printf("%s\n", style_.Bold("Open findings").c_str());
    return Findings(/*open_only=*/true, /*whole_history=*/true);
  }

  Result<std::vector<GpuIdentity>> SelectedGpus() {
    auto gpus = store_->ListGpus();
    if (!gpus) return gpus.error();
    if (options_.gpu.empty()) return gpus;
    std::vector<GpuIdentity> selected;
    for (const GpuIdentity& gpu : *gpus)
      if (MatchesGpu(gpu, options_.gpu)) selected.push_back(gpu);
    if (selected.empty()) return Error{"no GPU '" + options_.gpu + "' in the history"};
    return selected;
  }

  static void Print(const nlohmann::json& json) {
    std::printf("%s\n", ToJsonText(json).c_str());
  }

  const HistoryOptions& options_;
  const GlobalOptions& global_;
  Style style_;
  std::unique_ptr<SqliteHistoryStore> store_;
  WallTime from_, until_;
};

}  // namespace

void RegisterHistoryCommand(CLI::App& app, CommandContext& context) {
  auto options = std::make_shared<HistoryOptions>();
  CLI::App* command = app.add_subcommand(
      "history", "Show what the agent recorded: a GPU metric over time, or the findings that were open");
  command->add_option("--db", options->database, "History file written by `gpudoctor agent`")->capture_default_str();
  command->add_option("--gpu", options->gpu, "GPU index or UUID (default: every GPU)");
  command->add_option("--metric", options->metric, "Metric to show, e.g. temperature_c, power_w, utilization_gpu_percent");
  command->add_option("--since", options->since, "Start: \"now\", a duration before now (6h, 7d) or UTC 2024-05-01T12:00:00Z")
      ->capture_default_str();
  command->add_option("--until", options->until, "End, in the same forms as --since")->capture_default_str();
  command->add_option("--resolution", options->resolution, "raw, 1m, 1h or auto (by the length of the range)")
      ->capture_default_str();
  command->add_flag("--findings", options->findings, "List the findings open at any time in the range");
  command->add_flag("--open", options->open_only, "With --findings: only those still open");
  command->footer(
      "Examples:\n"
      "  gpudoctor history --gpu 0 --metric temperature_c --since 6h\n"
      "  gpudoctor history --findings --since 7d --json\n"
      "The global --json flag prints JSON (docs/store.md describes the fields).");
  command->callback([options, &context] {
    context.exit_code = HistoryCommand(*options, context.options).Run();
  });
}

}  // namespace gpudoctor
