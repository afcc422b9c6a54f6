#include "health/correlate/correlate.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "common/text.h"
#include "health/correlate/gpu_token.h"
#include "health/rule_context.h"

namespace gpudoctor {
namespace {

using rules_internal::FormatSpan;
using rules_internal::JoinWithAnd;
using rules_internal::Plural;

constexpr size_t kNone = static_cast<size_t>(-1);
constexpr std::string_view kXidRule = "xid_recent";

bool IsProblem(const Finding& finding) {
  return finding.severity == Severity::kWarning || finding.severity == Severity::kCritical;
}

bool Contains(const std::vector<std::string>& ids, std::string_view id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

std::string MemberLine(const Finding& finding) {
  return fmt::format("{} {}: {}", finding.id, SeverityName(finding.severity), finding.summary);
}

// An Xid as the log or NVML's event API reported it.
struct XidSighting {
  uint32_t code = 0;
  std::optional<WallTime> time;
  const LogEvent* log = nullptr;   // set for a log line
  const XidEvent* nvml = nullptr;  // set for an NVML event
};

// An xid_recent finding by its index (findings grow as roots are added: no pointers into them), with its GPU's bus
// id normalised once.
struct XidFindingRef {
  size_t index = 0;
  std::optional<std::string> bus;
};

// Whether the sighting (its log line's bus id normalised as `sighting_bus`) is of the GPU `ref` (bus `ref_bus`).
bool Names(const GpuRef& ref, const std::optional<std::string>& ref_bus, const XidSighting& sighting,
           const std::optional<std::string>& sighting_bus) {
  if (sighting.nvml != nullptr) return ref.index && *ref.index == sighting.nvml->gpu_index;
  const LogEvent& event = *sighting.log;
  if (!event.gpu_uuid.empty() && event.gpu_uuid == ref.uuid) return true;
  return sighting_bus && sighting_bus == ref_bus;
}

constexpr size_t kMaxSightings = 1'000'000;

// The Xids the rules judged: within xid_recent's window (a log line without
// a time always counts, as it does for the rule).
std::vector<XidSighting> SightXids(const HealthInput& input, Duration window) {
  const WallTime oldest = input.now - std::chrono::duration_cast<WallTime::duration>(window);
  std::vector<XidSighting> sightings;
  if (input.log_events != nullptr) {
    for (const LogEvent& event : *input.log_events) {
      if (event.kind != "xid" || !event.xid || (event.time && *event.time < oldest)) continue;
      sightings.push_back({.code = *event.xid, .time = event.time, .log = &event});
      // A folded storm (logs/event_collector.h) was there all along, its lines
      // no more than a second apart: one sighting per second of it. A crowd of
      // differing lines came at any pace: its first line is all that is known.
      if (event.repeats_differ && event.repeats_from) {
        sightings.push_back({.code = *event.xid, .time = std::max(*event.repeats_from, oldest), .log = &event});
      } else if (event.repeats > 0 && event.repeats_from && event.time) {
        for (WallTime at = std::max(*event.repeats_from, oldest); at < *event.time && sightings.size() < kMaxSightings;
             at += std::chrono::seconds(1)) {
          sightings.push_back({.code = *event.xid, .time = at, .log = &event});
        }
      }
    }
  }
  const std::vector<XidEvent>* nvml = input.nvml_xid_events;
  if (nvml == nullptr && input.snapshot != nullptr) nvml = &input.snapshot->xid_events;
  if (nvml == nullptr) return sightings;
  for (const XidEvent& event : *nvml) {
    if (event.time < oldest || event.xid > UINT32_MAX) continue;
    sightings.push_back({.code = static_cast<uint32_t>(event.xid), .time = event.time, .nvml = &event});
  }
  return sightings;
}

// The Xids of one event burst, oldest first.
using Burst = std::vector<const XidSighting*>;

class Correlation {
 public:
  Correlation(std::vector<Finding>& findings, const HealthInput& input, const HealthConfig& config)
      : findings_(findings),
        input_(input),
        window_(config.thresholds.xid_recent.window),
        sightings_(SightXids(input, window_)) {
    // Correlation only ever appends findings (its roots), so these indices hold throughout.
    for (size_t i = 0; i < findings_.size(); ++i) {
      const Finding& finding = findings_[i];
      if (finding.id != kXidRule || !finding.gpu) continue;
      xid_findings_[finding.subject].push_back({i, NormalizePciBusId(finding.gpu->pci_bus_id)});
    }
  }

  void Apply(const CorrelationRule& rule) {
    if (!rule.enabled) return;
    switch (rule.kind) {
      case CorrelationKind::kNamedCause: return NamedCause(rule);
      case CorrelationKind::kAbsorb: return Absorb(rule);
      case CorrelationKind::kEventBurst: return EventBurst(rule);
      case CorrelationKind::kSharedCause: return SharedCause(rule);
    }
  }

 private:
  // Marks `member` part of `root_key`, and moves the findings that were part
  // of it along: members always name the top of their story.
  void Join(size_t member, const std::string& root_key) {
    const std::string member_key = FindingKey(findings_[member]);
    for (Finding& finding : findings_)
      if (finding.part_of == member_key) finding.part_of = root_key;
    findings_[member].part_of = root_key;
  }

  // The xid_recent finding of the sighting's Xid and GPU, or kNone.
  size_t XidFinding(const XidSighting& sighting) const {
    auto candidates = xid_findings_.find(std::to_string(sighting.code));
    if (candidates == xid_findings_.end()) return kNone;
    std::optional<std::string> bus;
    if (sighting.log != nullptr) bus = NormalizePciBusId(sighting.log->pci_bus_id);
    for (const XidFindingRef& finding : candidates->second) {
      if (Names(*findings_[finding.index].gpu, finding.bus, sighting, bus)) return finding.index;
    }
    return kNone;
  }

  size_t XidFindingOn(const GpuRef& gpu, uint32_t code) const {
    const std::string subject = std::to_string(code);
    for (size_t i = 0; i < findings_.size(); ++i) {
      const Finding& finding = findings_[i];
      if (finding.id == kXidRule && finding.subject == subject && finding.gpu && SameGpu(*finding.gpu, gpu)) return i;
    }
    return kNone;
  }

  void NamedCause(const CorrelationRule& rule) {
    const RE2 regex(rule.cause_regex);
    std::map<std::pair<size_t, uint32_t>, size_t> lines;  // (finding, the code its lines name) -> lines
    for (const XidSighting& sighting : sightings_) {
      if (sighting.log == nullptr) continue;
      const std::string& text = sighting.log->message.empty() ? sighting.log->raw : sighting.log->message;
      uint32_t cause = 0;
      if (!RE2::PartialMatch(text, regex, &cause) || cause == sighting.code) continue;
      if (size_t finding = XidFinding(sighting); finding != kNone) ++lines[{finding, cause}];
    }
    for (const auto& [named, count] : lines) {
      const auto [member, cause] = named;
      Finding& finding = findings_[member];
      const size_t root = XidFindingOn(*finding.gpu, cause);
      const std::string member_key = FindingKey(finding);
      if (root == kNone || findings_[root].part_of == member_key) {
        finding.evidence.push_back(fmt::format("the driver names Xid {} as the cause of {}; no Xid {} of this GPU is in "
                                               "the last {}",
                                               cause, count == 1 ? "this line" : "these lines", cause,
                                               FormatSpan(window_)));
        finding.actions.insert(finding.actions.begin(),
                               fmt::format("Act on Xid {}, the cause the driver names: see `gpudoctor explain xid {}` "
                                           "and look for it earlier in this GPU's log.",
                                           cause, cause));
        continue;
      }
      findings_[root].evidence.push_back(fmt::format("led to Xid {} on {} ({}): the driver says it was caused by this Xid",
                                                     finding.subject, GpuName(*finding.gpu),
                                                     Plural(count, "line", "lines")));
      const std::string& top = findings_[root].part_of;
      Join(member, top.empty() ? FindingKey(findings_[root]) : top);
    }
  }

  void Absorb(const CorrelationRule& rule) {
    for (size_t root = 0; root < findings_.size(); ++root) {
      if (!Contains(rule.roots, findings_[root].id) || !findings_[root].part_of.empty() || !findings_[root].gpu)
        continue;
      const std::string root_key = FindingKey(findings_[root]);
      for (size_t member = 0; member < findings_.size(); ++member) {
        const Finding& finding = findings_[member];
        if (!Contains(rule.members, finding.id) || !finding.part_of.empty() || !finding.gpu ||
            (!rule.any_subject && finding.subject != findings_[root].subject) ||
            !SameGpu(*finding.gpu, *findings_[root].gpu))
          continue;
        findings_[root].evidence.push_back("grew from " + MemberLine(finding));
        Join(member, root_key);
      }
    }
  }

  // Windows of `rule.within` holding Xids (of warning or worse) from at
  // least `rule.min_gpus` GPUs, found in one pass over the sightings.
  std::vector<Burst> FindBursts(const CorrelationRule& rule) const {
    struct Timed {
      const XidSighting* sighting;
      WallTime time;
      std::string gpu;
    };
    std::vector<Timed> timed;
    for (const XidSighting& sighting : sightings_) {
      const size_t finding = XidFinding(sighting);
      if (!sighting.time || finding == kNone || !IsProblem(findings_[finding])) continue;
      timed.push_back({&sighting, *sighting.time, GpuToken(*findings_[finding].gpu)});
    }
    std::stable_sort(timed.begin(), timed.end(), [](const Timed& a, const Timed& b) { return a.time < b.time; });
    std::vector<Burst> bursts;
    std::map<std::string, size_t> per_gpu;  // sightings of each GPU in [first, end)
    size_t end = 0;
    for (size_t first = 0; first < timed.size();) {
      for (; end < timed.size() && timed[end].time - timed[first].time <= rule.within; ++end) ++per_gpu[timed[end].gpu];
      if (per_gpu.size() >= rule.min_gpus) {
        Burst& burst = bursts.emplace_back();
        for (size_t i = first; i < end; ++i) burst.push_back(timed[i].sighting);
        per_gpu.clear();
        first = end;
        continue;
      }
      if (--per_gpu[timed[first].gpu] == 0) per_gpu.erase(timed[first].gpu);
      ++first;
    }
    return bursts;
  }

  // The first case whose cause tag every Xid of the bursts carries.
  const BurstCase* CaseOf(const CorrelationRule& rule, const std::set<uint32_t>& codes) const {
    if (input_.event_grader == nullptr) return nullptr;
    for (const BurstCase& burst_case : rule.cases) {
      const bool all = std::all_of(codes.begin(), codes.end(), [&](uint32_t code) {
        auto grade = input_.event_grader->GradeXid(code);
        return grade && Contains(grade->cause_tags, burst_case.tag);
      });
      if (all) return &burst_case;
    }
    return nullptr;
  }

  // "at 2024-05-01T12:00:03Z, within 2s: Xid 79 on GPU 0, GPU 1 and GPU 2; Xid 45 on GPU 2"
  std::string DescribeBurst(const Burst& burst, std::set<size_t>& members) const {
    std::map<uint32_t, std::vector<std::string>> gpus_by_code;
    for (const XidSighting* sighting : burst) {
      const size_t finding = XidFinding(*sighting);
      members.insert(finding);
      std::vector<std::string>& gpus = gpus_by_code[sighting->code];
      const std::string name = GpuName(*findings_[finding].gpu);
      if (!Contains(gpus, name)) gpus.push_back(name);
    }
    std::vector<std::string> parts;
    for (const auto& [code, gpus] : gpus_by_code) parts.push_back(fmt::format("Xid {} on {}", code, JoinWithAnd(gpus)));
    const Duration span = *burst.back()->time - *burst.front()->time;
    return fmt::format("at {}, within {}: {}", FormatIsoUtc(*burst.front()->time),
                       FormatSpan(std::max<Duration>(span, std::chrono::seconds(1))), fmt::join(parts, "; "));
  }

  void EventBurst(const CorrelationRule& rule) {
    const std::vector<Burst> bursts = FindBursts(rule);
    if (bursts.empty()) return;
    std::set<size_t> members;
    std::set<uint32_t> codes;
    std::vector<std::string> evidence;
    const Burst* largest = &bursts.front();
    std::set<std::string> largest_gpus;
    for (const Burst& burst : bursts) {
      evidence.push_back(DescribeBurst(burst, members));
      std::set<std::string> gpus;
      for (const XidSighting* sighting : burst) {
        codes.insert(sighting->code);
        gpus.insert(GpuToken(*findings_[XidFinding(*sighting)].gpu));
      }
      if (gpus.size() >= largest_gpus.size()) {
        largest = &burst;
        largest_gpus = std::move(gpus);
      }
    }
    std::set<uint32_t> largest_codes;
    for (const XidSighting* sighting : *largest) largest_codes.insert(sighting->code);
    std::vector<std::string> code_names;
    for (uint32_t code : largest_codes) code_names.push_back(std::to_string(code));
    const Duration span = *largest->back()->time - *largest->front()->time;
    std::string summary = fmt::format("{}: {} {} on {} GPUs within {}", rule.title,
                                      largest_codes.size() == 1 ? "Xid" : "Xids", JoinWithAnd(code_names),
                                      largest_gpus.size(), FormatSpan(std::max<Duration>(span, std::chrono::seconds(1))));
    if (bursts.size() > 1) summary += fmt::format(" ({} bursts in the last {})", bursts.size(), FormatSpan(window_));
    const BurstCase* burst_case = CaseOf(rule, codes);
    AddRoot(rule, {members.begin(), members.end()}, std::move(summary), std::move(evidence),
            burst_case ? burst_case->remedy : rule.remedy);
  }

  void SharedCause(const CorrelationRule& rule) {
    std::set<std::string> explained;  // GPUs whose own fault explains what they show
    for (const Finding& finding : findings_)
      if (Contains(rule.explained_by, finding.id) && finding.gpu && IsProblem(finding))
        explained.insert(GpuToken(*finding.gpu));
    std::map<std::string, std::vector<size_t>> by_gpu;  // the GPUs that count, with their findings
    for (size_t i = 0; i < findings_.size(); ++i) {
      const Finding& finding = findings_[i];
      if (Contains(rule.gpu_rules, finding.id) && finding.gpu && IsProblem(finding) && finding.part_of.empty() &&
          !explained.contains(GpuToken(*finding.gpu)))
        by_gpu[GpuToken(*finding.gpu)].push_back(i);
    }
    std::vector<size_t> host_members;
    for (size_t i = 0; i < findings_.size(); ++i) {
      const Finding& finding = findings_[i];
      if (Contains(rule.host_rules, finding.id) && IsProblem(finding) && finding.part_of.empty()) host_members.push_back(i);
    }
    const size_t total = input_.snapshot != nullptr ? input_.snapshot->gpus.size() : 0;
    const size_t needed =
        std::max<size_t>(rule.min_gpus, static_cast<size_t>(std::ceil(rule.min_share * static_cast<double>(total))));
    if (by_gpu.empty() || (by_gpu.size() < needed && host_members.empty())) return;

    std::vector<size_t> members;
    std::vector<std::string> gpu_names;
    for (const auto& [token, indices] : by_gpu) {
      members.insert(members.end(), indices.begin(), indices.end());
      gpu_names.push_back(GpuName(*findings_[indices.front()].gpu));
    }
    for (size_t i = 0; i < findings_.size(); ++i) {
      const Finding& finding = findings_[i];
      if (Contains(rule.companion_rules, finding.id) && finding.gpu && IsProblem(finding) && finding.part_of.empty() &&
          by_gpu.contains(GpuToken(*finding.gpu)))
        members.push_back(i);
    }
    std::sort(members.begin(), members.end());
    std::string summary = fmt::format("{}: {} {}", rule.title,
                                      total > 0 ? fmt::format("{} of {} GPUs", by_gpu.size(), total)
                                                : Plural(by_gpu.size(), "GPU", "GPUs"),
                                      rule.symptom);
    for (size_t host : host_members) summary += "; " + findings_[host].summary;
    members.insert(members.end(), host_members.begin(), host_members.end());
    std::vector<std::string> evidence{
        fmt::format("{} reported by {}: {}", Plural(by_gpu.size(), "GPU", "GPUs"), JoinWithAnd(rule.gpu_rules),
                    JoinWithAnd(gpu_names))};
    AddRoot(rule, members, std::move(summary), std::move(evidence), rule.remedy);
  }

  void AddRoot(const CorrelationRule& rule, const std::vector<size_t>& members, std::string summary,
               std::vector<std::string> evidence, const Remedy& remedy) {
    Finding root;
    root.id = rule.id;
    root.summary = std::move(summary);
    root.evidence = std::move(evidence);
    root.cause = remedy.cause;
    std::vector<uint32_t> gpu_indexes;  // the members' GPUs, for the commands its actions name
    for (size_t member : members) {
      const Finding& finding = findings_[member];
      if (finding.gpu && finding.gpu->index) gpu_indexes.push_back(*finding.gpu->index);
      if (SeverityRank(finding.severity) > SeverityRank(root.severity)) root.severity = finding.severity;
      if (finding.newest_event_at && (!root.newest_event_at || *finding.newest_event_at > *root.newest_event_at))
        root.newest_event_at = finding.newest_event_at;
      root.evidence.push_back(MemberLine(finding));
    }
    std::sort(gpu_indexes.begin(), gpu_indexes.end());
    gpu_indexes.erase(std::unique(gpu_indexes.begin(), gpu_indexes.end()), gpu_indexes.end());
    root.actions = FillGpuPlaceholder(remedy.actions, gpu_indexes);
    const std::string root_key = FindingKey(root);
    for (size_t member : members)
      if (findings_[member].part_of.empty()) Join(member, root_key);
    findings_.push_back(std::move(root));
  }

  std::vector<Finding>& findings_;
  const HealthInput& input_;
  const Duration window_;
  const std::vector<XidSighting> sightings_;
  std::map<std::string, std::vector<XidFindingRef>, std::less<>> xid_findings_;  // by Xid, in finding order
};

}  // namespace

RootIndex::RootIndex(const std::vector<Finding>& findings) {
  for (const Finding& finding : findings) ++keys_[FindingKey(finding)];
}

bool RootIndex::ToldUnderRoot(const Finding& finding) const {
  if (finding.part_of.empty()) return false;
  auto it = keys_.find(finding.part_of);
  if (it == keys_.end()) return false;
  // Another finding than this one must hold the key.
  return it->second > 1 || FindingKey(finding) != finding.part_of;
}

std::vector<Finding> Correlate(std::vector<Finding> findings, const HealthInput& input, const HealthConfig& config) {
  Correlation correlation(findings, input, config);
  for (const CorrelationRule& rule : config.correlations.rules) correlation.Apply(rule);
  return findings;
}

}  // namespace gpudoctor
