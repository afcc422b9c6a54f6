#include "fleet/fleet_history.h"

#include <algorithm>

#include <fmt/format.h>

namespace gpudoctor {
namespace {

SlotKey SlotOf(const PromSeries& series) {
  return {.hostname = series.Label("hostname"), .pci_bus_id = series.Label("pci_bus_id"),
          .slot_name = series.Label("slot")};
}

// Splits each series' points into stays: a gap of more than two steps ends one.
void AddPlacements(const std::vector<PromSeries>& info, Duration step, std::vector<Placement>& out) {
  for (const PromSeries& series : info) {
    const std::string& serial = series.Label("serial");
    if (serial.empty() || series.points.empty()) continue;
    Placement stay{.serial = serial, .slot = SlotOf(series), .from = series.points.front().time,
                   .to = series.points.front().time, .model = series.Label("name"), .gpu = series.Label("gpu")};
    for (const PromPoint& point : series.points) {
      if (point.time - stay.to > 2 * step) {
        out.push_back(stay);
        stay.from = point.time;
      }
      stay.to = point.time;
    }
    out.push_back(stay);
  }
}

// A GPU that fell off the bus no longer reports its PCI address or serial: its
// errors belong to the slot where the same host last saw that GPU index.
SlotKey LastKnownSlot(const std::vector<Placement>& placements, const PromSeries& series, WallTime time) {
  SlotKey slot = SlotOf(series);
  if (!slot.pci_bus_id.empty()) return slot;
  const Placement* last = nullptr;
  for (const Placement& p : placements) {
    if (p.slot.hostname != slot.hostname || p.gpu != series.Label("gpu") || p.slot.pci_bus_id.empty()) continue;
    if (p.from > time) continue;
    if (!last || p.to > last->to) last = &p;
  }
  return last ? last->slot : slot;
}

void AddEpisodes(const std::vector<PromSeries>& series, ErrorKind kind, const std::vector<Placement>& placements,
                 std::vector<ErrorEpisode>& out) {
  for (const PromSeries& s : series) {
    for (const PromPoint& point : s.points) {
      if (point.value <= 0) continue;
      out.push_back({.slot = LastKnownSlot(placements, s, point.time), .time = point.time, .kind = kind,
                     .count = point.value});
    }
  }
}

}  // namespace

Duration DefaultHistoryStep(Duration range) {
  return std::max<Duration>(std::chrono::seconds(15), std::chrono::duration_cast<std::chrono::seconds>(range / 720));
}

Result<FleetHistory> ReadFleetHistory(PrometheusApi& api, const FleetHistoryOptions& options) {
  FleetHistory history{.start = options.start, .end = options.end, .step = options.step};
  if (history.step <= Duration::zero()) history.step = DefaultHistoryStep(options.end - options.start);
  const std::string job = fmt::format("job=\"{}\"", options.job);
  const std::string window = PromDuration(history.step);
  auto range = [&](const std::string& promql) { return api.QueryRange(promql, options.start, options.end, history.step); };

  Result<std::vector<PromSeries>> info = range(fmt::format("gpudoctor_gpu_info{{{}}}", job));
  if (!info) return info.error();
  AddPlacements(*info, history.step, history.placements);

  // Each step's own errors: increase() over exactly one step, so the windows tile the range.
  const std::string by = "sum by (hostname, gpu, pci_bus_id)";
  struct ErrorQuery {
    ErrorKind kind;
    std::string promql;
  };
  const ErrorQuery queries[] = {
      {ErrorKind::kXid, fmt::format("{} (increase(gpudoctor_gpu_xid_errors_total{{{}}}[{}])) > 0", by, job, window)},
      {ErrorKind::kUncorrectableEcc,
       fmt::format("{} (increase(gpudoctor_gpu_ecc_errors_total{{{},type=\"uncorrected\",scope=\"volatile\"}}[{}])) > 0",
                   by, job, window)},
      {ErrorKind::kRowRemap,
       fmt::format("{} (delta(gpudoctor_gpu_remapped_rows{{{},type=\"uncorrectable\"}}[{}])) > 0", by, job, window)},
      {ErrorKind::kPcieReplays, fmt::format("{} (increase(gpudoctor_gpu_pcie_replays_total{{{}}}[{}])) > {:g}", by,
                                            job, window, options.replay_burst)},
      {ErrorKind::kFellOffBus,
       fmt::format("{} (min_over_time(gpudoctor_gpu_accessible{{{}}}[{}]) == bool 0) > 0", by, job, window)},
  };
  for (const ErrorQuery& query : queries) {
    Result<std::vector<PromSeries>> series = range(query.promql);
    if (!series) return series.error();
    AddEpisodes(*series, query.kind, history.placements, history.episodes);
  }
  std::sort(history.episodes.begin(), history.episodes.end(),
            [](const ErrorEpisode& a, const ErrorEpisode& b) { return a.time < b.time; });
  return history;
}

}  // namespace gpudoctor
