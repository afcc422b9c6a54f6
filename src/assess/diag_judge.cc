#include "assess/diag_judge.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/text.h"

namespace gpudoctor {

namespace {

std::string Bytes(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1ull << 30));
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1ull << 20));
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string joined;
  for (const std::string& name : names) joined += (joined.empty() ? "" : ", ") + name;
  return joined;
}

DiagVerdict* Find(std::vector<DiagVerdict>& verdicts, int gpu) {
  for (DiagVerdict& verdict : verdicts)
    if (verdict.gpu == gpu) return &verdict;
  return nullptr;
}

std::string MemtestSummary(const MemtestResult& r) {
  return fmt::format("{} tested, {} pattern{}, {} pass{}, {} error{}", Bytes(r.bytes_tested), r.patterns.size(),
                     r.patterns.size() == 1 ? "" : "s", r.passes, r.passes == 1 ? "" : "es", r.error_count,
                     r.error_count == 1 ? "" : "s");
}

std::string BurnSummary(const BurnResult& r) {
  std::string figures;
  int wrong = 0;
  for (const BurnPrecisionResult& p : r.precisions) {
    figures += fmt::format("{}{} {:.4g}", figures.empty() ? "" : ", ", p.precision, p.tflops);
    wrong += p.wrong_iterations;
  }
  const std::string engine = r.precisions.empty() ? "" : r.precisions.front().engine;
  return fmt::format("TFLOP/s {} ({}), {} wrong product{}", figures, engine, wrong, wrong == 1 ? "" : "s");
}

bool LinkBroken(const PcieResult& r, int gpu) {
  for (const PcieLinkResult& link : r.links)
    if (link.device == gpu) return !link.error.empty() || !link.data_intact;
  return false;
}

bool PairBroken(const PciePeerResult& peer) { return !peer.error.empty() || !peer.data_intact; }

// Which GPUs of a broken pair are to blame: those whose own link is broken
// too; else the one in more broken pairs (a GPU broken with every peer is the
// bad one, not its peers); else both.
std::vector<int> Blamed(const PcieResult& r, const PciePeerResult& pair) {
  const bool from_link = LinkBroken(r, pair.from), to_link = LinkBroken(r, pair.to);
  if (from_link != to_link) return {from_link ? pair.from : pair.to};
  auto broken_pairs = [&](int gpu) {
    int count = 0;
    for (const PciePeerResult& peer : r.peers) count += PairBroken(peer) && (peer.from == gpu || peer.to == gpu);
    return count;
  };
  const int from_count = broken_pairs(pair.from), to_count = broken_pairs(pair.to);
  if (from_count != to_count) return {from_count > to_count ? pair.from : pair.to};
  return {pair.from, pair.to};
}

void PcieProblems(const PcieResult& r, int gpu, DiagVerdict& verdict) {
  for (const PcieLinkResult& link : r.links) {
    if (link.device != gpu) continue;
    verdict.summary = fmt::format("host->device {:.1f} GB/s, device->host {:.1f} GB/s", link.host_to_device_gb_per_s,
                                  link.device_to_host_gb_per_s);
    if (!link.error.empty()) AddProblem(verdict, "a copy over its link failed: " + link.error);
    else if (!link.data_intact) AddProblem(verdict, "data copied over its link came back changed");
  }
  for (const PciePeerResult& peer : r.peers) {
    if ((peer.from != gpu && peer.to != gpu) || !PairBroken(peer)) continue;
    const std::string what = !peer.error.empty()
                                 ? fmt::format("copy GPU {} -> {} failed: {}", peer.from, peer.to, peer.error)
                                 : fmt::format("copy GPU {} -> {} changed the data", peer.from, peer.to);
    const std::vector<int> blamed = Blamed(r, peer);
    if (std::find(blamed.begin(), blamed.end(), gpu) != blamed.end()) {
      AddProblem(verdict, what);
    } else {
      verdict.notes.push_back(fmt::format("{}: GPU {} is the one at fault (broken with more of its peers, or on its own "
                                          "link)", what, blamed.front()));
    }
  }
}

}  // namespace

