// CorrelationConfig and EscalationConfig from an already parsed TOML
// document, for the health config loader (health_config.cc), which owns the
// whole file.
#pragma once

#include <toml++/toml.h>

#include <string_view>

#include "health/correlate/correlation_config.h"

namespace gpudoctor {

// Applies the `correlations` and `escalation` tables of a parsed config to
// `correlations` and `escalation`. Errors name `origin` and the key. A new
// correlation id must set its kind and may not reuse a rule's id.
Status ApplyCorrelationTables(const toml::table& root, std::string_view origin, CorrelationConfig& correlations,
                              EscalationConfig& escalation);

}  // namespace gpudoctor
