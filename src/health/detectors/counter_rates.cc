#include "health/detectors/counter_rates.h"

#include <fmt/format.h>

namespace gpudoctor {

std::optional<CounterRate> CounterRatePerMinute(const PointHistory& points,
                                                std::optional<double> ErrorCounters::*counter, WallTime since,
                                                Duration min_span) {
  const std::vector<CounterReading> readings = points.CounterSince(counter, since);
  if (readings.empty()) return std::nullopt;
  CounterRate rate;
  for (size_t i = 1; i < readings.size(); ++i)
    if (readings[i].value >= readings[i - 1].value) rate.increase += readings[i].value - readings[i - 1].value;
  const WallTime first = readings.front().time, last = readings.back().time;
  if (last - first < min_span || last == first) return std::nullopt;
  rate.span = last - first;
  rate.per_minute = rate.increase / (std::chrono::duration<double>(rate.span).count() / 60.0);
  return rate;
}

std::vector<Finding> DetectCounterRates(const GpuTrack& track, const CounterRateConfig& config, WallTime now) {
  std::vector<Finding> findings;
  const WallTime since = now - config.window;
  const std::string gpu = GpuLabel(track.ref);
  auto make = [&](const char* id, Severity severity, std::string summary, std::string evidence) -> Finding& {
    Finding& finding = findings.emplace_back();
    finding.id = id;
    finding.severity = severity;
    finding.gpu = track.ref;
    finding.summary = std::move(summary);
    finding.evidence.push_back(std::move(evidence));
    return finding;
  };
  auto describe = [](const char* counter, const CounterRate& rate, double threshold) {
    return fmt::format("{} +{:.0f} in {} = {:.1f}/min (threshold {:.1f}/min)", counter, rate.increase,
                       FormatDuration(rate.span), rate.per_minute, threshold);
  };

  auto uncorrected = CounterRatePerMinute(track.points, &ErrorCounters::ecc_uncorrected, since, config.min_span);
  auto corrected = CounterRatePerMinute(track.points, &ErrorCounters::ecc_corrected, since, config.min_span);
  if (uncorrected && uncorrected->increase > 0) {
    Finding& f = make("ecc_rate", Severity::kCritical,
                      fmt::format("{} reported {:.0f} new uncorrectable ECC error(s) in {}", gpu, uncorrected->increase,
                                  FormatDuration(uncorrected->span)),
                      describe("ecc_volatile_uncorrected", *uncorrected, 0));
    if (corrected) f.evidence.push_back(describe("ecc_volatile_corrected", *corrected, config.ecc_corrected_per_min));
    f.cause = "GPU memory is returning data ECC could not repair; the applications that read it were likely killed "
              "(Xid 48/63/94/95) and the row is pending remap or page retirement.";
    f.actions = {"Drain the GPU and reset it (nvidia-smi -r) so pending row remaps take effect",
                 "Check remapped rows and retired pages (gpudoctor status); replace the GPU if remapping has failed"};
  } else if (corrected && corrected->per_minute > config.ecc_corrected_per_min) {
    Finding& f = make("ecc_rate", Severity::kWarning,
                      fmt::format("{} corrects {:.1f} ECC errors per minute", gpu, corrected->per_minute),
                      describe("ecc_volatile_corrected", *corrected, config.ecc_corrected_per_min));
    f.cause = "A memory cell or row is failing; correctable errors at a sustained rate often precede uncorrectable ones.";
    f.actions = {"Watch for uncorrectable errors and row remaps (gpudoctor status)",
                 "Plan a maintenance window: reset the GPU to apply pending remaps, run gpudoctor diag memory"};
  }

  if (auto replays = CounterRatePerMinute(track.points, &ErrorCounters::pcie_replays, since, config.min_span);
      replays && replays->per_minute > config.pcie_replays_per_min) {
    Finding& f = make("pcie_replay_rate", Severity::kWarning,
                      fmt::format("{} PCIe link replays {:.1f} times per minute", gpu, replays->per_minute),
                      describe("pcie_replay_count", *replays, config.pcie_replays_per_min));
    f.cause = "The PCIe link retransmits packets: signal integrity problems from a riser, a cable, a slot or a "
              "mis-seated card; often with AER messages in the kernel log.";
    f.actions = {"Check the kernel log for AER errors on this bus id (gpudoctor logs)",
                 "Check the link width and generation against the maximum (gpudoctor status)",
                 "Reseat the GPU or riser; move the card to another slot if it persists"};
  }

  if (auto errors = CounterRatePerMinute(track.points, &ErrorCounters::nvlink_errors, since, config.min_span);
      errors && errors->per_minute > config.nvlink_errors_per_min) {
    Finding& f = make("nvlink_error_rate", Severity::kWarning,
                      fmt::format("{} NVLink errors at {:.1f} per minute", gpu, errors->per_minute),
                      describe("nvlink replay+recovery+crc errors", *errors, config.nvlink_errors_per_min));
    f.cause = "An NVLink lane is retrying or recovering: a failing link, NVSwitch or baseboard connection.";
    f.actions = {"Check per-link counters (nvidia-smi nvlink -e -i INDEX) to find the failing link",
                 "Run the NVLink bandwidth test (gpudoctor diag) and open a hardware case if a link keeps failing"};
  }
  return findings;
}

}  // namespace gpudoctor