void AddProblem(DiagVerdict& verdict, std::string problem) {
  if (verdict.state == DiagState::kPassed || verdict.state == DiagState::kInterrupted) verdict.state = DiagState::kFaulty;
  verdict.problems.push_back(std::move(problem));
}

std::vector<DiagVerdict> VerdictsOf(const std::vector<DiagOutcome>& outcomes) {
  std::vector<DiagVerdict> verdicts;
  for (const DiagOutcome& outcome : outcomes) {
    for (int gpu : outcome.devices) {
      DiagVerdict verdict{.gpu = gpu, .test = outcome.test, .state = outcome.state};
      if (outcome.memtest) verdict.summary = MemtestSummary(*outcome.memtest);
      if (outcome.burn) {
        verdict.summary = BurnSummary(*outcome.burn);
        if (!outcome.burn->engine_note.empty()) verdict.notes.push_back(outcome.burn->engine_note);
      }
      if (outcome.pcie) {
        // One worker tested every link: each GPU is judged on its own link and its pairs.
        verdict.state = outcome.state == DiagState::kFaulty ? DiagState::kPassed : outcome.state;
        PcieProblems(*outcome.pcie, gpu, verdict);
      } else if (outcome.state != DiagState::kPassed && !outcome.message.empty()) {
        verdict.problems.push_back(outcome.message);
      }
      verdicts.push_back(std::move(verdict));
    }
  }
  return verdicts;
}

void JudgeIdentity(const std::vector<DiagOutcome>& outcomes, const Snapshot& snapshot,
                   std::vector<DiagVerdict>& verdicts) {
  auto check = [&](int gpu, const std::string& cuda_bus) {
    const GpuSnapshot* nvml = snapshot.FindGpu(static_cast<uint32_t>(gpu));
    const auto expected = nvml ? NormalizePciBusId(nvml->pci_bus_id.value_or("")) : std::nullopt;
    const auto opened = NormalizePciBusId(cuda_bus);
    if (!expected || !opened || *expected == *opened) return;
    for (DiagVerdict& verdict : verdicts) {
      if (verdict.gpu != gpu) continue;
      verdict.state = DiagState::kCouldNotRun;
      verdict.problems.insert(verdict.problems.begin(),
                              fmt::format("CUDA's device {} is {}, not NVML's GPU {} at {}: the result is not this "
                                          "GPU's",
                                          gpu, *opened, gpu, *expected));
    }
  };
  for (const DiagOutcome& outcome : outcomes) {
    if (outcome.memtest) check(outcome.devices.front(), outcome.memtest->pci_bus_id);
    if (outcome.burn) check(outcome.devices.front(), outcome.burn->pci_bus_id);
    if (outcome.pcie)
      for (const PcieLinkResult& link : outcome.pcie->links) check(link.device, link.pci_bus_id);
  }
}

void JudgeBurnPeers(const std::vector<DiagOutcome>& outcomes, std::vector<DiagVerdict>& verdicts) {
  struct Figure {
    int gpu;
    double tflops;
  };
  std::map<std::pair<std::string, std::string>, std::vector<Figure>> by_precision;  // (precision, engine)
  for (const DiagOutcome& outcome : outcomes) {
    if (!outcome.burn || outcome.burn->interrupted) continue;
    for (const BurnPrecisionResult& p : outcome.burn->precisions)
      if (p.tflops > 0) by_precision[{p.precision, p.engine}].push_back({outcome.devices.front(), p.tflops});
  }
  for (const auto& [key, figures] : by_precision) {
    if (figures.size() < 2) continue;
    for (const Figure& figure : figures) {
      std::vector<double> others;
      for (const Figure& other : figures)
        if (other.gpu != figure.gpu) others.push_back(other.tflops);
      const double median = Median(others);
      if (figure.tflops >= median * (1 - kPeerShortfall)) continue;
      if (DiagVerdict* verdict = Find(verdicts, figure.gpu)) {
        AddProblem(*verdict, fmt::format("{} products {:.0f}% slower than its peers ({:.3g} against a median of {:.3g} "
                                         "TFLOP/s)",
                                         key.first, 100 * (1 - figure.tflops / median), figure.tflops, median));
      }
    }
  }
}

