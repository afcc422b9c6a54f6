// Prometheus text exposition (format 0.0.4) of the agent's state: GPU
// readings, open findings and the agent's own health.
//
// Names carry their units (gpudoctor_gpu_temperature_celsius,
// gpudoctor_gpu_power_watts, gpudoctor_gpu_memory_used_bytes). A reading the
// GPU does not support, or that failed, has no sample at all: Prometheus sees
// it as absent, never as 0. Everything is rendered from the current state
// (MetricsCache shares one rendering among the scrapes of a state and second),
// so a resolved finding's series simply disappears.
//
// With dcgm_compatible set, the same readings are also emitted under
// dcgm-exporter's names, units and labels (DCGM_FI_DEV_GPU_TEMP{gpu,UUID,
// pci_bus_id,device,modelName,Hostname,DCGM_FI_DRIVER_VERSION}) so existing dashboards keep working.
//
//   MetricsInput input{.snapshot = view.LatestSnapshot().get(), .findings = view.OpenFindings(),
//                      .checklist = view.ChecklistItems(), .status = view.Status(), .now = clock.Now()};
//   std::string body = RenderPrometheusMetrics(input, {.dcgm_compatible = true});
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/agent_view.h"
#include "host/machine_identity.h"

namespace gpudoctor {

// Delivery counters of the alert sinks, for gpudoctor_alerts_* metrics.
struct AlertCounters {
  struct Sink {
    std::string name;  // "webhook", "syslog", "exec"
    uint64_t delivered = 0;
    uint64_t failed = 0;  // gave up after its retries
    uint64_t queued = 0;  // waiting for the one being delivered
    std::optional<WallTime> delivering_since;  // an alert is being delivered (with its retries) since then
    std::string last_error;  // of the last failed delivery; empty when none failed
    bool operator==(const Sink&) const = default;
  };
  std::vector<Sink> sinks;
  uint64_t suppressed = 0;  // held back by the rate limit
  uint64_t grouped = 0;     // never sent: part of a root-cause finding that was
  uint64_t dropped = 0;     // lost because the delivery queue was full
  bool operator==(const AlertCounters&) const = default;
};

struct MetricsOptions {
  bool dcgm_compatible = false;
  // The name of the host label on dcgm-exporter's series: "Hostname", as every
  // released dcgm-exporter writes it, or "hostname", as its main branch does.
  std::string dcgm_hostname_label = "Hostname";
  // Per-GPU readings older than this are not exported (gpudoctor_up is 0):
  // a stalled sampler must not look like a steady GPU.
  Duration stale_after = std::chrono::seconds(15);
  std::string version;  // for gpudoctor_build_info; empty: not emitted
  // gpudoctor_build_info's other labels (commit, build_date, ...: cli/version.h), in order; a "version" here is
  // left out, as `version` gives it.
  std::vector<std::pair<std::string, std::string>> build_labels;
  // Board and chassis serials and slot names, for gpudoctor_host_info and the
  // `slot` label of gpudoctor_gpu_info: what the fleet's card-or-slot attribution reads.
  MachineIdentity machine;
};

struct MetricsInput {
  const Snapshot* snapshot = nullptr;   // null before the first sample
  std::vector<StoredFinding> findings;  // the open ones
  std::vector<ChecklistItem> checklist;  // AgentView::ChecklistItems
  AgentStatus status;
  WallTime now;
  const AlertCounters* alerts = nullptr;  // null: no alert metrics
};

// The content type Prometheus expects for this format.
inline constexpr std::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

std::string RenderPrometheusMetrics(const MetricsInput& input, const MetricsOptions& options);

// Every metric family name RenderPrometheusMetrics can emit, gpudoctor's own
// and dcgm-exporter's; deploy/ files are checked against it.
std::vector<std::string_view> MetricFamilyNames();

// "0000:3b:00.0" -> "00000000:3B:00.0", the form NVML and dcgm-exporter print.
std::string NvmlStylePciBusId(std::string_view canonical);

}  // namespace gpudoctor
