#include "cli/diag_report.h"

#include <fmt/format.h>

#include <map>

#include "common/text.h"

namespace gpudoctor {

namespace {

using json = nlohmann::ordered_json;


// What NVML says of a GPU's memory errors: the state memtest and burn results carry from before and after.
json MemoryErrorState(const GpuSnapshot* gpu) {
  if (gpu == nullptr) return nullptr;
  auto number = [](const auto& field) -> json {
    if (auto value = field.optional()) return *value;
    return nullptr;
  };
  return {{"ecc_volatile_corrected", number(gpu->ecc_volatile_corrected)},
          {"ecc_volatile_uncorrected", number(gpu->ecc_volatile_uncorrected)},
          {"retired_pages_sbe", number(gpu->retired_pages_sbe)},
          {"retired_pages_dbe", number(gpu->retired_pages_dbe)},
          {"retired_pages_pending", number(gpu->retired_pages_pending)},
          {"remapped_rows_correctable", number(gpu->remapped_rows_correctable)},
          {"remapped_rows_uncorrectable", number(gpu->remapped_rows_uncorrectable)},
          {"remapped_rows_pending", number(gpu->remapped_rows_pending)},
          {"remapped_rows_failure", number(gpu->remapped_rows_failure)}};
}

// "ECC corrected 0 -> 2, uncorrected 0 -> 0, ..." for the readings that both snapshots have.
std::string MemoryErrorLine(const GpuSnapshot* before, const GpuSnapshot* after) {
  if (before == nullptr || after == nullptr) return "";
  std::string line;
  auto add = [&](const char* name, const auto& was, const auto& is) {
    auto a = was.optional();
    auto b = is.optional();
    if (!a || !b) return;
    line += fmt::format("{}{} {} -> {}", line.empty() ? "" : ", ", name, *a, *b);
  };
  add("ECC corrected", before->ecc_volatile_corrected, after->ecc_volatile_corrected);
  add("uncorrected", before->ecc_volatile_uncorrected, after->ecc_volatile_uncorrected);
  add("retired pages (single-bit)", before->retired_pages_sbe, after->retired_pages_sbe);
  add("(double-bit)", before->retired_pages_dbe, after->retired_pages_dbe);
  add("remapped rows (correctable)", before->remapped_rows_correctable, after->remapped_rows_correctable);
  add("(uncorrectable)", before->remapped_rows_uncorrectable, after->remapped_rows_uncorrectable);
  return line;
}

}  // namespace

json DiagVerdictJson(const DiagVerdict& verdict, const DiagOutcome* outcome, const Snapshot& snapshot,
                     const Snapshot& after) {
  json out{{"event", "result"}, {"gpu", verdict.gpu}, {"test", DiagTestName(verdict.test)},
           {"state", DiagStateName(verdict.state)}, {"summary", verdict.summary},
           {"problems", verdict.problems}, {"notes", verdict.notes}};
  if (const GpuSnapshot* gpu = snapshot.FindGpu(static_cast<uint32_t>(verdict.gpu))) {
    out["name"] = gpu->name.value_or("");
    out["uuid"] = gpu->uuid.value_or("");
    out["pci_bus_id"] = gpu->pci_bus_id.value_or("");
  }
  if (outcome == nullptr) return out;
  if (verdict.test != DiagTest::kPcie) {
    out["memory_errors_before"] = MemoryErrorState(snapshot.FindGpu(static_cast<uint32_t>(verdict.gpu)));
    out["memory_errors_after"] = MemoryErrorState(after.FindGpu(static_cast<uint32_t>(verdict.gpu)));
  }
  if (outcome->memtest) {
    const MemtestResult& r = *outcome->memtest;
    json errors = json::array();
    for (const MemtestError& e : r.errors) {
      errors.push_back({{"address", fmt::format("0x{:x}", e.address)},
                        {"expected", fmt::format("0x{:08x}", e.expected)},
                        {"actual", fmt::format("0x{:08x}", e.actual)},
                        {"xor", fmt::format("0x{:08x}", e.expected ^ e.actual)},
                        {"pattern", e.pattern}});
    }
    json patterns = json::array();
    for (const MemtestPatternResult& p : r.patterns) {
      patterns.push_back({{"name", p.name},
                          {"errors", p.errors},
                          {"gb_per_s", p.gb_per_s},
                          {"share_of_copy", r.copy_gb_per_s > 0 ? p.gb_per_s / r.copy_gb_per_s : 0.0}});
    }
    out["bytes_tested"] = r.bytes_tested;
    out["passes"] = r.passes;
    out["error_count"] = r.error_count;
    out["copy_gb_per_s"] = r.copy_gb_per_s;
    out["patterns"] = patterns;
    out["errors"] = errors;
  }
  if (outcome->burn) {
    json precisions = json::array();
    for (const BurnPrecisionResult& p : outcome->burn->precisions) {
      precisions.push_back({{"precision", p.precision},
                            {"engine", p.engine},
                            {"matrix", p.matrix},
                            {"iterations", p.iterations},
                            {"wrong_iterations", p.wrong_iterations},
                            {"tflops", p.tflops},
                            {"baseline_tflops", p.baseline_tflops},
                            {"share_of_baseline", p.baseline_tflops > 0 ? p.tflops / p.baseline_tflops : 0.0}});
    }
    json errors = json::array();
    for (const BurnError& e : outcome->burn->errors) {
      errors.push_back({{"precision", e.precision}, {"iteration", e.iteration}, {"rows", e.rows}, {"cols", e.cols},
                        {"bad_rows", e.bad_rows}, {"not_integer", e.not_integer}});
    }
    out["precisions"] = precisions;
    out["errors"] = errors;
  }
  if (outcome->pcie) {
    for (const PcieLinkResult& link : outcome->pcie->links) {
      if (link.device != verdict.gpu) continue;
      out["host_to_device_gb_per_s"] = link.host_to_device_gb_per_s;
      out["device_to_host_gb_per_s"] = link.device_to_host_gb_per_s;
      out["data_intact"] = link.data_intact;
    }
    json peers = json::array();
    for (const PciePeerResult& peer : outcome->pcie->peers) {
      if (peer.from != verdict.gpu) continue;
      peers.push_back({{"to", peer.to}, {"peer_access", peer.peer_access}, {"gb_per_s", peer.gb_per_s},
                       {"data_intact", peer.data_intact}, {"error", peer.error}});
    }
    out["peers"] = peers;
  }
  return out;
}

namespace {

void PrintDetails(const DiagVerdict& verdict, const DiagOutcome& outcome) {
  if (outcome.memtest) {
    const MemtestResult& r = *outcome.memtest;
    const MemtestPatternResult* slowest = nullptr;
    for (const MemtestPatternResult& p : r.patterns)
      if (!slowest || p.gb_per_s < slowest->gb_per_s) slowest = &p;
    if (slowest && r.copy_gb_per_s > 0) {
      std::printf("  same-run device copy %.1f GB/s; slowest pattern %s %.1f GB/s (%.0f%% of the copy)\n",
                  r.copy_gb_per_s, slowest->name.c_str(), slowest->gb_per_s, 100.0 * slowest->gb_per_s / r.copy_gb_per_s);
    }
    if (r.error_count > 0) {
      std::printf("  %-20s %-10s %-10s %-10s %s\n", "address", "expected", "actual", "xor", "pattern");
      for (size_t i = 0; i < r.errors.size() && i < 20; ++i) {
        const MemtestError& e = r.errors[i];
        std::printf("  0x%-18llx 0x%08x 0x%08x 0x%08x %s\n", static_cast<unsigned long long>(e.address), e.expected,
                    e.actual, e.expected ^ e.actual, e.pattern.c_str());
      }
      if (r.errors.size() > 20) std::printf("  ... %zu more recorded (--json lists them all)\n", r.errors.size() - 20);
    }
  }
  if (outcome.burn) {
    std::printf("  %-9s %-30s %7s %6s %6s %12s %12s %7s\n", "precision", "engine", "matrix", "runs", "wrong",
                "TFLOP/s", "alone", "share");
    for (const BurnPrecisionResult& p : outcome.burn->precisions) {
      std::printf("  %-9s %-30s %7llu %6d %6d %12.4g %12.4g %6.0f%%\n", p.precision.c_str(), p.engine.c_str(),
                  static_cast<unsigned long long>(p.matrix), p.iterations, p.wrong_iterations, p.tflops,
                  p.baseline_tflops, p.baseline_tflops > 0 ? 100 * p.tflops / p.baseline_tflops : 0.0);
    }
    // Each distinct wrong place once, with how many of the kept iterations showed it.
    std::map<std::pair<std::string, std::string>, int> places;
    for (const BurnError& e : outcome.burn->errors) {
      std::string where = e.rows.size() == 1 && e.cols.size() == 1 && e.cols[0] >= 0
                              ? fmt::format("entry C[{}, {}]", e.rows[0], e.cols[0])
                              : fmt::format("{} row{} wrong", e.bad_rows, e.bad_rows == 1 ? "" : "s");
      if (e.not_integer) where += fmt::format(", {} entries not even integers", e.not_integer);
      ++places[{e.precision, where}];
    }
    for (const auto& [place, count] : places) {
      std::printf("  wrong product: %s %s (%d of the first %zu wrong products)\n", place.first.c_str(),
                  place.second.c_str(), count, outcome.burn->errors.size());
    }
  }
  if (outcome.pcie) {
    for (const PciePeerResult& peer : outcome.pcie->peers) {
      if (peer.from != verdict.gpu) continue;
      std::printf("  to GPU %-3d %8.1f GB/s  %s%s\n", peer.to, peer.gb_per_s,
                  peer.peer_access ? "peer to peer" : "through the host (no peer access)",
                  !peer.error.empty() ? (": " + peer.error).c_str() : peer.data_intact ? "" : ": DATA CHANGED");
    }
  }
}

std::string Advice(const DiagVerdict& verdict) {
  switch (verdict.test) {
    case DiagTest::kMemtest:
      return "drain the node; check `gpudoctor status` for ECC counts, retired pages and row remaps; move the card to "
             "another server and test again to tell a bad card from a bad slot; RMA the card if the errors follow it";
    case DiagTest::kBurn:
      return "drain the node; a GPU that computes wrong answers must not run jobs. Check cooling and power if it "
             "throttled; move the card to another server and burn again to tell a bad card from a bad slot or supply";
    case DiagTest::kPcie:
      return "reseat the card and its riser or cable, clean the connector, and check `gpudoctor status` for the link's "
             "width, generation and replays; move the card to another slot to tell a bad card from a bad slot";
  }
  return "";
}

}  // namespace

void PrintDiagVerdict(const DiagVerdict& verdict, const DiagOutcome* outcome, const Snapshot& snapshot,
                      const Snapshot& after) {
  std::string who = fmt::format("GPU {}", verdict.gpu);
  if (const GpuSnapshot* gpu = snapshot.FindGpu(static_cast<uint32_t>(verdict.gpu)))
    who += fmt::format(" ({}, {})", gpu->name.value_or("?"), gpu->pci_bus_id.value_or("?"));
  std::printf("%s: %s %s%s\n", who.c_str(), DiagTestName(verdict.test), DiagStateLabel(verdict.state),
              verdict.summary.empty() ? "" : (": " + verdict.summary).c_str());
  for (const std::string& problem : verdict.problems) std::printf("  problem: %s\n", problem.c_str());
  if (outcome != nullptr) PrintDetails(verdict, *outcome);
  if (outcome != nullptr && verdict.test == DiagTest::kMemtest) {
    const std::string line = MemoryErrorLine(snapshot.FindGpu(static_cast<uint32_t>(verdict.gpu)),
                                             after.FindGpu(static_cast<uint32_t>(verdict.gpu)));
    if (!line.empty()) std::printf("  NVML before -> after: %s\n", line.c_str());
  }
  for (const std::string& note : verdict.notes) std::printf("  note: %s\n", note.c_str());
  if (verdict.state == DiagState::kFaulty || verdict.state == DiagState::kHung)
    std::printf("  What to do: %s.\n", Advice(verdict).c_str());
}

namespace {

// The key figure of one GPU's test, from what its worker measured.
void Figure(const DiagVerdict& verdict, const DiagOutcome& outcome, DiagSummaryRow& row) {
  auto set = [&](double value, std::string unit, std::string figure) {
    row.value = value;
    row.unit = std::move(unit);
    row.figure = std::move(figure);
  };
  if (outcome.memtest) {
    const MemtestResult& r = *outcome.memtest;
    if (r.error_count > 0) {
      set(static_cast<double>(r.error_count), "errors",
          fmt::format("{} error{}", r.error_count, r.error_count == 1 ? "" : "s"));
      return;
    }
    const MemtestPatternResult* slowest = nullptr;
    for (const MemtestPatternResult& p : r.patterns)
      if (p.gb_per_s > 0 && (!slowest || p.gb_per_s < slowest->gb_per_s)) slowest = &p;
    if (slowest) set(slowest->gb_per_s, "GB/s", fmt::format("{:.1f} GB/s", slowest->gb_per_s));
  } else if (outcome.burn) {
    int wrong = 0;
    const BurnPrecisionResult* slowest = nullptr;
    for (const BurnPrecisionResult& p : outcome.burn->precisions) {
      wrong += p.wrong_iterations;
      if (p.tflops > 0 && (!slowest || p.tflops < slowest->tflops)) slowest = &p;
    }
    if (wrong > 0) set(wrong, "wrong products", fmt::format("{} wrong product{}", wrong, wrong == 1 ? "" : "s"));
    else if (slowest)
      set(slowest->tflops, "TFLOP/s", fmt::format("{} {:.4g} TFLOP/s", slowest->precision, slowest->tflops));
  } else if (outcome.pcie) {
    for (const PcieLinkResult& link : outcome.pcie->links) {
      if (link.device != verdict.gpu || !link.error.empty()) continue;
      const double slower = std::min(link.host_to_device_gb_per_s, link.device_to_host_gb_per_s);
      set(slower, "GB/s", fmt::format("{:.1f} GB/s", slower));
    }
  }
}

}  // namespace

DiagSummary SummarizeDiag(const std::vector<std::pair<const DiagVerdict*, const DiagOutcome*>>& results,
                          int exit_code, std::optional<int> level) {
  DiagSummary summary{.exit_code = exit_code, .level = level};
  for (const auto& [verdict, outcome] : results) {
    DiagSummaryRow row{.gpu = verdict->gpu, .test = verdict->test, .state = verdict->state};
    if (outcome != nullptr && verdict->state != DiagState::kHung) Figure(*verdict, *outcome, row);
    if (!verdict->problems.empty()) row.reason = verdict->problems.front();
    summary.rows.push_back(std::move(row));
  }
  CountDiagSummary(summary);
  return summary;
}

void PrintDiagSummary(std::FILE* out, const DiagSummary& summary) {
  std::fprintf(out, "Summary%s\n", summary.level ? fmt::format(" (level {})", *summary.level).c_str() : "");
  std::fprintf(out, "  %-4s %-8s %-14s %-24s %s\n", "GPU", "test", "state", "figure", "reason");
  for (const DiagSummaryRow& row : summary.rows) {
    std::string line = fmt::format("  {:<4} {:<8} {:<14} {:<24} {}", row.gpu, DiagTestName(row.test),
                                   DiagStateLabel(row.state), row.figure.empty() ? "-" : row.figure,
                                   FitOneLine(row.reason, 120));
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::fprintf(out, "%s\n", line.c_str());
  }
  std::fprintf(out, "%s\n", summary.line.c_str());
}

}  // namespace gpudoctor