void AddReading(const Snapshot& snapshot, std::map<int, GpuReadings>& readings) {
  for (const GpuSnapshot& gpu : snapshot.gpus) {
    GpuReadings& r = readings[static_cast<int>(gpu.index)];
    ++r.samples;
    if (auto t = gpu.temperature_c.optional()) r.max_temperature_c = std::max(r.max_temperature_c.value_or(0), *t);
    if (auto p = gpu.power_draw_w.optional()) r.max_power_w = std::max(r.max_power_w.value_or(0.0), *p);
    if (auto c = gpu.sm_clock_mhz.optional()) {
      r.min_sm_clock_mhz = std::min(r.min_sm_clock_mhz.value_or(*c), *c);
      r.max_sm_clock_mhz = std::max(r.max_sm_clock_mhz.value_or(*c), *c);
    }
    if (auto reasons = gpu.clock_event_reasons.optional()) r.clock_events |= *reasons;
  }
}

void JudgeReadings(const std::map<int, GpuReadings>& readings, std::vector<DiagVerdict>& verdicts) {
  for (DiagVerdict& verdict : verdicts) {
    auto found = readings.find(verdict.gpu);
    if (found == readings.end() || found->second.samples == 0) continue;
    const GpuReadings& r = found->second;
    std::string figures = "during the test:";
    if (r.max_temperature_c) figures += fmt::format(" up to {} C", *r.max_temperature_c);
    if (r.max_power_w) figures += fmt::format(", up to {:.0f} W", *r.max_power_w);
    if (r.min_sm_clock_mhz && r.max_sm_clock_mhz && *r.min_sm_clock_mhz != *r.max_sm_clock_mhz)
      figures += fmt::format(", SM clock {}-{} MHz", *r.min_sm_clock_mhz, *r.max_sm_clock_mhz);
    else if (r.min_sm_clock_mhz)
      figures += fmt::format(", SM clock {} MHz", *r.min_sm_clock_mhz);
    verdict.notes.push_back(figures);
    const uint64_t hardware = r.clock_events & (clock_event::kHwSlowdown | clock_event::kHwPowerBrakeSlowdown);
    const uint64_t expected = r.clock_events & (clock_event::kSwPowerCap | clock_event::kSwThermalSlowdown |
                                                 clock_event::kHwThermalSlowdown);
    if (hardware != 0 && verdict.test == DiagTest::kBurn) {
      AddProblem(verdict, fmt::format("throttled by {} during the burn: the board slowed itself for a reason that is "
                                      "neither heat nor the power cap (power supply, power brake signal)",
                                      JoinNames(DecodeClockEventReasons(hardware))));
    } else if (hardware != 0) {
      verdict.notes.push_back("throttled by " + JoinNames(DecodeClockEventReasons(hardware)));
    }
    if (expected != 0) verdict.notes.push_back("throttled by " + JoinNames(DecodeClockEventReasons(expected)) + " (expected under full load)");
  }
}

void JudgeCounters(const Snapshot& before, const Snapshot& after, std::vector<DiagVerdict>& verdicts) {
  for (DiagVerdict& verdict : verdicts) {
    const GpuSnapshot* a = before.FindGpu(static_cast<uint32_t>(verdict.gpu));
    const GpuSnapshot* b = after.FindGpu(static_cast<uint32_t>(verdict.gpu));
    if (a == nullptr || b == nullptr) continue;
    auto grew = [](const auto& was, const auto& is) -> uint64_t {
      auto x = was.optional();
      auto y = is.optional();
      return x && y && *y > *x ? static_cast<uint64_t>(*y - *x) : 0;
    };
    if (uint64_t n = grew(a->ecc_volatile_uncorrected, b->ecc_volatile_uncorrected))
      AddProblem(verdict, fmt::format("{} new uncorrectable ECC error{} during the test", n, n == 1 ? "" : "s"));
    if (uint64_t n = grew(a->retired_pages_dbe, b->retired_pages_dbe) + grew(a->retired_pages_sbe, b->retired_pages_sbe))
      AddProblem(verdict, fmt::format("{} page{} retired during the test", n, n == 1 ? "" : "s"));
    if (uint64_t n = grew(a->remapped_rows_uncorrectable, b->remapped_rows_uncorrectable) +
                     grew(a->remapped_rows_correctable, b->remapped_rows_correctable))
      AddProblem(verdict, fmt::format("{} row{} remapped during the test", n, n == 1 ? "" : "s"));
    if (uint64_t n = grew(a->ecc_volatile_corrected, b->ecc_volatile_corrected))
      verdict.notes.push_back(fmt::format("{} corrected ECC error{} during the test", n, n == 1 ? "" : "s"));
  }
}

