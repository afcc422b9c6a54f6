// Reads the fleet's current state from Prometheus (every target of one
// scrape job) or straight from a list of agents' /metrics, for sites without
// a Prometheus. Both fill the same FleetState from the same metric families
// (docs/agent.md), so every view works on either.
//
//   FleetReadOptions options{.job = "gpudoctor", .at = clock.Now()};
//   Result<FleetState> state = ReadFleetFromPrometheus(api, options);
//   Result<FleetState> small = ReadFleetFromAgents({"http://gpu01:9847", ...}, {.timeout = 3s});
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "fleet/fleet_state.h"
#include "fleet/prometheus_api.h"

namespace gpudoctor {

struct FleetReadOptions {
  std::string job = "gpudoctor";  // the scrape job of the agents
  WallTime at;
  // How far back a host that stopped answering is still remembered by name.
  Duration remember = std::chrono::hours(24 * 7);
  Duration timeout = std::chrono::seconds(5);  // each agent's scrape (agents only)
  std::string bearer_token;                    // sent to agents (agents only)
};

Result<FleetState> ReadFleetFromPrometheus(PrometheusApi& api, const FleetReadOptions& options);

// The most of an agent's /metrics that is read (a real one is about 64 KB at
// 8 GPUs). It is read as it arrives and only the families the views need are
// kept (at most PromTextLimits' 1 MiB an agent, about 6,000 findings), so 16 agents read at once
// cost little whatever they send.
inline constexpr size_t kMaxAgentMetricsBytes = 16 << 20;

// `urls`: each agent's base URL ("http://gpu01:9847", user-info for basic
// authentication allowed). An agent that does not answer is a host that is
// not answering, never an error of the whole read; messages and host names
// show a URL with its credentials masked.
FleetState ReadFleetFromAgents(const std::vector<std::string>& urls, const FleetReadOptions& options);

// The URLs of an agents file's text: one base URL per line; blank lines and
// '#' comments are skipped. An error names `path` and the line.
Result<std::vector<std::string>> ParseAgentsList(std::string_view text, const std::string& path);

}  // namespace gpudoctor
