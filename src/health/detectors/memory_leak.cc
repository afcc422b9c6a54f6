#include "health/detectors/memory_leak.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/text.h"

namespace gpudoctor {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double MinutesBetween(WallTime from, WallTime to) { return std::chrono::duration<double>(to - from).count() / 60.0; }

double LeastSquaresSlope(const std::vector<const MemoryPoint*>& points) {
  const WallTime origin = points.front()->time;
  double mean_x = 0, mean_y = 0;
  for (const MemoryPoint* p : points) {
    mean_x += MinutesBetween(origin, p->time);
    mean_y += p->used_bytes;
  }
  mean_x /= static_cast<double>(points.size());
  mean_y /= static_cast<double>(points.size());
  double covariance = 0, variance = 0;
  for (const MemoryPoint* p : points) {
    const double dx = MinutesBetween(origin, p->time) - mean_x;
    covariance += dx * (p->used_bytes - mean_y);
    variance += dx * dx;
  }
  return variance > 0 ? covariance / variance : 0;
}

}  // namespace

std::optional<GrowthAnalysis> AnalyzeGrowth(const std::deque<MemoryPoint>& series, const MemoryLeakConfig& config,
                                            WallTime now) {
  std::vector<const MemoryPoint*> points;
  for (const MemoryPoint& point : series)
    if (point.time >= now - config.window) points.push_back(&point);
  if (points.size() < 3) return std::nullopt;
  GrowthAnalysis growth;
  growth.span = points.back()->time - points.front()->time;
  if (growth.span < config.min_span) return std::nullopt;

  growth.rate_bytes_per_min = LeastSquaresSlope(points);
  growth.latest_bytes = points.back()->used_bytes;
  for (const MemoryPoint* p : points) growth.peak_bytes = std::max(growth.peak_bytes, p->used_bytes);

  const int phases = std::max(config.phases, 2);
  growth.troughs.assign(static_cast<size_t>(phases), INFINITY);
  const double span_min = MinutesBetween(points.front()->time, points.back()->time);
  for (const MemoryPoint* p : points) {
    const double position = MinutesBetween(points.front()->time, p->time) / span_min;
    const size_t phase = std::min(static_cast<size_t>(position * phases), static_cast<size_t>(phases - 1));
    growth.troughs[phase] = std::min(growth.troughs[phase], p->used_bytes);
  }
  if (std::any_of(growth.troughs.begin(), growth.troughs.end(), [](double t) { return std::isinf(t); }))
    return std::nullopt;
  growth.unreleased_bytes = growth.troughs.back() - growth.troughs.front();
  // Every phase must keep the pace: a warm-up or a single allocation rises in
  // one or two phases and then stops.
  const double average_rise = growth.unreleased_bytes / static_cast<double>(phases - 1);
  const double min_rise = std::max(config.min_trough_rise_mib * kMiB, config.min_trough_rise_share * average_rise);
  growth.troughs_rising = true;
  for (size_t i = 1; i < growth.troughs.size(); ++i)
    if (growth.troughs[i] - growth.troughs[i - 1] < min_rise) growth.troughs_rising = false;
  return growth;
}

bool IsLeak(const GrowthAnalysis& growth, const MemoryLeakConfig& config) {
  return growth.troughs_rising && growth.rate_bytes_per_min >= config.min_rate_mib_per_min * kMiB;
}

std::string DescribeGrowth(const GrowthAnalysis& growth) {
  return fmt::format("rate {:.1f} MiB/min over {}, peak {}, now {}, unreleased between phases {}",
                     growth.rate_bytes_per_min / kMiB, FormatDuration(growth.span), FormatBytes(growth.peak_bytes),
                     FormatBytes(growth.latest_bytes), FormatBytes(growth.unreleased_bytes));
}

