#include "health/detectors/trend_detectors.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/text.h"
#include "health/detectors/cooling.h"
#include "health/detectors/counter_rates.h"
#include "health/detectors/memory_leak.h"
#include "health/detectors/utilization_rules.h"

namespace gpudoctor {
namespace {

constexpr Duration kXidMemory = std::chrono::minutes(10);

std::string TrackKey(const GpuSnapshot& gpu) {
  if (gpu.uuid.has_value() && !gpu.uuid.value().empty()) return gpu.uuid.value();
  return "index:" + std::to_string(gpu.index);
}

std::string DescribeGpu(const GpuSnapshot& gpu) {
  std::string line = "GPU " + std::to_string(gpu.index) + ": ";
  if (gpu.access_error != AccessError::kNone) return line + "unreadable (" + AccessErrorName(gpu.access_error) + ")";
  line += gpu.utilization_gpu_percent.has_value() ? fmt::format("util {}%", gpu.utilization_gpu_percent.value())
                                                  : std::string("util n/a");
  if (!gpu.processes.has_value()) return line + ", processes n/a";
  if (gpu.processes.value().empty()) return line + ", no processes";
  line += ", processes";
  for (const ProcessInfo& process : gpu.processes.value()) {
    line += fmt::format(" {}[{}]", process.name.empty() ? "?" : process.name, process.pid);
    if (process.used_memory_bytes.has_value())
      line += " " + FormatBytes(static_cast<double>(process.used_memory_bytes.value()));
  }
  return line;
}

}  // namespace

TrendDetectors::TrendDetectors(TrendConfig config) : config_(std::move(config)) {
  for (const JobWatchConfig& job : config_.jobs) jobs_.push_back(std::make_unique<JobWatch>(job));
}

TrendDetectors::~TrendDetectors() = default;

void TrendDetectors::Reconfigure(TrendConfig config) {
  std::vector<std::unique_ptr<JobWatch>> jobs;
  for (const JobWatchConfig& job : config.jobs) {
    auto kept = std::find_if(jobs_.begin(), jobs_.end(),
                             [&](const std::unique_ptr<JobWatch>& watch) { return watch && watch->Retune(job); });
    jobs.push_back(kept != jobs_.end() ? std::move(*kept) : std::make_unique<JobWatch>(job));
  }
  jobs_ = std::move(jobs);
  config_ = std::move(config);

  std::map<WallTime, std::vector<GpuPoint*>> instants;  // the points of one Observe share its time
  for (auto& [key, track] : tracks_)
    for (GpuPoint& point : track.points) instants[point.time()].push_back(&point);
  for (auto& [time, instant] : instants) MarkStragglers(instant, config_.gpu_straggler);
}

void TrendDetectors::Observe(const Snapshot& snapshot, WallTime now) {
  const Duration keep = config_.LongestWindow();
  std::vector<GpuPoint*> instant;
  gpu_state_ = {};
  for (const GpuSnapshot& gpu : snapshot.gpus) {
    GpuTrack& track = tracks_[TrackKey(gpu)];
    track.ref = RefOf(gpu);
    track.points.push_back(ReadingsOf(gpu, now));
    instant.push_back(&track.points.back());
    track.memory_total_bytes = gpu.memory_total_bytes.optional();
    track.memory_used_bytes = gpu.memory_used_bytes.optional();
    if (gpu.processes.has_value()) {
      for (const ProcessInfo& process : gpu.processes.value()) {
        if (process.used_memory_bytes.has_value())
          track.process_memory[{process.pid, process.name}].push_back(
              {now, static_cast<double>(process.used_memory_bytes.value())});
      }
      gpu_state_.any_compute_process = gpu_state_.any_compute_process || !gpu.processes.value().empty();
    }
    gpu_state_.lines.push_back(DescribeGpu(gpu));
  }
  MarkStragglers(instant, config_.gpu_straggler);

  for (auto it = tracks_.begin(); it != tracks_.end();) {
    it->second.Trim(now, keep);
    it = it->second.points.empty() ? tracks_.erase(it) : std::next(it);  // a GPU gone for good
  }
  for (const XidEvent& event : snapshot.xid_events) {
    XidEvent stamped = event;
    if (stamped.time == WallTime{}) stamped.time = now;
    recent_xids_.push_back(stamped);
  }
  while (!recent_xids_.empty() && recent_xids_.front().time < now - kXidMemory) recent_xids_.pop_front();
  for (const XidEvent& event : recent_xids_)
    gpu_state_.lines.push_back(fmt::format("Xid {} on GPU {} at {}", event.xid, event.gpu_index, FormatIsoUtc(event.time)));

  for (const auto& job : jobs_) job->Poll(now);
}

std::vector<Finding> TrendDetectors::Evaluate(WallTime now) const {
  std::vector<Finding> findings;
  auto add = [&](std::optional<Finding> finding) {
    if (finding) findings.push_back(std::move(*finding));
  };
  for (const auto& [key, track] : tracks_) {
    if (track.points.empty() || now - track.points.back().time() > config_.max_sample_gap) continue;
    add(DetectUtilizationStuck(track, config_.utilization_stuck, config_.max_sample_gap));
    add(DetectUtilizationFlapping(track, config_.utilization_flapping, now));
    add(DetectTensorCoresIdle(track, config_.tensor_cores_idle, config_.max_sample_gap));
    add(DetectGpuStraggler(track, config_.gpu_straggler, config_.max_sample_gap));
    add(DetectMemoryLeak(track, config_.memory_leak, now, command_lines_));
    for (Finding& finding : DetectCounterRates(track, config_.counter_rates, now)) findings.push_back(std::move(finding));
    add(DetectCoolingFailure(track, config_.cooling_failure, now));
  }
  for (const auto& job : jobs_)
    for (Finding& finding : job->Evaluate(now, gpu_state_)) findings.push_back(std::move(finding));
  return findings;
}

const GpuTrack* TrendDetectors::Track(uint32_t gpu_index) const {
  for (const auto& [key, track] : tracks_)
    if (track.ref.index == gpu_index) return &track;
  return nullptr;
}

}  // namespace gpudoctor
