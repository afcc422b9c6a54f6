// HistoryStore: the agent's memory of what each GPU did and of every finding
// it reported, kept for days so trends can be charted and incidents reviewed.
//
// Two implementations share one contract (history_store_contract_test.cc):
// SqliteHistoryStore for the agent and `gpudoctor history`, MemoryHistoryStore
// for tests of code that needs a store.
//
//   auto store = SqliteHistoryStore::Open(path, SqliteStoreOptions{});
//   AppendSnapshot(**store, snapshot);                       // samples
//   auto changes = (*store)->UpsertFindings(findings, now);  // opened / resolved
//   (*store)->RecordIncidents(tracker.Touched());             // or: incidents decided elsewhere
//   (*store)->RecordRemediation(ack);                         // gpudoctor ack
//   (*store)->RecordDiagnostic(record);                       // gpudoctor diag
//   (*store)->Maintain(now);                                 // downsample, prune
//   auto temps = (*store)->QuerySeries({.gpu = "0", .metric = Metric::kTemperatureC,
//                                       .from = now - 1h, .until = now});
//
// Missing readings stay missing: a sample field the GPU did not report is
// stored as NULL and never shows up as a 0 in a series.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "health/finding.h"
#include "health/maintenance.h"
#include "logs/event.h"
#include "model/diagnostic.h"
#include "model/snapshot.h"
#include "store/metric.h"

namespace gpudoctor {

// One reading of one GPU. Values are in the units of kMetrics.
struct GpuSample {
  WallTime time;
  uint32_t gpu_index = 0;
  std::string uuid;  // empty when the GPU did not report one
  // The GPU's identity as it answered (empty where not read); kept with the
  // GPU, not per sample (GpuIdentity).
  std::string serial;
  std::string pci_bus_id;
  std::string name;
  std::array<std::optional<double>, kMetricCount> values{};

