#include "health/detectors/utilization_rules.h"

#include <fmt/format.h>

#include <algorithm>

namespace gpudoctor {
namespace {

bool SpinningAtFull(const GpuPoint& point, const UtilizationStuckConfig& config) {
  if (!point.utilization_percent() || *point.utilization_percent() < config.high_percent) return false;
  if (point.process_count() == 0u) return true;
  if (point.sm_active()) return *point.sm_active() < config.busy_wait_sm_active;
  return point.power_w() && point.power_limit_w() && *point.power_limit_w() > 0 &&
         *point.power_w() < config.busy_wait_power_fraction * *point.power_limit_w();
}

bool IdleWithProcesses(const GpuPoint& point, const UtilizationStuckConfig& config) {
  return point.utilization_percent() && *point.utilization_percent() <= config.low_percent && point.process_count() &&
         *point.process_count() > 0;
}

Finding Make(const char* id, Severity severity, const GpuRef& gpu) {
  Finding finding;
  finding.id = id;
  finding.severity = severity;
  finding.gpu = gpu;
  return finding;
}

}  // namespace

std::optional<Finding> DetectUtilizationStuck(const GpuTrack& track, const UtilizationStuckConfig& config,
                                              Duration max_gap) {
  if (track.points.empty()) return std::nullopt;
  const GpuPoint& last = track.points.back();
  const std::string gpu = GpuLabel(track.ref);

  if (auto held = HeldFor(track.points, [&](const GpuPoint& p) { return SpinningAtFull(p, config); }, max_gap);
      held && *held >= config.after) {
    Finding finding = Make("utilization_stuck", Severity::kWarning, track.ref);
    const bool no_process = last.process_count() == 0u;
    finding.summary = fmt::format("{} utilisation stuck at {:.0f}% for {} {}", gpu, *last.utilization_percent(),
                                  FormatDuration(*held),
                                  no_process         ? "with no compute process"
                                  : last.sm_active() ? "while its SMs are idle"
                                                     : "while drawing little power");
    finding.evidence.push_back(fmt::format("utilization_gpu={:.0f}% for {} (threshold {})", *last.utilization_percent(),
                                           FormatDuration(*held), FormatDuration(config.after)));
    if (last.sm_active())
      finding.evidence.push_back(fmt::format("sm_active={:.1f}% (GPM; threshold {:.1f}%)", 100 * *last.sm_active(),
                                             100 * config.busy_wait_sm_active));
    if (last.power_w() && last.power_limit_w())
      finding.evidence.push_back(
          fmt::format("power={:.0f} W of a {:.0f} W limit", *last.power_w(), *last.power_limit_w()));
    if (last.process_count()) finding.evidence.push_back(fmt::format("compute_processes={}", *last.process_count()));
    finding.cause = no_process
                        ? "Nothing owns the GPU yet it reports full use: a context or kernel left behind by a process "
                          "that died, or a driver-level hang."
                        : "A kernel that spins without progress, typically a collective (NCCL all-reduce) waiting for "
                          "a peer that never arrives, keeps utilisation at 100% while drawing little power.";
    finding.actions = {"List what runs on the GPU: nvidia-smi --query-compute-apps=pid,name,used_memory --format=csv",
                       "Dump the stacks of the job's ranks (py-spy dump --pid PID) to find the one that is stuck",
                       "If no process owns the GPU, reset it once idle (nvidia-smi -r -i INDEX) or reboot the node"};
    return finding;
  }

  if (auto held = HeldFor(track.points, [&](const GpuPoint& p) { return IdleWithProcesses(p, config); }, max_gap);
      held && *held >= config.after) {
    Finding finding = Make("utilization_stuck", Severity::kWarning, track.ref);
    finding.summary = fmt::format("{} at {:.0f}% utilisation for {} while {} compute process(es) hold it", gpu,
                                  *last.utilization_percent(), FormatDuration(*held), *last.process_count());
    finding.evidence = {fmt::format("utilization_gpu={:.0f}% for {} (threshold {})", *last.utilization_percent(),
                                    FormatDuration(*held), FormatDuration(config.after)),
                        fmt::format("compute_processes={}", *last.process_count())};
    finding.cause =
        "The processes hold GPU memory but launch no work: a job blocked on I/O, a data loader or a lock, a rank "
        "waiting for a dead peer, or an abandoned notebook or server.";
    finding.actions = {"Check what the processes are doing (py-spy dump --pid PID, or strace -p PID)",
                       "If the job is abandoned, stop it to free the GPU for others"};
    return finding;
  }
  return std::nullopt;
}

std::optional<Finding> DetectUtilizationFlapping(const GpuTrack& track, const UtilizationFlappingConfig& config,
                                                 WallTime now) {
  enum class Level { kUnknown, kLow, kHigh };
  Level level = Level::kUnknown;
  int transitions = 0;
  double lowest = 100, highest = 0;
  for (const GpuPoint* point : PointsSince(track.points, now - config.window)) {
    if (!point->utilization_percent()) continue;
    const double util = *point->utilization_percent();
    lowest = std::min(lowest, util);
    highest = std::max(highest, util);
    // Between the two thresholds the level stays what it was (hysteresis).
    Level next = util >= config.high_percent ? Level::kHigh : util <= config.low_percent ? Level::kLow : level;
    if (level != Level::kUnknown && next != level) ++transitions;
    level = next;
  }
  if (transitions < config.min_transitions) return std::nullopt;
  Finding finding = Make("utilization_flapping", Severity::kWarning, track.ref);
  finding.summary = fmt::format("{} utilisation swung between high and low {} times in {}", GpuLabel(track.ref),
                                transitions, FormatDuration(config.window));
  finding.evidence = {fmt::format("transitions={} (>= {} counted, high >= {:.0f}%, low <= {:.0f}%)", transitions,
                                  config.min_transitions, config.high_percent, config.low_percent),
                      fmt::format("utilization_gpu range {:.0f}%..{:.0f}% over {}", lowest, highest,
                                  FormatDuration(config.window))};
  finding.cause =
      "Work reaches the GPU in bursts: the input pipeline (data loading, CPU preprocessing) cannot keep it fed, "
      "ranks wait on each other, or clocks are being throttled.";
  finding.actions = {"Profile the input pipeline: more DataLoader workers, pinned memory, prefetching",
                     "Check the clock event reasons for power or thermal throttling (gpudoctor status)",
                     "Check whether the host CPUs or storage are saturated while the GPU waits"};
  return finding;
}

std::optional<Finding> DetectTensorCoresIdle(const GpuTrack& track, const TensorCoresIdleConfig& config,
                                             Duration max_gap) {
  auto computing_without_tensor_cores = [&](const GpuPoint& p) {
    return p.utilization_percent() && *p.utilization_percent() >= config.min_utilization_percent &&
           p.sm_active() && *p.sm_active() >= config.min_sm_active && p.tensor_active() &&
           *p.tensor_active() < config.max_tensor_active && p.process_count() && *p.process_count() > 0;
  };
  auto held = HeldFor(track.points, computing_without_tensor_cores, max_gap);
  if (!held || *held < config.after) return std::nullopt;
  const GpuPoint& last = track.points.back();
  Finding finding = Make("tensor_cores_idle", Severity::kWarning, track.ref);
  finding.summary = fmt::format("{} busy for {} with its tensor cores at {:.1f}%: the job computes without them",
                                GpuLabel(track.ref), FormatDuration(*held), 100 * *last.tensor_active());
  finding.evidence = {
      fmt::format("tensor_active={:.1f}% (GPM; under {:.1f}%) for {} (threshold {})", 100 * *last.tensor_active(),
                  100 * config.max_tensor_active, FormatDuration(*held), FormatDuration(config.after)),
      fmt::format("sm_active={:.0f}%, utilization_gpu={:.0f}%", 100 * *last.sm_active(), *last.utilization_percent()),
      fmt::format("compute_processes={}", *last.process_count())};
  finding.cause =
      "The SMs are busy but none of the work reaches the tensor cores: matrix math in plain FP32 (without TF32 or "
      "mixed precision), or kernels the framework could not map onto them. A Hopper GPU then runs the job at a "
      "small fraction of its throughput (dense FP32 is about 67 TFLOPS on an H100 SXM, BF16 on tensor cores about "
      "990).";
  finding.actions = {
      "Enable TF32 or mixed precision in the job (PyTorch: torch.backends.cuda.matmul.allow_tf32 = True, "
      "torch.autocast(\"cuda\", dtype=torch.bfloat16))",
      "Profile a few steps (nsys profile) to see which kernels take the time",
      "For work that cannot use tensor cores (integer, FP32 stencils), raise [detectors.tensor_cores_idle] after"};
  return finding;
}

std::optional<Finding> DetectGpuStraggler(const GpuTrack& track, const StragglerConfig& config, Duration max_gap) {
  auto held = HeldFor(track.points, [](const GpuPoint& p) { return p.idle_while_peers_busy(); }, max_gap);
  if (!held || *held < config.after) return std::nullopt;
  const GpuPoint& last = track.points.back();
  Finding finding = Make("gpu_straggler", Severity::kWarning, track.ref);
  finding.summary = fmt::format("{} idle for {} while its peers are busy", GpuLabel(track.ref), FormatDuration(*held));
  finding.evidence = {fmt::format("utilization_gpu={:.0f}% (idle <= {:.0f}%) for {}", *last.utilization_percent(),
                                  config.idle_percent, FormatDuration(*held)),
                      fmt::format("compute_processes={}", last.process_count().value_or(0)),
                      fmt::format("at least {} other GPUs at >= {:.0f}% throughout", config.min_busy_peers,
                                  config.busy_percent)};
  finding.cause =
      "In a data-parallel job one hung or slow rank leaves its GPU idle while the other ranks spin in collectives "
      "waiting for it.";
  finding.actions = {"Find the rank on this GPU and dump its stack (py-spy dump --pid PID)",
                     "Check this GPU and its node for Xid errors and for I/O or network stalls",
                     "Restart the job from its last checkpoint if the rank is hung"};
  return finding;
}

void MarkStragglers(std::vector<GpuPoint*>& instant, const StragglerConfig& config) {
  auto busy = [&](const GpuPoint* p) {
    return p->utilization_percent() && *p->utilization_percent() >= config.busy_percent;
  };
  const int busy_total = static_cast<int>(std::count_if(instant.begin(), instant.end(), busy));
  int readable = 0;
  for (const GpuPoint* point : instant) readable += point->utilization_percent().has_value();
  for (GpuPoint* point : instant) {
    const bool idle = point->utilization_percent() && *point->utilization_percent() <= config.idle_percent;
    const bool holds_work = point->process_count() && *point->process_count() > 0;
    const int peers = readable - 1;
    // The GPU itself is idle, so every busy GPU is a peer.
    point->set_idle_while_peers_busy(idle && holds_work && busy_total >= config.min_busy_peers &&
                                     busy_total * 2 > peers);
  }
}

}  // namespace gpudoctor
