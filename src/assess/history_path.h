// Where `gpudoctor agent` keeps its history unless told otherwise (--db); the
// one-shot commands read it from there when they judge this machine live.
#pragma once

namespace gpudoctor {

inline constexpr const char* kDefaultHistoryDatabase = "/var/lib/gpudoctor/history.db";

}  // namespace gpudoctor
