// TrendConfig from an already parsed TOML document, for the agent's config
// loader (which owns the whole file).
//
//   toml::table root = toml::parse_file(path);
//   auto detectors = TrendConfigFromToml(root);
#pragma once

#include <toml++/toml.h>

#include "health/detectors/trend_config.h"

namespace gpudoctor {

Result<TrendConfig> TrendConfigFromToml(const toml::table& root);

}  // namespace gpudoctor
