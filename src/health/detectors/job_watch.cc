#include "health/detectors/job_watch.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <tuple>

#include "common/text.h"

namespace gpudoctor {
namespace {

std::string Clip(std::string_view line) {
  constexpr size_t kMax = 200;
  return line.size() <= kMax ? std::string(line) : std::string(line.substr(0, kMax)) + "...";
}

// "nan", "NaN", "inf", "-Infinity" as well as numbers; nullopt for anything else.
std::optional<double> ParseLoss(std::string_view text) {
  const std::string lower = ToLower(Trim(text));
  if (lower == "nan" || lower == "-nan" || lower == "+nan") return NAN;
  if (lower == "inf" || lower == "+inf" || lower == "infinity" || lower == "+infinity") return INFINITY;
  if (lower == "-inf" || lower == "-infinity") return -INFINITY;
  return ParseDouble(lower);
}

}  // namespace

JobWatch::JobWatch(JobWatchConfig config) : config_(std::move(config)), tail_(config_.path) {
  if (!config_.progress_regex.empty()) progress_ = std::make_unique<re2::RE2>(config_.progress_regex, RE2::Quiet);
  if (!config_.loss_regex.empty()) loss_ = std::make_unique<re2::RE2>(config_.loss_regex, RE2::Quiet);
}

JobWatch::~JobWatch() = default;

bool JobWatch::Retune(const JobWatchConfig& config) {
  auto source = [](const JobWatchConfig& job) {
    return std::tie(job.name, job.path, job.heartbeat, job.progress_regex, job.loss_regex);
  };
  if (source(config) != source(config_)) return false;
  config_ = config;
  return true;
}

void JobWatch::TakeLine(const std::string& line, WallTime now) {
  bool progress = !progress_ || RE2::PartialMatch(line, *progress_);
  std::string loss_text;
  if (loss_ && RE2::PartialMatch(line, *loss_, &loss_text)) {
    if (auto loss = ParseLoss(loss_text)) {
      progress = true;
      if (std::isfinite(*loss)) {
        losses_.emplace_back(now, *loss);
        nan_since_.reset();
      } else if (!nan_since_) {
        nan_since_ = now;
        nan_line_ = line;
      }
    }
  }
  if (progress) {
    last_progress_ = now;
    last_progress_line_ = line;
  }
}

void JobWatch::Poll(WallTime now) {
  if (config_.heartbeat) {
    std::error_code error;
    const bool exists = std::filesystem::exists(config_.path, error);
    if (tail_.Changed()) last_progress_ = now;
    if (exists && !watching_since_) watching_since_ = now;
  } else {
    for (const std::string& line : tail_.ReadNewLines()) TakeLine(line, now);
    if (tail_.exists() && !watching_since_) watching_since_ = now;
  }
  while (!losses_.empty() && losses_.front().first < now - config_.flat_loss_window) losses_.pop_front();
}

std::vector<Finding> JobWatch::Evaluate(WallTime now, const GpuStateAtMoment& gpus) const {
  std::vector<Finding> findings;
  auto make = [&](const char* id, Severity severity) -> Finding& {
    Finding& finding = findings.emplace_back();
    finding.id = id;
    finding.severity = severity;
    finding.subject = config_.name;  // one incident per job, not one for all jobs
    finding.evidence.push_back(fmt::format("job {}: {} {}", config_.name, config_.heartbeat ? "heartbeat" : "log",
                                           config_.path));
    return finding;
  };
  auto add_gpu_state = [&](Finding& finding) {
    finding.evidence.insert(finding.evidence.end(), gpus.lines.begin(), gpus.lines.end());
  };

  const std::optional<WallTime> reference = last_progress_ ? last_progress_ : watching_since_;
  if (reference && now - *reference >= config_.stall_after &&
      (!config_.require_gpu_processes || gpus.any_compute_process)) {
    Finding& finding = make("job_stall", Severity::kCritical);
    finding.summary = fmt::format("Job {} made no progress for {}", config_.name, FormatDuration(now - *reference));
    finding.evidence.push_back(fmt::format("no progress for {} (threshold {}); last progress at {}",
                                           FormatDuration(now - *reference), FormatDuration(config_.stall_after),
                                           last_progress_ ? FormatIsoUtc(*last_progress_) : "none since watching began"));
    if (!last_progress_line_.empty()) finding.evidence.push_back("last progress line: " + Clip(last_progress_line_));
    add_gpu_state(finding);
    finding.cause =
        "The job is alive but not advancing: a rank blocked in a collective (a hung or dead peer, a network fault), "
        "a deadlock in the data pipeline, or a GPU fault (see Xids). NCCL's watchdog would abort it only after its "
        "timeout, typically 8-10 minutes.";
    finding.actions = {"Dump the stacks of every rank (py-spy dump --pid PID) and find the one that differs",
                       "Look for Xid errors and idle GPUs among the job's GPUs (gpudoctor status, gpudoctor logs)",
                       "Restart the job from its last checkpoint; exclude the node if a GPU fault is found"};
  }

  if (nan_since_) {
    Finding& finding = make("job_loss_nan", Severity::kWarning);
    finding.summary = fmt::format("Job {} reports a NaN/infinite loss since {}", config_.name, FormatIsoUtc(*nan_since_));
    finding.evidence.push_back("line: " + Clip(nan_line_));
    add_gpu_state(finding);
    finding.cause = "Training diverged (learning rate, fp16 overflow without loss scaling, bad data) or the GPU "
                    "produced wrong results (memory errors, see ECC and Xid).";
    finding.actions = {"Stop the run to save GPU time; resume from a checkpoint before the divergence",
                       "Check the GPUs for ECC and Xid errors before blaming the model"};
  }

  if (static_cast<int>(losses_.size()) >= config_.flat_loss_min_values &&
      losses_.back().first - losses_.front().first >= config_.flat_loss_window * 8 / 10) {
    double low = INFINITY, high = -INFINITY, mean = 0;
    for (const auto& [time, loss] : losses_) {
      low = std::min(low, loss);
      high = std::max(high, loss);
      mean += loss / static_cast<double>(losses_.size());
    }
    if (high - low <= config_.flat_loss_tolerance * std::max(std::abs(mean), 1e-9)) {
      Finding& finding = make("job_loss_flat", Severity::kWarning);
      finding.summary = fmt::format("Job {} loss is flat at {:.6g} over {} readings", config_.name, mean, losses_.size());
      finding.evidence.push_back(fmt::format("loss range {:.8g}..{:.8g} over {} (tolerance {:g} relative)", low, high,
                                             FormatDuration(losses_.back().first - losses_.front().first),
                                             config_.flat_loss_tolerance));
      add_gpu_state(finding);
      finding.cause = "The model stopped learning: a learning rate of zero or a frozen optimizer, data that repeats, "
                      "or dead activations; a constant loss can also mean the job logs a stale value.";
      finding.actions = {"Check the learning-rate schedule and that gradients are non-zero",
                         "Check that the data loader still yields new batches"};
    }
  }
  return findings;
}

}  // namespace gpudoctor