  std::optional<double>& operator[](Metric m) { return values[MetricSlot(m)]; }
  const std::optional<double>& operator[](Metric m) const { return values[MetricSlot(m)]; }
  bool operator==(const GpuSample&) const = default;
};

// GPU memory held by one process on one GPU, the input of leak hunts.
struct ProcessMemorySample {
  WallTime time;
  uint32_t gpu_index = 0;
  std::string uuid;
  uint32_t pid = 0;
  std::string name;                       // empty when unknown
  std::optional<uint64_t> used_bytes;     // nullopt: not reported
  bool operator==(const ProcessMemorySample&) const = default;
};

struct GpuIdentity {
  uint32_t index = 0;
  std::string uuid;
  // What the GPU was last seen as (empty when never reported): what names a
  // GPU that has since stopped answering.
  std::string serial;
  std::string pci_bus_id;
  std::string name;
  std::optional<WallTime> last_seen;
  bool operator==(const GpuIdentity&) const = default;
};

// Raw samples, or min/avg/max over 1-minute or 1-hour buckets.
enum class Resolution { kRaw, kMinute, kHour };
const char* ResolutionName(Resolution resolution);  // "raw", "1m", "1h"
Duration BucketWidth(Resolution resolution);         // 0 for raw

struct SeriesPoint {
  WallTime time;  // sample time, or the start of the bucket
  double min = 0;
  double avg = 0;
  double max = 0;
  bool operator==(const SeriesPoint&) const = default;
};

struct Series {
  GpuIdentity gpu;
  Metric metric = Metric::kTemperatureC;
  Resolution resolution = Resolution::kRaw;
  std::vector<SeriesPoint> points;  // oldest first; instants without a value are absent
};

struct SeriesQuery {
  std::string gpu;  // an index ("0") or a UUID
  Metric metric = Metric::kTemperatureC;
  WallTime from;   // inclusive
  WallTime until;  // exclusive
  // nullopt: raw up to 6 hours, 1-minute buckets up to 7 days, else 1-hour
  // buckets; coarser when the finer data is already pruned for `from`.
  std::optional<Resolution> resolution;
};

// How long each kind of data is kept, and the size the file may reach.
struct RetentionPolicy {
  Duration raw = std::chrono::hours(24 * 7);
  Duration minute = std::chrono::hours(24 * 90);
  Duration hour = std::chrono::hours(24 * 90);
  Duration resolved_findings = std::chrono::hours(24 * 90);
  // Above this the oldest samples go first, whatever their age (SQLite only).
  uint64_t max_bytes = uint64_t{1} << 30;
};

// A finding as the store remembers it: one incident from open to resolved.
struct StoredFinding {
  int64_t incident_id = 0;  // stable, increasing
  std::string key;          // FindingKey(finding)
  Finding finding;          // as last seen
  WallTime opened_at;
  WallTime last_seen;
  std::optional<WallTime> resolved_at;
  bool open() const { return !resolved_at.has_value(); }
  bool operator==(const StoredFinding&) const = default;
};

struct FindingTransition {
  // kAcknowledged: an operator resolved it (gpudoctor ack).
  enum class Kind { kOpened, kResolved, kSeverityChanged, kAcknowledged };
  Kind kind = Kind::kOpened;
  StoredFinding incident;  // after the transition
  bool operator==(const FindingTransition&) const = default;
};
// "opened", "resolved", "severity_changed", "acknowledged"
const char* TransitionName(FindingTransition::Kind kind);
// Whether the incident is over after a transition of this kind.
bool ClosesIncident(FindingTransition::Kind kind);

// A boot of the host, as the agent saw it (/proc/sys/kernel/random/boot_id),
// so that an Xid can be judged to have come back after a reboot.
struct BootRecord {
  std::string boot_id;
  WallTime booted_at;
  bool operator==(const BootRecord&) const = default;
};

// What was done about a finding, kept so the agent can resolve the incident
// and count remediations: an operator's acknowledgement (gpudoctor ack), or a
// reboot that came while a critical finding was open.
struct Remediation {
  enum class Kind { kAck, kReboot };
  int64_t id = 0;  // given by the store
  Kind kind = Kind::kAck;
  WallTime at;
  int64_t incident_id = 0;
  std::string incident_key;
  Severity severity = Severity::kWarning;  // the finding's, when it was remediated
  std::optional<GpuRef> gpu;               // the finding's GPU; nullopt: the host
  bool gpu_reset = false;                  // ack: the operator also reset the GPU
  std::string actor;                       // ack: who
  std::string note;                        // ack: what was done
  bool operator==(const Remediation&) const = default;
};
const char* RemediationKindName(Remediation::Kind kind);  // "ack", "reboot"
// One line: "acknowledged incident 17 (temperature_high@GPU-...) by alice, GPU reset: reseated the card",
// "reboot while incident 9 (xid_recent@GPU-.../79) was critical".
std::string DescribeRemediation(const Remediation& remediation);

// The GPU count the agent learned from its first healthy sample.
struct LearnedGpuCount {
  uint32_t count = 0;
  WallTime learned_at;
  bool operator==(const LearnedGpuCount&) const = default;
};

struct RemediationQuery {
  WallTime from;  // `at` in [from, until)
  WallTime until;
  int64_t after_id = 0;  // only those recorded after this one
};

struct FindingQuery {
  WallTime from;   // incidents open at any time in [from, until)
  WallTime until;
  std::string gpu;       // empty: all; else an index or a UUID
  bool open_only = false;
};

// The events the windowed rules judge (xid_recent, log_errors), kept so that
// an agent that restarts judges the same window as before.
struct RecentEvents {
  std::vector<XidEvent> nvml_xids;  // delivered by NVML's event API
  std::vector<LogEvent> log;        // read from the kernel log
  bool empty() const { return nvml_xids.empty() && log.empty(); }
  size_t size() const { return nvml_xids.size() + log.size(); }
};

struct MaintenanceReport {
  int64_t buckets_written = 0;  // 1-minute and 1-hour rows written
  int64_t rows_pruned = 0;
  bool more_work = false;       // call again soon: catching up in bounded steps
};

class HistoryStore {
 public:
  virtual ~HistoryStore() = default;

  // Adds samples; a repeated (GPU, time) replaces the earlier one.
  virtual Status Append(std::span<const GpuSample> gpus, std::span<const ProcessMemorySample> processes) = 0;

  // Records the findings present `now`: opens an incident for each new key,
  // refreshes open ones and resolves those absent from `findings`. Returns the
  // transitions only once they are durable, so an alert sent for one never
  // refers to an incident a crash could lose. (An IncidentTracker over
  // OpenIncidents, then RecordIncidents.)
  Result<std::vector<FindingTransition>> UpsertFindings(std::span<const Finding> findings, WallTime now);