void JudgeXids(const std::vector<LogEvent>& events, const Snapshot& snapshot, std::vector<DiagVerdict>& verdicts) {
  for (const LogEvent& event : events) {
    if (!event.xid && event.kind != "gpu_off_bus") continue;
    const auto bus = NormalizePciBusId(event.pci_bus_id);
    for (DiagVerdict& verdict : verdicts) {
      const GpuSnapshot* gpu = snapshot.FindGpu(static_cast<uint32_t>(verdict.gpu));
      const auto gpu_bus = gpu ? NormalizePciBusId(gpu->pci_bus_id.value_or("")) : std::nullopt;
      if (!bus || !gpu_bus || *bus != *gpu_bus) continue;
      AddProblem(verdict, event.xid ? fmt::format("Xid {} in the kernel log during the test: {}", *event.xid, event.message)
                                    : "the GPU fell off the bus during the test: " + event.message);
    }
  }
}

void JudgeLinks(const std::vector<DiagOutcome>& outcomes, const Snapshot& snapshot, std::vector<DiagVerdict>& verdicts) {
  for (const DiagOutcome& outcome : outcomes) {
    if (!outcome.pcie) continue;
    for (const PcieLinkResult& link : outcome.pcie->links) {
      DiagVerdict* verdict = Find(verdicts, link.device);
      const GpuSnapshot* gpu = snapshot.FindGpu(static_cast<uint32_t>(link.device));
      if (verdict == nullptr || gpu == nullptr || !link.error.empty()) continue;
      const uint32_t generation = gpu->pcie_generation_max.value_or(0), width = gpu->pcie_width_max.value_or(0);
      const auto allowed = PcieLinkGbPerSecond(generation, width);
      if (!allowed) {
        verdict->notes.push_back("the link's generation and width are unknown: bandwidth not judged");
        continue;
      }
      const double worst = std::min(link.host_to_device_gb_per_s, link.device_to_host_gb_per_s);
      const double share = worst / *allowed;
      verdict->summary += fmt::format(" ({:.0f}% of gen{} x{}, {:.1f} GB/s)", 100 * share, generation, width, *allowed);
      if (share < kLinkFaultShare) {
        AddProblem(*verdict, fmt::format("its link carries {:.1f} GB/s, {:.0f}% of the {:.1f} GB/s gen{} x{} allows "
                                         "(below {:.0f}%: a downtrained, dirty or failing link)",
                                         worst, 100 * share, *allowed, generation, width, 100 * kLinkFaultShare));
      } else if (share < kLinkHealthyShare) {
        verdict->notes.push_back(fmt::format("its link carries {:.0f}% of what gen{} x{} allows; healthy links reach "
                                             "{:.0f}%",
                                             100 * share, generation, width, 100 * kLinkHealthyShare));
      }
      if (const auto now_width = gpu->pcie_width_current.optional(); now_width && *now_width < width)
        verdict->notes.push_back(fmt::format("the link runs at x{} of x{}", *now_width, width));
    }
    std::vector<double> rates;
    for (const PciePeerResult& peer : outcome.pcie->peers)
      if (peer.error.empty()) rates.push_back(peer.gb_per_s);
    const double median = Median(rates);
    for (const PciePeerResult& peer : outcome.pcie->peers) {
      if (!peer.error.empty() || peer.gb_per_s >= median / 2) continue;
      const std::string problem = fmt::format("copy GPU {} -> {} ran at {:.1f} GB/s, under half the median pair's {:.1f}",
                                              peer.from, peer.to, peer.gb_per_s, median);
      for (int gpu : {peer.from, peer.to})
        if (DiagVerdict* verdict = Find(verdicts, gpu)) AddProblem(*verdict, problem);
    }
  }
}

}  // namespace gpudoctor
