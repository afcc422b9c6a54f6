// The fleet views as JSON: what `gpudoctor fleet --json` prints and
// `gpudoctor fleet --listen` serves under /api/v1/fleet/.
#pragma once

#include <nlohmann/json.hpp>

#include "fleet/fleet_views.h"

namespace gpudoctor {

nlohmann::json FleetChecklistJson(const FleetChecklist& checklist);
nlohmann::json OffendersJson(const Offenders& offenders);
nlohmann::json VerdictJson(const Verdict& verdict);
nlohmann::json CardHistoryJson(const CardHistory& card);

}  // namespace gpudoctor
