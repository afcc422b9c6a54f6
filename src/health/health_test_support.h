// Test helpers: a healthy server described in full, which each rule test
// then breaks in one place.
#pragma once

#include <string>
#include <vector>

#include "health/rules.h"

namespace gpudoctor::testing_support {

inline const WallTime kNow{std::chrono::seconds{1'700'000'000}};

// `count` H100-like GPUs, idle and cool, every field read.
Snapshot HealthySnapshot(uint32_t count = 2);
// Host signals of a healthy server whose PCI bus matches HealthySnapshot(count).
HostSignals HealthyHost(uint32_t gpu_count = 2);

LogEvent XidLogEvent(uint32_t xid, std::string pci_bus_id, EventSeverity severity, std::optional<WallTime> time);

// Findings with this id.
std::vector<Finding> WithId(const std::vector<Finding>& findings, std::string_view id);
// The one finding with this id; a test failure (and an empty finding) unless there is exactly one.
Finding Single(const std::vector<Finding>& findings, std::string_view id);
// Whether a line of the finding's evidence contains `text`.
bool EvidenceHas(const Finding& finding, std::string_view text);
// The findings that are a warning or critical.
std::vector<Finding> Problems(const std::vector<Finding>& findings);
// Evaluates with the default config.
std::vector<Finding> Evaluate(const Snapshot* snapshot, const HostSignals* host = nullptr,
                              const std::vector<LogEvent>* events = nullptr, const Snapshot* previous = nullptr);
// The default config with `toml` applied over it; a test failure (and the default) when it is refused.
HealthConfig ConfigWith(std::string_view toml);

}  // namespace gpudoctor::testing_support
