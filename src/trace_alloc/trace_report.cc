#include "trace_alloc/trace_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/text.h"

namespace gpudoctor {

using namespace trace_wire;
using json = nlohmann::ordered_json;

namespace {

constexpr const char* kKindKeys[kKindCount] = {"none", "device", "managed", "host_pinned"};
constexpr const char* kKindWords[kKindCount] = {"?", "device", "managed", "host pinned"};
constexpr size_t kFramesShown = 6;

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::vector<FrameReport> FramesFor(const AllocationLedger& ledger, Symbolizer& symbolizer, uint32_t site) {
  std::vector<FrameReport> frames;
  for (const SiteFrame& frame : ledger.FramesOf(site)) {
    FrameReport report;
    report.offset = frame.offset;
    auto module = ledger.modules().find(frame.module);
    if (frame.module != 0 && module != ledger.modules().end() && !module->second.path.empty()) {
      report.module = module->second.path;
      report.function = symbolizer.Name(report.module, frame.offset).function;
    }
    frames.push_back(std::move(report));
  }
  return frames;
}

// "GrowList(std::vector<void*, std::allocator<void*> >&)  leak_list", or
// "libfoo.so+0x1234" without a symbol.
std::string FrameText(const FrameReport& frame) {
  if (frame.module.empty()) return fmt::format("0x{:x}", frame.offset);
  if (frame.function.empty()) return fmt::format("{}+0x{:x}", BaseName(frame.module), frame.offset);
  return fmt::format("{}  ({})", frame.function, BaseName(frame.module));
}

// The name a site goes by in one line: its first frame.
std::string SiteLabel(const std::vector<FrameReport>& frames) {
  if (frames.empty()) return "(call stack not recorded)";
  return FrameText(frames.front());
}

json FramesJson(const std::vector<FrameReport>& frames) {
  json out = json::array();
  for (const FrameReport& frame : frames) {
    json f;
    f["function"] = frame.function.empty() ? json() : json(frame.function);
    f["module"] = frame.module.empty() ? json() : json(frame.module);
    f["offset"] = frame.offset;
    out.push_back(std::move(f));
  }
  return out;
}

json SiteJson(const SiteReport& site) {
  const SiteStats& s = site.stats;
  json out;
  out["site"] = s.site;
  out["pid"] = s.pid;
  out["api"] = ApiName(static_cast<uint8_t>(s.api));
  out["kind"] = kKindKeys[static_cast<size_t>(s.kind)];
  out["outstanding_bytes"] = s.outstanding_bytes;
  out["outstanding_allocations"] = s.outstanding_count;
  out["allocations"] = s.allocations;
  out["frees"] = s.frees;
  out["bytes_allocated"] = s.bytes_allocated;
  out["peak_outstanding_bytes"] = s.peak_outstanding_bytes;
  out["failed_allocations"] = s.failed_allocations;
  out["kept_growing"] = site.kept_growing;
  out["frames"] = FramesJson(site.frames);
  return out;
}

std::string Plural(uint64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

}  // namespace

const char* TraceVerdictName(TraceVerdict verdict) {
  switch (verdict) {
    case TraceVerdict::kLeak: return "leak";
    case TraceVerdict::kNeverFreed: return "never_freed";
    case TraceVerdict::kClean: return "clean";
    case TraceVerdict::kNothingRecorded: return "nothing_recorded";
  }
  return "?";
}

TraceReport BuildTraceReport(const AllocationLedger& ledger, Symbolizer& symbolizer, TraceRunFacts facts,
                             const MemoryLeakConfig& config) {
  TraceReport report;
  report.facts = std::move(facts);
  for (const auto& [pid, process] : ledger.processes()) report.processes.push_back(process);
  report.kinds = ledger.kinds();
  report.outstanding_bytes = ledger.outstanding_bytes();
  report.peak_bytes = ledger.peak_bytes();
  report.frees_of_unknown = ledger.frees_of_unknown();
  report.failed_frees = ledger.failed_frees();
  report.records = ledger.records();
  report.records_over_limits = ledger.over_limits();

  for (const auto& [id, stats] : ledger.sites()) {
    SiteReport site{stats, FramesFor(ledger, symbolizer, id), false};
    site.kept_growing = report.facts.intervals >= 2 && stats.intervals_growing >= 2;
    if (stats.outstanding_bytes > 0) report.never_freed.push_back(site);
    report.sites.push_back(std::move(site));
  }
  auto by_outstanding = [](const SiteReport& a, const SiteReport& b) {
    return a.stats.outstanding_bytes != b.stats.outstanding_bytes ? a.stats.outstanding_bytes > b.stats.outstanding_bytes
                                                                  : a.stats.site < b.stats.site;
  };
  std::sort(report.never_freed.begin(), report.never_freed.end(), by_outstanding);
  std::sort(report.sites.begin(), report.sites.end(), [](const SiteReport& a, const SiteReport& b) {
    return a.stats.bytes_allocated != b.stats.bytes_allocated ? a.stats.bytes_allocated > b.stats.bytes_allocated
                                                              : a.stats.site < b.stats.site;
  });

  // memory_leak's analysis, over the whole run.
  const auto points = ledger.series().Points(ledger.end_ns());
  if (!points.empty()) {
    std::deque<MemoryPoint> series;
    const uint64_t origin = points.front().first;
    for (const auto& [time_ns, bytes] : points)
      series.push_back({WallTime{} + std::chrono::nanoseconds(time_ns - origin), bytes});
    MemoryLeakConfig whole_run = config;
    whole_run.window = series.back().time - series.front().time + std::chrono::milliseconds(1);
    whole_run.min_span = Duration::zero();
    report.growth = AnalyzeGrowth(series, whole_run, series.back().time);
  }

  uint64_t allocations = 0;
  for (const KindTotals& kind : report.kinds) allocations += kind.allocations;
  uint64_t unfreed_count = 0;
  for (const SiteReport& site : report.never_freed) unfreed_count += site.stats.outstanding_count;
  const std::string unfreed =
      report.never_freed.empty()
          ? std::string()
          : fmt::format("{} never freed at exit, in {} from {} ({})", FormatBytes(report.outstanding_bytes),
                        Plural(unfreed_count, "allocation", "allocations"),
                        Plural(report.never_freed.size(), "site", "sites"), SiteLabel(report.never_freed[0].frames));
  if (allocations == 0) {
    report.verdict = TraceVerdict::kNothingRecorded;
    report.verdict_text = "nothing recorded: the program made no CUDA allocation that gpudoctor could see";
  } else if (report.growth && IsLeak(*report.growth, config)) {
    report.verdict = TraceVerdict::kLeak;
    report.verdict_text = "memory leak: CUDA memory keeps growing: " + DescribeGrowth(*report.growth) +
                          (unfreed.empty() ? "" : "; " + unfreed);
  } else if (!report.never_freed.empty()) {
    report.verdict = TraceVerdict::kNeverFreed;
    report.verdict_text = "no steady growth, but " + unfreed +
                          (report.growth ? " (" + DescribeGrowth(*report.growth) + ")" : std::string());
  } else {
    report.verdict = TraceVerdict::kClean;
    report.verdict_text = fmt::format("no leak: every allocation was freed (peak {})", FormatBytes(report.peak_bytes));
  }

  // What the reader should know about how complete this is.
  const RingCounters& c = report.facts.counters;
  if (!report.facts.library_problem.empty()) report.notes.push_back(report.facts.library_problem);
  if (!report.facts.ring_corruption.empty())
    report.notes.push_back("the program overwrote the ring it shares with gpudoctor (" + report.facts.ring_corruption +
                           "): gpudoctor stopped reading it there and the program ran on untraced, so these figures "
                           "cover only the records read before");
  else if (!report.facts.counters_known)
    report.notes.push_back("the ring's counters were overwritten by the program: records dropped are unknown");
  if (c.abandoned)
    report.notes.push_back(
        "the program allocated faster than gpudoctor read for 3 s, so the library stopped recording: the figures "
        "stop there");
  if (c.records_dropped > 0 || report.facts.skipped_slots > 0 || report.facts.malformed_slots > 0)
    report.notes.push_back(fmt::format("{} records lost ({} dropped, {} cut short by a process ending, {} unreadable)",
                                       c.records_dropped + report.facts.skipped_slots + report.facts.malformed_slots,
                                       c.records_dropped, report.facts.skipped_slots, report.facts.malformed_slots));
  if (report.records_over_limits > 0)
    report.notes.push_back(fmt::format("{} ignored: they would have made gpudoctor keep more allocations, call sites, "
                                       "modules or processes than its limits (docs/trace-alloc.md)",
                                       Plural(report.records_over_limits, "record was", "records were")));
  if (c.proc_address_unmatched > 0)
    report.notes.push_back(fmt::format(
        "cuGetProcAddress handed out {} driver entry points that could not be matched: calls through them are not "
        "recorded",
        c.proc_address_unmatched));
  if (c.sites_overflowed > 0)
    report.notes.push_back(fmt::format("{} allocations came from call stacks beyond the {} kept: shown as one site",
                                       c.sites_overflowed, 1 << 16));
  if (report.frees_of_unknown > 0)
    report.notes.push_back(fmt::format("{} of memory allocated before tracing started or outside the followed calls",
                                       Plural(report.frees_of_unknown, "free", "frees")));
  if (report.failed_frees > 0)
    report.notes.push_back(fmt::format("{} failed (an invalid pointer or handle)",
                                       Plural(report.failed_frees, "free", "frees")));
  for (const SiteReport& site : report.sites) {
    if (site.stats.failed_allocations == 0) continue;
    report.notes.push_back(fmt::format("{} failed {} (last error {}{}) at {}", ApiName(static_cast<uint8_t>(site.stats.api)),
                                       Plural(site.stats.failed_allocations, "time", "times"), site.stats.last_error,
                                       site.stats.last_error == 2 ? ": out of memory" : "", SiteLabel(site.frames)));
  }
  return report;
}

std::string RenderTraceReport(const TraceReport& report) {
  const TraceRunFacts& facts = report.facts;
  std::string out;
  out += fmt::format("gpudoctor trace-alloc: {} {} after {}\n", ShellQuote(facts.command),
                     facts.status ? facts.status->Describe() : "did not start",
                     FormatDuration(std::chrono::nanoseconds(facts.duration_ns)));
  uint64_t allocations = 0, frees = 0;
  for (const KindTotals& kind : report.kinds) {
    allocations += kind.allocations;
    frees += kind.frees;
  }
  const RingCounters& c = facts.counters;
  out += fmt::format("  {} traced; {}, {}", Plural(report.processes.size(), "process", "processes"),
                     Plural(allocations, "allocation", "allocations"), Plural(frees, "free", "frees"));
  if (c.proc_address_wrapped + c.proc_address_by_name + c.dlsym_wrapped > 0)
    out += fmt::format("; driver entry points followed through cuGetProcAddress: {}, dlsym: {}",
                       c.proc_address_wrapped + c.proc_address_by_name, c.dlsym_wrapped);
  out += "\n\n";
  out += fmt::format("  {:<12} {:>12} {:>12} {:>12} {:>10}\n", "kind", "at exit", "peak", "allocations", "frees");
  for (int kind = 1; kind < kKindCount; ++kind) {
    const KindTotals& k = report.kinds[kind];
    out += fmt::format("  {:<12} {:>12} {:>12} {:>12} {:>10}\n", kKindWords[kind], FormatBytes(k.outstanding_bytes),
                       FormatBytes(k.peak_bytes), k.allocations, k.frees);
  }
  out += fmt::format("  {:<12} {:>12} {:>12}\n", "all", FormatBytes(report.outstanding_bytes),
                     FormatBytes(report.peak_bytes));

  if (!report.never_freed.empty()) {
    uint64_t count = 0;
    for (const SiteReport& site : report.never_freed) count += site.stats.outstanding_count;
    out += fmt::format("\nNever freed at exit: {} in {} from {}\n", FormatBytes(report.outstanding_bytes),
                       Plural(count, "allocation", "allocations"),
                       Plural(report.never_freed.size(), "site", "sites"));
    for (const SiteReport& site : report.never_freed) {
      const SiteStats& s = site.stats;
      out += fmt::format("  {} in {} by {} ({}); {} made, {} freed{}{}\n", FormatBytes(s.outstanding_bytes),
                         Plural(s.outstanding_count, "allocation", "allocations"), ApiName(static_cast<uint8_t>(s.api)),
                         kKindWords[static_cast<size_t>(s.kind)], s.allocations, s.frees,
                         report.processes.size() > 1 ? fmt::format(", pid {}", s.pid) : "",
                         site.kept_growing ? ", kept growing" : "");
      for (size_t i = 0; i < site.frames.size() && i < kFramesShown; ++i)
        out += fmt::format("      {} {}\n", i == 0 ? "at" : "  ", FrameText(site.frames[i]));
      if (site.frames.size() > kFramesShown)
        out += fmt::format("         ... {} more frames (--json has them all)\n", site.frames.size() - kFramesShown);
    }
  }
  out += "\nVerdict: " + report.verdict_text + "\n";
  for (const std::string& note : report.notes) out += "Note: " + note + "\n";
  return out;
}

json TraceReportJson(const TraceReport& report) {
  const TraceRunFacts& facts = report.facts;
  json out;
  out["command"] = facts.command;
  out["program"] = facts.program_path;
  json status;
  if (facts.status) {
    status["exit_code"] = facts.status->signal == 0 ? json(facts.status->exit_code) : json();
    status["signal"] = facts.status->signal != 0 ? json(facts.status->signal) : json();
    status["shell_code"] = facts.status->ShellCode();
    status["description"] = facts.status->Describe();
  }
  out["status"] = facts.status ? status : json();
  out["duration_seconds"] = static_cast<double>(facts.duration_ns) / 1e9;
  json processes = json::array();
  for (const TracedProcess& p : report.processes)
    processes.push_back({{"pid", p.pid}, {"parent", p.parent}, {"executable", p.executable},
                         {"exited_normally", p.exited_normally}});
  out["processes"] = std::move(processes);
  json kinds;
  uint64_t allocations = 0, frees = 0, failed = 0;
  for (int kind = 1; kind < kKindCount; ++kind) {
    const KindTotals& k = report.kinds[kind];
    kinds[kKindKeys[kind]] = {{"outstanding_bytes", k.outstanding_bytes}, {"outstanding_allocations", k.outstanding_count},
                              {"peak_bytes", k.peak_bytes}, {"allocations", k.allocations},
                              {"bytes_allocated", k.bytes_allocated}, {"frees", k.frees},
                              {"failed_allocations", k.failed_allocations}};
    allocations += k.allocations;
    frees += k.frees;
    failed += k.failed_allocations;
  }
  out["kinds"] = std::move(kinds);
  out["totals"] = {{"outstanding_bytes", report.outstanding_bytes}, {"peak_bytes", report.peak_bytes},
                   {"allocations", allocations}, {"frees", frees}, {"failed_allocations", failed},
                   {"frees_of_unknown", report.frees_of_unknown}, {"failed_frees", report.failed_frees}};
  json never_freed = json::array();
  for (const SiteReport& site : report.never_freed) never_freed.push_back(SiteJson(site));
  out["never_freed"] = std::move(never_freed);
  json sites = json::array();
  for (const SiteReport& site : report.sites) sites.push_back(SiteJson(site));
  out["sites"] = std::move(sites);
  json verdict;
  verdict["state"] = TraceVerdictName(report.verdict);
  verdict["leak"] = report.verdict == TraceVerdict::kLeak;
  verdict["summary"] = report.verdict_text;
  if (report.growth) {
    verdict["rate_bytes_per_min"] = report.growth->rate_bytes_per_min;
    verdict["span_seconds"] = std::chrono::duration<double>(report.growth->span).count();
    verdict["peak_bytes"] = report.growth->peak_bytes;
    verdict["now_bytes"] = report.growth->latest_bytes;
    verdict["unreleased_between_phases_bytes"] = report.growth->unreleased_bytes;
    verdict["troughs_rising"] = report.growth->troughs_rising;
  }
  out["verdict"] = std::move(verdict);
  const RingCounters& c = facts.counters;
  auto counter = [&facts](auto value) { return facts.counters_known ? json(value) : json(); };
  out["library"] = {{"loaded", facts.library_problem.empty() && (!facts.counters_known || c.processes_attached > 0)},
                    {"problem", facts.library_problem.empty() ? json() : json(facts.library_problem)},
                    {"ring_corrupt", facts.ring_corruption.empty() ? json() : json(facts.ring_corruption)},
                    {"processes_attached", counter(c.processes_attached)},
                    {"proc_address_wrapped", counter(c.proc_address_wrapped)},
                    {"proc_address_by_name", counter(c.proc_address_by_name)},
                    {"proc_address_unmatched", counter(c.proc_address_unmatched)},
                    {"dlsym_wrapped", counter(c.dlsym_wrapped)},
                    {"records", report.records},
                    {"records_over_limits", report.records_over_limits},
                    {"records_dropped", counter(c.records_dropped)},
                    {"abandoned", counter(c.abandoned)}};
  out["notes"] = report.notes;
  return out;
}

std::string RenderInterval(const IntervalSummary& interval, const AllocationLedger& ledger, Symbolizer& symbolizer,
                           uint64_t elapsed_ns) {
  const double seconds = std::max(1e-9, static_cast<double>(interval.end_ns - interval.start_ns) / 1e9);
  std::string line = fmt::format("gpudoctor trace-alloc: {:>6}", FormatDuration(std::chrono::nanoseconds(elapsed_ns)));
  for (int kind = 1; kind < kKindCount; ++kind) {
    const int64_t growth = interval.growth_bytes[kind];
    const auto outstanding = static_cast<double>(interval.kinds[kind].outstanding_bytes);
    line += fmt::format("  {} {}", kKindWords[kind], FormatBytes(outstanding));
    if (growth != 0) {
      line += fmt::format(" ({}{}, {}/s)", growth > 0 ? "+" : "", FormatBytes(static_cast<double>(growth)),
                          FormatBytes(static_cast<double>(growth) / seconds));
    }
  }
  line += fmt::format("  peak {}  +{} -{}\n", FormatBytes(static_cast<double>(interval.peak_bytes)),
                      Plural(interval.allocations, "allocation", "allocations"), Plural(interval.frees, "free", "frees"));
  constexpr size_t kShown = 5;
  for (size_t i = 0; i < interval.growing.size() && i < kShown; ++i) {
    const SiteGrowth& g = interval.growing[i];
    line += fmt::format("  growing: +{} (holds {}, {} in a row) at {}\n",
                        FormatBytes(static_cast<double>(g.growth_bytes)),
                        FormatBytes(static_cast<double>(g.outstanding_bytes)),
                        Plural(g.intervals_growing, "interval", "intervals"),
                        SiteLabel(FramesFor(ledger, symbolizer, g.site)));
  }
  return line;
}

json IntervalJson(const IntervalSummary& interval, const AllocationLedger& ledger, Symbolizer& symbolizer,
                  uint64_t elapsed_ns) {
  const double seconds = std::max(1e-9, static_cast<double>(interval.end_ns - interval.start_ns) / 1e9);
  json out;
  out["event"] = "interval";
  out["elapsed_seconds"] = static_cast<double>(elapsed_ns) / 1e9;
  out["outstanding_bytes"] = interval.outstanding_bytes;
  out["growth_bytes"] = interval.growth_total_bytes;
  out["growth_bytes_per_second"] = static_cast<double>(interval.growth_total_bytes) / seconds;
  out["peak_bytes"] = interval.peak_bytes;
  out["allocations"] = interval.allocations;
  out["frees"] = interval.frees;
  json kinds;
  for (int kind = 1; kind < kKindCount; ++kind)
    kinds[kKindKeys[kind]] = {{"outstanding_bytes", interval.kinds[kind].outstanding_bytes},
                              {"growth_bytes", interval.growth_bytes[kind]}};
  out["kinds"] = std::move(kinds);
  json growing = json::array();
  for (const SiteGrowth& g : interval.growing)
    growing.push_back({{"site", g.site}, {"growth_bytes", g.growth_bytes}, {"outstanding_bytes", g.outstanding_bytes},
                       {"intervals_growing", g.intervals_growing},
                       {"frames", FramesJson(FramesFor(ledger, symbolizer, g.site))}});
  out["growing_sites"] = std::move(growing);
  return out;
}

}  // namespace gpudoctor
