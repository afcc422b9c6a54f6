// A point in time as the commands take it on their command line (history
// --since, maintenance done --at).
#pragma once

#include <optional>
#include <string_view>

#include "common/clock.h"

namespace gpudoctor {

// "now", a duration before now ("90m", "7d"), or UTC "2024-05-01T12:00:00Z"
// (seconds, fraction and Z optional; a space may replace the T).
std::optional<WallTime> ParseWhen(std::string_view text, WallTime now);

}  // namespace gpudoctor
