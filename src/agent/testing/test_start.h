// Test support: the moment the agent's unit tests start their clocks at
// (2024-05-01 12:00 UTC), one for every test file of the module.
#pragma once

#include "common/clock.h"

namespace gpudoctor::agent_testing {

inline const WallTime kStart = FromUnixMillis(1'714'564'800'000);

}  // namespace gpudoctor::agent_testing