std::optional<Finding> DetectMemoryLeak(const GpuTrack& track, const MemoryLeakConfig& config, WallTime now,
                                        const ProcessCommandLines& command_lines) {
  struct Leak {
    const ProcessKey* process;
    GrowthAnalysis growth;
  };
  std::vector<Leak> leaks;
  for (const auto& [process, series] : track.process_memory) {
    auto growth = AnalyzeGrowth(series, config, now);
    if (growth && IsLeak(*growth, config)) leaks.push_back({&process, *growth});
  }
  if (leaks.empty()) return std::nullopt;
  std::sort(leaks.begin(), leaks.end(),
            [](const Leak& a, const Leak& b) { return a.growth.rate_bytes_per_min > b.growth.rate_bytes_per_min; });

  // Time to exhaustion: the GPU's free memory at the combined growth rate.
  double total_rate = 0;
  for (const Leak& leak : leaks) total_rate += leak.growth.rate_bytes_per_min;
  std::optional<double> minutes_to_full;
  if (track.memory_total_bytes && track.memory_used_bytes)
    minutes_to_full = std::max(0.0, *track.memory_total_bytes - *track.memory_used_bytes) / total_rate;
  // A fill centuries away is shown as 31 years: the time must fit a Duration.
  const std::optional<Duration> until_full =
      minutes_to_full ? DurationFromSeconds(std::min(*minutes_to_full * 60, 1e9)) : std::nullopt;
  const std::string to_full =
      until_full ? "~" + FormatDuration(*until_full) : std::string("unknown (GPU memory totals not reported)");

  Finding finding;
  finding.id = "memory_leak";
  finding.gpu = track.ref;
  finding.severity = minutes_to_full && *minutes_to_full * 60 <
                                            std::chrono::duration<double>(config.critical_time_to_full).count()
                         ? Severity::kCritical
                         : Severity::kWarning;
  const Leak& worst = leaks.front();
  const std::string name = worst.process->name.empty() ? "process" : worst.process->name;
  finding.summary = fmt::format("{}: {} (pid {}) GPU memory grows {:.1f} MiB/min; full in {}", GpuLabel(track.ref),
                                name, worst.process->pid, worst.growth.rate_bytes_per_min / kMiB, to_full);
  if (leaks.size() > 1) finding.summary += fmt::format(" ({} processes growing)", leaks.size());
  std::vector<std::string> worst_command;
  for (const Leak& leak : leaks) {
    finding.evidence.push_back(fmt::format("pid {} ({}): {}", leak.process->pid,
                                           leak.process->name.empty() ? "?" : leak.process->name,
                                           DescribeGrowth(leak.growth)));
    if (!command_lines) continue;
    std::vector<std::string> command = command_lines(leak.process->pid, leak.process->name);
    if (command.empty()) continue;
    finding.evidence.push_back(fmt::format("pid {} command line: {}", leak.process->pid, ShellQuote(command)));
    if (&leak == &leaks.front()) worst_command = std::move(command);
  }
  finding.evidence.push_back("time to exhaustion: " + to_full);
  if (track.memory_total_bytes && track.memory_used_bytes)
    finding.evidence.push_back(fmt::format("gpu memory used {} of {}", FormatBytes(*track.memory_used_bytes),
                                           FormatBytes(*track.memory_total_bytes)));
  finding.cause =
      "Memory the process allocates is not released between phases (requests, batches, epochs): tensors kept alive "
      "by references (lists of losses, caches, retained graphs) or a growing allocator cache.";
  finding.actions = {
      worst_command.empty()
          ? fmt::format("Find the call that allocates what is never freed: start pid {}'s program again as "
                        "`gpudoctor trace-alloc -- COMMAND` (its command line could not be read)",
                        worst.process->pid)
          : "Find the call that allocates what is never freed: gpudoctor trace-alloc -- " + ShellQuote(worst_command),
      "Compare torch.cuda.memory_allocated() and memory_reserved() between phases; keep loss.item(), not the tensor",
      "Take a memory snapshot (torch.cuda.memory._record_memory_history / _dump_snapshot) to see what grows",
      "Restart the process before the GPU fills if it serves others, and schedule the fix"};
  return finding;
}

}  // namespace gpudoctor
