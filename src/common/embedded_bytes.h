// Bytes compiled into the binary (the event catalog, the pattern databases,
// the dashboard) are read once at start and copied into the structures that
// use them. ReleaseEmbeddedPages then gives their pages back: they stop
// counting in the process's resident size, and a later read brings them back
// from the binary, unchanged.
#pragma once

#include <string_view>

namespace gpudoctor {

void ReleaseEmbeddedPages(std::string_view bytes);

}  // namespace gpudoctor