  // Writes each incident as it is now, inserting it or replacing the one with
  // its incident_id, durably before returning. At most one incident per key
  // may be open: write the ones that resolve before the ones that open.
  virtual Status RecordIncidents(std::span<const StoredFinding> incidents) = 0;
  // Every open incident, by id.
  virtual Result<std::vector<StoredFinding>> OpenIncidents() const = 0;
  // The highest incident id ever used (0: none), so ids continue after a restart.
  virtual Result<int64_t> LastIncidentId() const = 0;

  // Keeps events received at `received_at`; Maintain drops them after the raw
  // retention. Events without a time of their own are kept by `received_at`.
  virtual Status AppendEvents(const RecentEvents& events, WallTime received_at) = 0;
  // The events received in [from, until), oldest first. A history too old to
  // hold events (read without upgrading) has none.
  virtual Result<RecentEvents> QueryEvents(WallTime from, WallTime until) const = 0;

  // Records the host's boot once, seen `now`; false when it was already recorded.
  virtual Result<bool> RecordBoot(const BootRecord& boot, WallTime now) = 0;
  // The boots with booted_at in [from, until), oldest first.
  virtual Result<std::vector<BootRecord>> QueryBoots(WallTime from, WallTime until) const = 0;
  // Keeps a remediation durably; its id.
  virtual Result<int64_t> RecordRemediation(const Remediation& remediation) = 0;
  // Oldest first. A history too old to hold them (read without upgrading) has none.
  virtual Result<std::vector<Remediation>> QueryRemediations(const RemediationQuery& query) const = 0;

  // Keeps a maintenance task an operator did (gpudoctor maintenance done); never pruned.
  virtual Status RecordMaintenance(const MaintenanceDone& done, WallTime recorded_at) = 0;
  // Every record, oldest first. A history too old to hold them has none.
  virtual Result<std::vector<MaintenanceDone>> QueryMaintenance() const = 0;
  // Keeps `count` as the host's expected GPU count unless one is kept
  // already: the first healthy sample decides. True when kept now.
  virtual Result<bool> LearnGpuCount(uint32_t count, WallTime at) = 0;
  virtual Result<std::optional<LearnedGpuCount>> QueryLearnedGpuCount() const = 0;

  // Keeps the outcome of one `gpudoctor diag` test durably; Maintain drops it
  // after the resolved-findings retention.
  virtual Status RecordDiagnostic(const DiagnosticRecord& record) = 0;
  // The newest record of each GPU (its UUID, else its index when it had none)
  // and test, by GPU index, UUID and test; of two as new, the one recorded
  // last. A history too old to hold them has none.
  virtual Result<std::vector<DiagnosticRecord>> LatestDiagnostics() const = 0;

  // Writes the completed 1-minute and 1-hour buckets and prunes by the
  // retention policy, a bounded amount of work per call.
  virtual Result<MaintenanceReport> Maintain(WallTime now) = 0;

  virtual Result<std::vector<GpuIdentity>> ListGpus() const = 0;
  // The time of the newest GPU sample ever appended; nullopt when none was.
  // Kept beyond the raw retention, so it tells how long ago the agent last sampled.
  virtual Result<std::optional<WallTime>> NewestSampleTime() const = 0;
  virtual Result<Series> QuerySeries(const SeriesQuery& query) const = 0;
  // Oldest first.
  virtual Result<std::vector<ProcessMemorySample>> QueryProcessMemory(std::string_view gpu, WallTime from,
                                                                      WallTime until) const = 0;
  // Most recently opened first.
  virtual Result<std::vector<StoredFinding>> QueryFindings(const FindingQuery& query) const = 0;
};

// The resolution an automatic SeriesQuery uses for [from, until), given the
// newest sample the store holds.
Resolution ChooseResolution(WallTime from, WallTime until, WallTime newest, const RetentionPolicy& retention);

// Whether `selector` (an index such as "3", or a UUID) names `gpu`.
bool MatchesGpu(const GpuIdentity& gpu, std::string_view selector);

}  // namespace gpudoctor
